//! `agency pipeline compile`, `agency pipeline init` and `agency schema
//! pipeline` through the real binary: output, diagnostics on stderr at
//! file:line:col, exit codes, and init's refusal to overwrite.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_agency");

fn agency(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env(
            "AGENCY_HOME",
            std::env::temp_dir().join("agency-pipeline-compile-no-home"),
        )
        .env_remove("RUST_LOG")
        .env_remove("AGENCY_WIDE")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8(b.to_vec()).unwrap()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn init_writes_agencycore_which_compiles_and_never_overwrites() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pipelines");
    let out = agency(&["pipeline", "init", "agencycore", s(&dir)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let file = dir.join("agencycore.pipeline");
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        agency_org::pipeline::AGENCYCORE
    );

    // An existing file (even an edited one) is left as it is.
    std::fs::write(&file, "mine").unwrap();
    let out = agency(&["pipeline", "init", "agencycore", s(&dir)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("the file exists and is left unchanged"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "mine");

    let out = agency(&["pipeline", "init", "nocore", s(&dir)]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "an unknown built-in is a usage error"
    );
}

#[test]
fn compile_prints_the_stages_or_the_model() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(
        agency(&["pipeline", "init", "agencycore", s(tmp.path())])
            .status
            .success()
    );
    let file = tmp.path().join("agencycore.pipeline");

    let out = agency(&["pipeline", "compile", s(&file)]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with("pipeline agencycore: 11 stage(s)\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains("Retriever") && stdout.contains("code retriever"),
        "{stdout}"
    );
    assert_eq!(text(&out.stderr), "");

    let out = agency(&["pipeline", "compile", s(&file), "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let model: agency_org::pipeline::PipelineModel = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(model.stages.len(), 11);
    assert_eq!(model.source.file, s(&file));
    assert_eq!(
        model.source_hash,
        agency_org::pipeline::agencycore().unwrap().source_hash
    );
}

#[test]
fn compile_fails_with_every_diagnostic_at_file_line_col() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("bad.pipeline");
    std::fs::write(
        &file,
        "---\npipeline: bad\nstages:\n  - name: A\n    kind: code\n    step: retriever\n    output: {type: object, properties: {n: {type: integer}}}\n  - name: B\n    kind: code\n    step: tool_runer\n    reads: [A.total]\n    output: {type: object}\n---\n",
    )
    .unwrap();
    let out = agency(&["pipeline", "compile", s(&file), "--json"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout), "", "no model on failure");
    let f = s(&file);
    assert_eq!(
        text(&out.stderr),
        format!(
            "{f}:10:11: error: unknown code step `tool_runer`: the built-in steps are retriever, safety_guard, tool_runner; did you mean `tool_runner`?\n\
             {f}:11:13: error: stage `B` reads `A.total`, but stage `A`'s output has no field `total` (it has: n)\n\
             error: failed to compile pipeline {f}: 2 error(s)\n"
        )
    );

    let out = agency(&["pipeline", "compile", s(&tmp.path().join("nope.pipeline"))]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("not a file"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn schema_pipeline_is_the_pipeline_models() {
    let out = agency(&["schema", "pipeline"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v, agency_org::pipeline::pipeline_schema());
    assert_eq!(v["title"], "PipelineModel");

    // The default is still the Agency Model's.
    let out = agency(&["schema"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v, agency_org::model_schema());

    let out = agency(&["schema", "pipeline", "--sources"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v, agency_org::pipeline::pipeline_sources_schema());
}
