//! `agency compile`, `agency schema` and `agency explain` through the real
//! binary: output, diagnostics on stderr and exit codes; a failed compile
//! leaves an existing output file unchanged.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_agency");

fn agency(args: &[&str]) -> Output {
    let tmp = std::env::temp_dir();
    Command::new(BIN)
        .args(args)
        .env("AGENCY_HOME", tmp.join("agency-org-compile-no-home"))
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

fn text(b: &[u8]) -> String {
    String::from_utf8(b.to_vec()).unwrap()
}

#[test]
fn compile_writes_the_model_and_fails_with_every_diagnostic() {
    let weather = example("weather-agency");
    let out = agency(&["compile", weather.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let model: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(model["executiveAgent"], "FrontDeskAgent");
    assert_eq!(text(&out.stderr), "");

    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("model.json");
    let out = agency(&[
        "compile",
        weather.to_str().unwrap(),
        "-o",
        file.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    assert_eq!(
        std::fs::read(&file).unwrap(),
        agency(&["compile", weather.to_str().unwrap()]).stdout
    );

    let bad = tmp.path().join("bad");
    std::fs::create_dir(&bad).unwrap();
    std::fs::write(
        bad.join("A.agency"),
        "# Agency Name: A\n## Executive Agent\nBos\n",
    )
    .unwrap();
    std::fs::write(
        bad.join("Boss.agent"),
        "---\nagency: {runtme: builtin}\n---\n# Boss\n",
    )
    .unwrap();
    let out = agency(&[
        "compile",
        bad.to_str().unwrap(),
        "-o",
        file.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(out.stdout, b"");
    let stderr = text(&out.stderr).replace(bad.to_str().unwrap(), "DIR");
    insta::assert_snapshot!(stderr, @r"
    A.agency:3:1: error: executive agent `Bos` is not an agent of this agency (no Bos.agent here); did you mean `Boss`?
    Boss.agent:2:10: error: unknown key `runtme` in `agency:`; did you mean `runtime`?
    error: failed to compile DIR: 2 error(s)
    ");
    // The earlier model is still there, whole.
    assert_eq!(
        std::fs::read(&file).unwrap(),
        agency(&["compile", weather.to_str().unwrap()]).stdout
    );
}

#[test]
fn schema_prints_the_model_and_sources_schemas() {
    let out = agency(&["schema"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["title"], "AgencyModel");
    let out = agency(&["schema", "--sources"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["$defs"]["agent"]["properties"]["agency"]["properties"]["tools_add"].is_object());
}

#[test]
fn explain_says_where_each_field_came_from() {
    let weather = example("weather-agency");
    let out = agency(&["explain", weather.to_str().unwrap(), "WeatherAgent"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    insta::assert_snapshot!(text(&out.stdout), @r#"
    agent WeatherAgent (WeatherAgent.agent:1)
      name                "WeatherAgent"    <- WeatherAgent.agent:1
      title               "Weather Assistant"    <- WeatherAgent.agent:2
      staticMemory        "You are WeatherAgent. You specialize in providing weather data."    <- WeatherAgent.agent:5
      behavior.onMessage  "When requested for weather, use WeatherTool to fetch the data."    <- WeatherAgent.agent:11
      behavior.onMessage  "Format the result and return it to the caller."    <- WeatherAgent.agent:12
      tools               "WeatherTool"    <- WeatherAgent.agent:15
      memory.guidance     "Stores latest location requests for repeated usage."    <- WeatherAgent.agent:18
    "#);
    let out = agency(&[
        "--json",
        "explain",
        weather.to_str().unwrap(),
        "WeatherAgent",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["agent"]["tools"][0], "WeatherTool");
    assert_eq!(v["fields"][0]["from"]["file"], "WeatherAgent.agent");
    let out = agency(&["explain", weather.to_str().unwrap(), "WeatherAgnt"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("did you mean `WeatherAgent`?"),
        "{}",
        text(&out.stderr)
    );
}
