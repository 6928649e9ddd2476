//! Whatever the files hold and whatever they are called, compiling returns
//! a model or diagnostics: it never panics.

use proptest::prelude::*;

fn name() -> impl Strategy<Value = String> {
    (
        "[A-Za-z0-9 ._-]{1,12}",
        prop::sample::select(vec![".agency", ".agent", ".tool", "", ".md"]),
    )
        .prop_map(|(n, ext)| {
            if n == "agents" && ext.is_empty() {
                "agents.json".into()
            } else {
                format!("{n}{ext}")
            }
        })
}

fn content() -> impl Strategy<Value = String> {
    let piece = prop::sample::select(vec![
        "---\n",
        "agency:\n",
        "  tools: [",
        "]\n",
        "# Agent Name: ",
        "## Tools\n",
        "- ",
        "X\n",
        "## Inheritance\n",
        "Inherits ",
        "## Executive Agent\n",
        "{\"agents\": {",
        "\"main\": {}",
        "}}",
        "- Base URL: http://",
        "é",
        "- Returns JSON with fields: {",
        "\"a\": string",
        "## Behaviour\n1. ",
        "budget: {usd: ",
        "&a ",
        "*a",
        "\t",
        "\n",
    ]);
    prop::collection::vec(prop_oneof![piece.prop_map(String::from), ".{0,20}"], 0..24)
        .prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn compile_never_panics(files in prop::collection::vec((name(), content()), 0..6), agents_json in prop::option::of(content())) {
        let tmp = tempfile::tempdir().expect("tempdir");
        for (n, text) in &files {
            let _ = std::fs::write(tmp.path().join(n), text);
        }
        if let Some(j) = agents_json {
            let _ = std::fs::write(tmp.path().join("agents.json"), j);
        }
        match agency_org::compile(tmp.path()) {
            Ok(c) => { let _ = agency_org::to_json(&c.model); }
            Err(e) => prop_assert!(e.error_count() > 0),
        }
    }
}
