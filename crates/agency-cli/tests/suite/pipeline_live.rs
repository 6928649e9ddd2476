//! Issue 31: ToolRunner's live mode against a real daemon (`agency serve`,
//! the sandbox on) and the scripted model server. AgencyCore runs with
//! `--level 1 --live`; the Implementor's scripted answer proposes a probe
//! in the workspace, which must be created there, and a hostile command
//! for each way out, each of which the sandbox must stop — asserted on the
//! file system and on what the commands could print:
//!
//! - writing outside the workspace: a directory outside the home, the
//!   run's own directory (`../`, which holds the commands' policy), the
//!   home's `agency.toml`;
//! - reading the home: a `[secrets]` file, `admin.token`, `agency.db`;
//! - reading the daemon's environment through `/proc/<pid>/environ`
//!   (earlier, agents' shells could read an MCP server's secrets there).
//!
//! The hostile commands are written so that SafetyGuard's plan rules,
//! which would skip the plainest forms, let them through to the sandbox.

use serde_json::{Value, json};

use crate::home::TestHome;
use agency_testkit::{ModelServer, Script};

const SCRIPT: &str = include_str!("../../src/demo_pipeline_script.json");
const MARK: &str = "live-mode-secret-mark-5f1c";

/// The demo's script with the Implementor proposing `commands`.
fn script_running(commands: &[String]) -> Script {
    let mut doc: Value = serde_json::from_str(SCRIPT).unwrap();
    let scenario = doc["scenarios"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|s| s["name"] == "AgencyCore Implementor")
        .unwrap();
    let text = scenario["turns"][0]["text"].as_str().unwrap().to_owned();
    let mut answer: Value = serde_json::from_str(&text).unwrap();
    let actions: Vec<Value> = commands
        .iter()
        .map(|c| json!({"type": "runCommand", "description": "probe", "command": c}))
        .collect();
    answer["actions"] = json!(actions);
    answer["commandsRun"] = json!(commands);
    scenario["turns"][0]["text"] = json!(answer.to_string());
    Script::from_json(&doc.to_string()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue31_live_tool_runner_writes_its_workspace_and_nothing_outside_it() {
    let home = TestHome::new();
    let outside = tempfile::tempdir().unwrap();
    let h = home.dir.display().to_string();
    let commands: Vec<String> = vec![
        "touch probe".to_owned(),
        format!("touch {}/outside-probe", outside.path().display()),
        "touch ../escape".to_owned(),
        format!("echo planted >> {h}/agency.toml"),
        format!("cat {h}/secrets/mark"),
        format!("cat {h}/admin.token"),
        format!("head -c 16 {h}/agency.db"),
        // Every process's environment the command can read; the daemon's
        // is not among them.
        "cd \"/pro\"c && for p in [0-9]*; do cat $p/environ 2>/dev/null; done | tr '\\0' '\\n'"
            .to_owned(),
    ];
    let model = ModelServer::start(script_running(&commands)).await.unwrap();
    home.init_with(&format!(
        "[models.default]\napi = \"anthropic\"\nbase_url = {:?}\nmodel = \"test-model\"\ndefault_price = {{ input = 1.0, output = 2.0 }}\n\n[secrets]\nmark = {{ file = \"secrets/mark\" }}\n",
        model.base_url()
    ));
    std::fs::create_dir_all(home.dir.join("secrets")).unwrap();
    std::fs::write(home.dir.join("secrets/mark"), MARK).unwrap();
    let toml_before = std::fs::read_to_string(home.dir.join("agency.toml")).unwrap();
    let daemon = home.serve();
    // The daemon's environment holds cargo's variables (the test's own):
    // what a command must not be able to read.
    let info: Value =
        serde_json::from_str(&std::fs::read_to_string(home.dir.join("daemon.json")).unwrap())
            .unwrap();
    let environ = std::fs::read(format!("/proc/{}/environ", info["pid"])).unwrap();
    assert!(String::from_utf8_lossy(&environ).contains("CARGO_"));

    let args = [
        "--json",
        "pipeline",
        "run",
        "agencycore",
        "Add a /health endpoint",
        "--level",
        "1",
        "--live",
        "--wait",
    ];
    let dir = home.dir.clone();
    let (code, out, err) =
        tokio::task::spawn_blocking(move || crate::agent_story::agency(&dir, &args))
            .await
            .unwrap();
    let run: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
    assert_eq!(code, 0, "{err}\n{out}\n{}", home.log());
    assert_eq!(run["status"], "done", "{run}");
    assert_eq!(run["live_tools"], json!(true), "{run}");
    let stage = run["stages_detail"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "ToolRunner")
        .unwrap();
    assert_eq!(stage["status"], "ok", "{stage}");
    let file = stage["artifact"].as_str().unwrap();
    let text = home.json(&["kb", "cat", file]);
    let artifact: Value = serde_json::from_str(text["text"].as_str().unwrap()).unwrap();
    let ran = artifact["executedCommands"].as_array().unwrap();
    assert_eq!(
        ran.len(),
        commands.len(),
        "SafetyGuard skipped some: {artifact}"
    );
    let by = |i: usize| &ran[i];
    assert!(
        ran.iter().all(|c| c["mockMode"] == json!(false)),
        "{artifact}"
    );

    // The probe: run, inside the run's workspace, kept after the run.
    let run_dir = home.dir.join("pipelines").join(run["id"].as_str().unwrap());
    assert_eq!(by(0)["success"], json!(true), "{artifact}");
    assert!(run_dir.join("workspace/probe").is_file(), "{artifact}");
    let shown = home.ok(&["pipeline", "show", run["id"].as_str().unwrap()]);
    let line = format!("workspace: {}", run_dir.join("workspace").display());
    assert!(shown.contains(&line), "{shown}");

    // Writing outside it failed, and nothing was written.
    for i in 1..=3 {
        assert_eq!(by(i)["success"], json!(false), "{}", by(i));
    }
    assert!(!outside.path().join("outside-probe").exists());
    assert!(!run_dir.join("escape").exists());
    assert_eq!(
        std::fs::read_to_string(home.dir.join("agency.toml")).unwrap(),
        toml_before
    );

    // Reading the home failed, and nothing of it was printed.
    let token = std::fs::read_to_string(home.dir.join("admin.token")).unwrap();
    for i in 4..=6 {
        let c = by(i);
        let output = c["output"].as_str().unwrap();
        assert_eq!(c["success"], json!(false), "{c}");
        assert!(!output.contains(MARK), "{c}");
        assert!(!output.contains(token.trim()), "{c}");
        assert!(!output.contains("SQLite"), "{c}");
    }

    // /proc: the command saw environments (its own), not the daemon's.
    let env = by(7)["output"].as_str().unwrap();
    assert!(env.contains("HOME="), "{env}");
    assert!(!env.contains("CARGO_"), "{env}");
    assert!(!env.contains(MARK), "{env}");
    daemon.terminate();
}

/// SafetyGuard approved the Planner's plan, not the commands the
/// Implementor wrote: before any of them runs, each is classified by
/// `policy.toml` as a `bash` call. A refused one is skipped; those that
/// need an approval are asked for together, once, and nothing runs (not
/// even the allowed ones) until the user decided.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue31_live_commands_pass_policy_toml_and_wait_for_approval() {
    let home = TestHome::new();
    let commands: Vec<String> = ["touch probe", "touch denied-probe", "touch asked-probe"]
        .map(str::to_owned)
        .to_vec();
    let model = ModelServer::start(script_running(&commands)).await.unwrap();
    home.init_with(&format!(
        "[models.default]\napi = \"anthropic\"\nbase_url = {:?}\nmodel = \"test-model\"\ndefault_price = {{ input = 1.0, output = 2.0 }}\n",
        model.base_url()
    ));
    std::fs::write(
        home.dir.join("policy.toml"),
        "[[rule]]\ntool = \"bash\"\ncommand = '^touch denied-probe'\nverdict = \"deny\"\nreason = \"not this one\"\n\n\
         [[rule]]\ntool = \"bash\"\ncommand = '^touch asked-probe'\nverdict = \"ask\"\nreason = \"ask me first\"\n",
    )
    .unwrap();
    let daemon = home.serve();
    let started = home.json(&[
        "pipeline",
        "run",
        "agencycore",
        "Add a /health endpoint",
        "--level",
        "1",
        "--live",
    ]);
    let id = started["id"].as_str().unwrap().to_owned();
    let waiting = crate::pipeline_run::wait_run(&home, &id, |v| v["status"] != "running").await;
    assert_eq!(waiting["status"], "waiting", "{waiting}\n{}", home.log());
    let workspace = home.dir.join("pipelines").join(&id).join("workspace");
    for f in ["probe", "denied-probe", "asked-probe"] {
        assert!(!workspace.join(f).exists(), "{f} ran before the decision");
    }
    let pending = home.json(&["approvals"]);
    let asked: Vec<&Value> = pending
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["tool"] == "pipeline:plan")
        .collect();
    assert_eq!(asked.len(), 1, "{pending}");
    let args = asked[0]["args"].to_string();
    assert!(
        args.contains("touch asked-probe") && args.contains("ask me first"),
        "{args}"
    );
    assert!(
        !args.contains("denied-probe") && !args.contains("\"touch probe\""),
        "{args}"
    );
    home.ok(&["approve", &asked[0]["id"].to_string()]);
    let done = crate::pipeline_run::wait_run(&home, &id, |v| {
        v["status"] != "running" && v["status"] != "waiting"
    })
    .await;
    assert_eq!(done["status"], "done", "{done}\n{}", home.log());
    assert!(workspace.join("probe").is_file());
    assert!(workspace.join("asked-probe").is_file());
    assert!(
        !workspace.join("denied-probe").exists(),
        "policy.toml refused it"
    );
    let artifact = artifact_of(&home, &done, "ToolRunner");
    assert_eq!(
        artifact["skippedCommands"],
        json!(["touch denied-probe"]),
        "{artifact}"
    );
    assert_eq!(artifact["executedCommands"].as_array().unwrap().len(), 2);
    // The Implementor's `blocked` is the engine's gate, not the answer's.
    let proposed = artifact_of(&home, &done, "Implementor");
    assert_eq!(
        proposed["blocked"],
        json!(["runCommand touch denied-probe: not this one"]),
        "{proposed}"
    );
    daemon.terminate();
}

/// The validated artifact of stage `name` of the shown run `run`.
fn artifact_of(home: &TestHome, run: &Value, name: &str) -> Value {
    let stage = run["stages_detail"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no stage {name}: {run}"));
    let text = home.json(&["kb", "cat", stage["artifact"].as_str().unwrap()]);
    serde_json::from_str(text["text"].as_str().unwrap()).unwrap()
}
