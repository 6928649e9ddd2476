//! MCP acts for agents only: it is given the caller-checked
//! `agency_service::Service` and must never hold the daemon's system
//! handle. The types keep a `Service` from leading to a `System` (only
//! `ServiceBuilder::build` makes one, and nothing on `Service` returns
//! it); what is left is this crate making its own, which this check
//! refuses.

use std::path::Path;

fn sources(dir: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let text = std::fs::read_to_string(&path).unwrap();
            out.push((path.display().to_string(), text));
        }
    }
}

/// Whether `text` names `word` as a whole identifier.
fn names(text: &str, word: &str) -> bool {
    text.match_indices(word).any(|(i, _)| {
        let ident = |c: char| c.is_alphanumeric() || c == '_';
        let before = text[..i].chars().next_back().is_none_or(|c| !ident(c));
        let after = text[i + word.len()..]
            .chars()
            .next()
            .is_none_or(|c| !ident(c));
        before && after
    })
}

#[test]
fn mcp_never_names_the_system_handle_or_builds_a_service() {
    let mut files = Vec::new();
    sources(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    assert!(files.len() > 3, "found the sources: {}", files.len());
    for (path, text) in &files {
        for word in ["System", "ServiceBuilder", "Service::builder"] {
            assert!(!names(text, word), "{path} names {word}");
        }
    }
}

#[test]
fn the_check_sees_a_name_and_only_whole_names() {
    assert!(names("use agency_service::System;", "System"));
    assert!(!names("std::time::SystemTime", "System"));
    assert!(!names("SystemClock", "System"));
}
