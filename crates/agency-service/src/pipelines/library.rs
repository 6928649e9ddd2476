//! A pipeline's library (seed 001's memory system): every run that ends
//! `done` joins its pipeline's portfolio as an example, found again by the
//! words it shares with a later run through the store's full-text index.
//! From it the engine fills a stage's `history` (the earlier runs most
//! like this one, what their Gatekeepers asked to improve) and the
//! built-in Retriever's recall (lessons, playbooks, examples scoring at
//! least [`EXAMPLE_MIN_SCORE`] that their Gatekeeper did not refuse to
//! promote).
//!
//! What is recalled comes from the store, never from a stage's answer: an
//! answer can neither invent a similar run nor lift a low-scoring example.

use std::collections::BTreeSet;

use agency_org::pipeline::{HISTORY_IMPROVEMENTS, HISTORY_RUNS, ReadPath};
use agency_store::{LibraryEntryRow, LibraryKind, PipelineRunRow, Tx};
use serde_json::{Map, Value, json};

use crate::Result;
use crate::service::Op;

/// Lessons, playbooks and examples the Retriever recalls (seed 001 §4).
pub const RECALL_LESSONS: usize = 5;
pub const RECALL_PLAYBOOKS: usize = 3;
pub const RECALL_EXAMPLES: usize = 3;
/// The least Gatekeeper score (of 25) of a recalled example.
pub const EXAMPLE_MIN_SCORE: i64 = 15;

/// Most words a recall searches for: the rest add little but cost.
const MAX_WORDS: usize = 48;
/// Most bytes of a run's text indexed.
const MAX_INDEXED_BYTES: usize = 16 * 1024;

/// What the Retriever recalled, best first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recalled {
    pub lessons: Vec<String>,
    pub playbooks: Vec<String>,
    pub examples: Vec<String>,
}

/// Words too common to say what a task is about.
const STOPWORDS: &[&str] = &[
    "the", "and", "for", "with", "that", "this", "from", "into", "are", "was", "were", "will",
    "its", "not", "but", "all", "any", "can", "has", "have", "had", "our", "you", "your", "they",
    "their", "them", "then", "than", "when", "what", "which", "who", "how", "why", "use", "using",
    "used", "each", "per", "one", "two", "out", "new", "get", "set", "make", "should", "must",
    "may", "also", "more", "most", "such", "only", "other", "some", "there", "these", "those",
    "via", "about", "over", "under", "need", "needs",
];

/// The search words of the strings inside `values`: lowercase, at least
/// three characters, common words dropped, each once, in order of first
/// appearance, at most 48 (`MAX_WORDS`).
pub fn words_of<'a>(values: impl IntoIterator<Item = &'a Value>) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    let mut texts = Vec::new();
    for v in values {
        strings(v, &mut texts);
    }
    for t in texts {
        for w in t.split(|c: char| !c.is_alphanumeric()) {
            let w = w.to_lowercase();
            if w.chars().count() < 3 || STOPWORDS.contains(&w.as_str()) || !seen.insert(w.clone()) {
                continue;
            }
            out.push(w);
            if out.len() == MAX_WORDS {
                return out;
            }
        }
    }
    out
}

fn strings<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
    match v {
        Value::String(s) => out.push(s),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(m) => m.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

/// The values at `read` in `context` (an array on the way maps over its
/// items: `PatternObserver.patterns.name` is every pattern's name).
pub fn values_at<'a>(context: &'a Map<String, Value>, read: &ReadPath) -> Vec<&'a Value> {
    let mut at: Vec<&Value> = context.get(&read.stage).into_iter().collect();
    for f in &read.fields {
        let mut next = Vec::new();
        for v in at {
            match v {
                Value::Array(items) => next.extend(items.iter().filter_map(|i| i.get(f))),
                other => next.extend(other.get(f)),
            }
        }
        at = next;
    }
    at
}

/// The stage's `history`: the earlier runs of `pipeline` most like
/// `words` (the newest when there are no words) and the improvements the
/// latest ones' Gatekeepers asked for. Shaped by
/// [`agency_org::pipeline::history_schema`].
pub(crate) fn history(tx: &mut dyn Tx, pipeline: &str, words: &[String]) -> Result<Value> {
    let mut similar: Vec<LibraryEntryRow> = tx
        .search_library(pipeline, LibraryKind::Example, words, None, HISTORY_RUNS)?
        .into_iter()
        .map(|(e, _)| e)
        .collect();
    if similar.is_empty() && words.is_empty() {
        similar = tx.library_entries(pipeline, LibraryKind::Example, HISTORY_RUNS)?;
    }
    let runs: Vec<Value> = similar
        .iter()
        .filter_map(|e| {
            let d = data_of(e);
            Some(json!({
                "id": e.run?.to_string(),
                "summary": d.get("summary").and_then(Value::as_str).unwrap_or(&e.title),
                "keywords": string_list(d.get("keywords")),
                "totalScore": e.score,
                "decision": d.get("decision").and_then(Value::as_str),
                "improvements": string_list(d.get("improvements")),
            }))
        })
        .collect();
    let mut improvements = Vec::new();
    for e in tx.library_entries(pipeline, LibraryKind::Example, HISTORY_RUNS)? {
        for i in string_list(data_of(&e).get("improvements")) {
            if improvements.len() < HISTORY_IMPROVEMENTS && !improvements.contains(&i) {
                improvements.push(i);
            }
        }
    }
    Ok(json!({ "runs": runs, "improvements": improvements }))
}

/// The Retriever's recall of run `run` for `words`: admitted lessons
/// (quoted with their provenance; each recall logged with the run),
/// playbooks and examples scoring at least [`EXAMPLE_MIN_SCORE`], best
/// match first.
pub(crate) fn recall(
    op: &mut Op<'_>,
    pipeline: &str,
    run: agency_core::HandlerId,
    words: &[String],
) -> Result<Recalled> {
    let lessons = crate::lessons::learn::recall(op, pipeline, run, words, RECALL_LESSONS)?;
    let tx = &mut *op.tx;
    let texts =
        |found: Vec<(LibraryEntryRow, f64)>| found.into_iter().map(|(e, _)| e.text).collect();
    let playbooks = texts(tx.search_library(
        pipeline,
        LibraryKind::Playbook,
        words,
        None,
        RECALL_PLAYBOOKS,
    )?);
    // A run its Gatekeeper did not promote (or whose Correctness or
    // Safety failed, which the engine's caps make the same) stays in the
    // library's history but is never recalled as an example to follow.
    let examples = tx
        .search_library(
            pipeline,
            LibraryKind::Example,
            words,
            Some(EXAMPLE_MIN_SCORE),
            RECALL_EXAMPLES * 4,
        )?
        .into_iter()
        .filter(|(e, _)| promoted(e))
        .take(RECALL_EXAMPLES)
        .map(|(e, _)| {
            let run = e.run.map(|r| r.to_string()).unwrap_or_default();
            let score = e
                .score
                .map(|s| format!(" (score {s}/25)"))
                .unwrap_or_default();
            format!("run {run}{score}: {}", e.title)
        })
        .collect();
    Ok(Recalled {
        lessons,
        playbooks,
        examples,
    })
}

/// Add the done run `r` to its pipeline's portfolio. `artifacts`: each
/// stage's name and validated artifact, in pipeline order. The first
/// artifact holding `summary`, `domain`, `keywords`, `totalScore`,
/// `decision` or `improvements` gives that field (AgencyCore: the
/// Observer's, the Gatekeeper's); the text indexed is the input and every
/// string of the artifacts.
pub(crate) fn add_example(
    op: &mut Op<'_>,
    r: &PipelineRunRow,
    input: &Value,
    artifacts: &[(String, Value)],
) -> Result<()> {
    let first = |field: &str| {
        artifacts
            .iter()
            .find_map(|(_, a)| a.get(field).filter(|v| !v.is_null()).cloned())
    };
    let mut data = Map::new();
    data.insert("run".into(), Value::String(r.id.to_string()));
    for f in [
        "summary",
        "domain",
        "keywords",
        "totalScore",
        "decision",
        "improvements",
    ] {
        if let Some(v) = first(f) {
            data.insert(f.into(), v);
        }
    }
    let input_text = match input {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let title = data
        .get("summary")
        .and_then(Value::as_str)
        .unwrap_or(&input_text)
        .chars()
        .take(200)
        .collect::<String>();
    let mut text = input_text.clone();
    let mut found = Vec::new();
    for (_, a) in artifacts {
        strings(a, &mut found);
    }
    for s in found {
        if text.len() + s.len() + 1 > MAX_INDEXED_BYTES {
            break;
        }
        text.push('\n');
        text.push_str(s);
    }
    let score = data.get("totalScore").and_then(Value::as_i64);
    op.tx.insert_library_entry(&LibraryEntryRow {
        seq: 0,
        pipeline: r.pipeline.clone(),
        kind: LibraryKind::Example,
        run: Some(r.id),
        title,
        text,
        score,
        data: Value::Object(data).to_string(),
        created_at: op.now,
    })?;
    Ok(())
}

/// Whether an example may be recalled: its decision (an object with
/// `promoteToPortfolio`, AgencyCore Gatekeeper's) did not refuse it.
fn promoted(e: &LibraryEntryRow) -> bool {
    data_of(e)
        .get("decision")
        .and_then(|d| d.get("promoteToPortfolio"))
        .and_then(Value::as_bool)
        != Some(false)
}

fn data_of(e: &LibraryEntryRow) -> Map<String, Value> {
    match serde_json::from_str(&e.data) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

fn string_list(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_lowercase_distinct_and_without_common_words() {
        let v = json!({"k": ["Add a REST endpoint", "the endpoint needs tests"], "n": 3, "s": "ok REST"});
        assert_eq!(words_of([&v]), ["add", "rest", "endpoint", "tests"]);
        let many = Value::String((0..100).map(|i| format!("w{i:03} ")).collect());
        assert_eq!(words_of([&many]).len(), MAX_WORDS);
    }

    #[test]
    fn a_read_path_maps_over_arrays() {
        let ctx = json!({"P": {"patterns": [{"name": "crud"}, {"name": "auth"}, {"x": 1}]}});
        let ctx = ctx.as_object().unwrap();
        let path = ReadPath {
            stage: "P".into(),
            fields: vec!["patterns".into(), "name".into()],
        };
        assert_eq!(values_at(ctx, &path), [&json!("crud"), &json!("auth")]);
        let missing = ReadPath {
            stage: "Q".into(),
            fields: vec![],
        };
        assert!(values_at(ctx, &missing).is_empty());
    }
}
