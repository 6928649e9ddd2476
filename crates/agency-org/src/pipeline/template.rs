//! Prompt templates of `llm` stages: the Markdown body's `## StageName`
//! sections (their text verbatim, up to the next `## ` heading) and the
//! `{{placeholder}}`s in them, each with its file position so that an
//! uncovered placeholder is reported where it is written.

use crate::diag::Pos;
use crate::markdown::Doc;

/// One `## Heading` section's verbatim text.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptSection {
    pub heading: String,
    pub pos: Pos,
    /// The lines under the heading, blank lines at either end removed.
    pub text: String,
    /// The file line of `text`'s first line.
    pub first_line: u32,
}

/// Every `## ` section of the body with its text as written (the
/// Markdown reader trims lines; a prompt keeps its indentation).
pub fn sections(source: &str, doc: &Doc) -> Vec<PromptSection> {
    let lines: Vec<&str> = source.split('\n').collect();
    let mut out = Vec::new();
    for (i, s) in doc.sections.iter().enumerate() {
        // Lines are 1-based: the heading is lines[line - 1].
        let start = s.pos.line as usize;
        let end = doc
            .sections
            .get(i + 1)
            .map_or(lines.len(), |n| n.pos.line as usize - 1);
        let mut body: Vec<&str> = lines
            .get(start..end.max(start))
            .unwrap_or_default()
            .iter()
            .map(|l| l.trim_end_matches('\r'))
            .collect();
        let lead = body.iter().take_while(|l| l.trim().is_empty()).count();
        body.drain(..lead);
        while body.last().is_some_and(|l| l.trim().is_empty()) {
            body.pop();
        }
        out.push(PromptSection {
            heading: s.heading.clone(),
            pos: s.pos,
            text: body.join("\n"),
            first_line: s.pos.line + 1 + u32::try_from(lead).unwrap_or(0),
        });
    }
    out
}

/// A `{{path}}` in a template: the path as written (trimmed) and where
/// its `{{` is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placeholder {
    pub path: String,
    pub pos: Pos,
}

/// The placeholders of `text`, whose first line is file line `first_line`
/// and starts at column `first_col` (later lines at column 1). An
/// unclosed `{{` is returned with the rest of its line as the path, for
/// the checker to refuse.
pub fn placeholders(text: &str, first_line: u32, first_col: u32) -> Vec<Placeholder> {
    let mut out = Vec::new();
    for (i, line) in text.split('\n').enumerate() {
        let line_no = first_line + u32::try_from(i).unwrap_or(0);
        let base = if i == 0 { first_col } else { 1 };
        let mut rest = line;
        let mut offset = 0usize;
        while let Some(open) = rest.find("{{") {
            let after = &rest[open + 2..];
            let col = base + u32::try_from(line[..offset + open].chars().count()).unwrap_or(0);
            let (path, consumed) = match after.find("}}") {
                Some(close) => (after[..close].trim(), open + 2 + close + 2),
                None => (after.trim(), rest.len()),
            };
            out.push(Placeholder {
                path: path.to_owned(),
                pos: Pos::new(line_no, col),
            });
            offset += consumed;
            rest = &rest[consumed..];
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholder_positions() {
        let p = placeholders("Hi {{ input }}\n  and {{Observer.keywords}}{{x", 10, 5);
        assert_eq!(
            p,
            vec![
                Placeholder {
                    path: "input".into(),
                    pos: Pos::new(10, 8)
                },
                Placeholder {
                    path: "Observer.keywords".into(),
                    pos: Pos::new(11, 7)
                },
                Placeholder {
                    path: "x".into(),
                    pos: Pos::new(11, 28)
                },
            ]
        );
    }

    #[test]
    fn sections_keep_text_verbatim() {
        let src = "---\na: 1\n---\n# T\n\n## One\n\n  indented {{input}}\nnext\n\n## Two\nx\n";
        let doc = crate::markdown::parse(src).expect("parses");
        let s = sections(src, &doc);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].heading, "One");
        assert_eq!(s[0].text, "  indented {{input}}\nnext");
        assert_eq!(s[0].first_line, 8);
        assert_eq!(s[1].text, "x");
    }
}
