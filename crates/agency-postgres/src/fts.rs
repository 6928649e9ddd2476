//! Full-text queries: a list of words as a `to_tsquery` text in which
//! every word is one quoted term, so no input is ever read as query
//! syntax. The words are joined with OR (`|`): a row matching more of them
//! ranks higher, without one missing word hiding it. The `english`
//! configuration stems them as the indexed columns are stemmed (SQLite's
//! FTS5 tables use the porter tokenizer).

/// The query text for `to_tsquery('english', …)`, or `None` when no word
/// holds a letter or digit: such a query could only match nothing.
pub(crate) fn tsquery(words: &[String]) -> Option<String> {
    let terms: Vec<String> = words
        .iter()
        .filter(|w| w.chars().any(char::is_alphanumeric))
        .map(|w| format!("'{}'", w.replace('\\', "\\\\").replace('\'', "''")))
        .collect();
    (!terms.is_empty()).then(|| terms.join(" | "))
}

#[cfg(test)]
mod tests {
    use super::tsquery;

    #[test]
    fn every_word_is_quoted_and_punctuation_alone_is_no_query() {
        let w = |s: &[&str]| s.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            tsquery(&w(&["deploy", "&", "it's", "a\\b"])).as_deref(),
            Some("'deploy' | 'it''s' | 'a\\\\b'")
        );
        assert_eq!(tsquery(&w(&["*", "(", "'", "|"])), None);
        assert_eq!(tsquery(&[]), None);
    }
}
