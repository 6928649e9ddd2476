//! ToolRunner's mechanics with the sandbox off (`agents.sandbox = "off"`):
//! the workspace, the output bound, the timeout, the environment, the
//! level rule and the report. What the sandbox keeps out is tested
//! against the real `agency sandbox-exec` in the CLI's suite
//! (`tests/suite/pipeline_live.rs`).

#![allow(clippy::unwrap_used)]

use super::*;

struct Fixture {
    _tmp: tempfile::TempDir,
    tools: LiveTools,
    run: HandlerId,
}

fn fixture(timeout: Duration) -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut cfg = agency_config::Config::default();
    cfg.agents.sandbox = "off".to_owned();
    let confiner = Confiner::start(&cfg, &home, PathBuf::from("/nonexistent/agency"), 1).unwrap();
    Fixture {
        tools: LiveTools {
            confiner: Arc::new(confiner),
            root: root_of(&home),
            timeout,
        },
        run: HandlerId::new_random(),
        _tmp: tmp,
    }
}

fn implementor(commands: &[&str]) -> Map<String, Value> {
    let actions: Vec<Value> = commands
        .iter()
        .map(|c| json!({"type": "runCommand", "command": c}))
        .collect();
    json!({"Implementor": {"actions": actions}})
        .as_object()
        .cloned()
        .unwrap()
}

#[tokio::test]
async fn issue31_live_mode_runs_allowed_commands_in_the_run_workspace() {
    let f = fixture(DEFAULT_TIMEOUT);
    let ctx = implementor(&[
        "touch probe",
        "pwd",
        "echo out; echo err >&2; exit 3",
        "rm -rf /",
    ]);
    let out = live(&f.tools, f.run, &ctx, &[]).await.unwrap();
    let ws = workspace_of(&f.tools.root, f.run);
    assert!(ws.join("probe").is_file(), "{out}");
    let ran = out["executedCommands"].as_array().unwrap();
    assert_eq!(ran.len(), 3, "{out}");
    assert!(ran.iter().all(|c| c["mockMode"] == json!(false)), "{out}");
    assert_eq!(ran[0]["success"], json!(true));
    assert_eq!(
        ran[1]["output"].as_str().unwrap().trim(),
        ws.to_str().unwrap()
    );
    assert_eq!(ran[2]["success"], json!(false));
    let failed = ran[2]["output"].as_str().unwrap();
    assert!(
        failed.contains("out") && failed.contains("err") && failed.contains('3'),
        "{failed}"
    );
    // Blocked by the plan rules: never run, in live mode too.
    assert_eq!(out["skippedCommands"], json!(["rm -rf /"]));
}

#[tokio::test]
async fn issue31_mock_mode_creates_nothing() {
    let f = fixture(DEFAULT_TIMEOUT);
    let out = mock(&implementor(&["touch probe"]));
    assert_eq!(out["executedCommands"][0]["mockMode"], json!(true));
    assert!(
        !f.tools.root.exists(),
        "mock mode made {}",
        f.tools.root.display()
    );
}

#[tokio::test]
async fn issue31_live_commands_get_none_of_the_daemons_environment() {
    let f = fixture(DEFAULT_TIMEOUT);
    // Cargo runs this test with CARGO_* set: the daemon's environment
    // stands in for provider keys and secrets.
    assert!(std::env::var_os("CARGO_PKG_NAME").is_some());
    let out = live(&f.tools, f.run, &implementor(&["env"]), &[])
        .await
        .unwrap();
    let env = out["executedCommands"][0]["output"].as_str().unwrap();
    assert!(env.contains("HOME="), "{env}");
    assert!(!env.contains("CARGO_"), "{env}");
}

#[tokio::test]
async fn issue31_live_output_is_cut_and_says_so() {
    let f = fixture(DEFAULT_TIMEOUT);
    let out = live(
        &f.tools,
        f.run,
        &implementor(&["yes a | tr -d '\\n' | head -c 100000"]),
        &[],
    )
    .await
    .unwrap();
    let text = out["executedCommands"][0]["output"].as_str().unwrap();
    assert!(text.len() < MAX_OUTPUT + 200, "{}", text.len());
    assert!(text.starts_with(&"a".repeat(MAX_OUTPUT)));
    assert!(
        text.contains("output cut at 16384 bytes: the command wrote 100000 bytes"),
        "{}",
        &text[MAX_OUTPUT..]
    );
}

#[tokio::test]
async fn issue31_a_command_past_its_timeout_is_killed_with_what_it_started() {
    let f = fixture(Duration::from_secs(1));
    let out = live(
        &f.tools,
        f.run,
        &implementor(&["sleep 300 & echo $! > bg; sleep 300"]),
        &[],
    )
    .await
    .unwrap();
    let c = &out["executedCommands"][0];
    assert_eq!(c["success"], json!(false));
    assert!(
        c["output"]
            .as_str()
            .unwrap()
            .contains("did not finish within 1 s"),
        "{c}"
    );
    let ws = workspace_of(&f.tools.root, f.run);
    let bg = std::fs::read_to_string(ws.join("bg")).unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", bg.trim())).unwrap_or_default();
    // Gone, or dead and waiting for its new parent to reap it.
    assert!(stat.is_empty() || stat.contains(") Z "), "{stat}");
}

fn next_stage(run: HandlerId, level: i64) -> (StageModel, NextStage) {
    let model = agency_org::pipeline::agencycore().unwrap();
    let idx = model
        .stages
        .iter()
        .position(|s| s.name == "ToolRunner")
        .unwrap();
    let stage = model.stages[idx].clone();
    let next = NextStage {
        run,
        idx,
        model: Arc::new(model),
        level,
        live_tools: true,
        context: implementor(&["touch probe"]),
        agent: None,
        recalled: None,
        lease: None,
    };
    (stage, next)
}

#[tokio::test]
async fn issue31_level_0_runs_nothing_live() {
    let f = fixture(DEFAULT_TIMEOUT);
    let (stage, next) = next_stage(f.run, 0);
    let end = live_stage(Some(&f.tools), &stage, &next, &[]).await;
    assert_eq!(end.status, Stored::BlockedPolicy, "{:?}", end.error);
    assert!(end.artifact.is_none());
    assert!(!workspace_of(&f.tools.root, f.run).exists());
}

#[tokio::test]
async fn issue31_a_live_stage_records_its_mode_level_and_workspace() {
    let f = fixture(DEFAULT_TIMEOUT);
    let (stage, next) = next_stage(f.run, 1);
    let end = live_stage(Some(&f.tools), &stage, &next, &[]).await;
    assert_eq!(end.status, Stored::Ok, "{:?}", end.error);
    let a = end.artifact.unwrap();
    assert_eq!(a["executedCommands"][0]["mockMode"], json!(false), "{a}");
    assert_eq!(a["executedCommands"][0]["success"], json!(true), "{a}");
    let ws = workspace_of(&f.tools.root, f.run);
    assert!(ws.join("probe").is_file());
    assert_eq!(end.report["mode"], json!("live"));
    assert_eq!(end.report["level"], json!(1));
    assert_eq!(end.report["workspace"], json!(ws.display().to_string()));
    assert_eq!(end.report["sandbox"], json!("off"));
    // Without live tools the stage fails, and nothing ran.
    let other = HandlerId::new_random();
    let (stage, next) = next_stage(other, 1);
    let end = live_stage(None, &stage, &next, &[]).await;
    assert_eq!(end.status, Stored::FailedInfra);
    assert!(!workspace_of(&f.tools.root, other).exists());
}
