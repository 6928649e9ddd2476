//! Agents run under Claude Code: the real daemon (`agency serve`) with the
//! `claude-code` runtime spawns the real Claude Code CLI (`claude -p`) for
//! the root handler when the user writes to it; the CLI talks to the
//! scripted model server over the Anthropic Messages API and to the daemon
//! over MCP (its tools spelled `mcp__agency__…`), and its answer reaches the
//! user's inbox.
//!
//! The CLI is found through `AGENCY_CLAUDE_BIN` (scripts/test.sh installs it
//! with npm and sets it). Without it this test fails: it is never skipped.

#![allow(clippy::unwrap_used)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_agency");

const SCRIPT: &str = r#"{
  "scenarios": [{
    "name": "root",
    "match": { "system_contains": "Help the user accomplish all their work" },
    "turns": [
      { "tool_calls": [ { "name": "mail_inbox", "input": {} } ] },
      { "tool_calls": [ { "name": "mail_ack", "input": { "messages": ["{{result:/messages/0/id}}"] } } ] },
      { "tool_calls": [ { "name": "kb_create", "input": { "description": "Composting guide", "content": "Greens and browns, kept moist." } } ] },
      { "tool_calls": [ { "name": "mail_send", "input": { "to": "boss", "file": "{{result:/file}}", "subject": "Your composting guide" } } ] },
      { "tool_calls": [ { "name": "audit_submit", "input": { "summary": "Wrote the guide and sent it to the user." } } ] },
      { "text": "Done: the guide is in your inbox." }
    ]
  }],
  "fallback": { "text": "ok" }
}"#;

fn claude_bin() -> String {
    match std::env::var("AGENCY_CLAUDE_BIN") {
        Ok(p) if !p.is_empty() && std::path::Path::new(&p).exists() => p,
        Ok(p) if !p.is_empty() => panic!(
            "AGENCY_CLAUDE_BIN={p} does not exist; install Claude Code with \
             `npm install --prefix target/claude-code @anthropic-ai/claude-code` \
             (scripts/test.sh does this)"
        ),
        _ => panic!(
            "AGENCY_CLAUDE_BIN is not set: this test runs the real Claude Code CLI. \
             Install it with `npm install --prefix target/claude-code @anthropic-ai/claude-code` \
             and set AGENCY_CLAUDE_BIN to the absolute path of target/claude-code/node_modules/.bin/claude \
             (scripts/test.sh does both)"
        ),
    }
}

fn agency(home: &std::path::Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .env("AGENCY_HOME", home)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json(home: &std::path::Path, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let (code, out, err) = agency(home, &all);
    assert_eq!(code, 0, "agency {args:?}: {err}");
    serde_json::from_str(&out).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_root_handlers_claude_code_agent_answers_the_user() {
    let claude = std::fs::canonicalize(claude_bin()).unwrap();
    let script = agency_testkit::Script::from_json(SCRIPT).unwrap();
    let model = agency_testkit::ModelServer::start(script).await.unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let (code, _, err) = agency(&home, &["init"]);
    assert_eq!(code, 0, "{err}");
    let cfg = format!(
        "[agents]\nruntime = \"claude-code\"\n[agents.claude_code]\nprogram = {:?}\nmodel = \"scripted\"\nmax_turns = 20\n[agents.claude_code.env]\nANTHROPIC_BASE_URL = {:?}\nANTHROPIC_API_KEY = \"test\"\nCLAUDE_CODE_MAX_RETRIES = \"1\"\n",
        claude.to_str().unwrap(),
        model.base_url()
    );
    std::fs::write(home.join("agency.toml"), cfg).unwrap();
    let log = std::fs::File::create(tmp.path().join("serve.log")).unwrap();
    let mut serve = Command::new(BIN)
        .arg("serve")
        .env("AGENCY_HOME", &home)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while !home.join("daemon.json").exists() {
        assert!(Instant::now() < deadline, "the daemon did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let (code, _, err) = agency(&home, &["send", "Please write me a composting guide"]);
    assert_eq!(code, 0, "{err}");
    let reply = loop {
        let inbox = json(&home, &["inbox"]);
        if let Some(m) = inbox
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["subject"] == "Your composting guide")
        {
            break m.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no reply; daemon log:\n{}",
            std::fs::read_to_string(tmp.path().join("serve.log")).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(reply["body"], "Greens and browns, kept moist.");

    // The run is recorded, its workspace is gone, and nothing respawns:
    // the root has no work left once its inbox is processed.
    let agent = loop {
        let agents = json(&home, &["agents"]);
        let recent = agents["recent"].as_array().unwrap().clone();
        if agents["live"].as_array().unwrap().is_empty()
            && recent.iter().any(|a| !a["ended_at"].is_null())
        {
            break recent[0].clone();
        }
        assert!(Instant::now() < deadline, "the agent did not end: {agents}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // "completed" comes from the transcript: MCP connected, a successful
    // result without is_error.
    assert_eq!(agent["end_reason"], "completed", "{agent}");
    // Claude Code may send side requests of its own (they get the
    // fallback); the conversation itself is the six scripted turns, with
    // Agency's tools offered under Claude Code's MCP spelling.
    let requests = model.requests();
    let root: Vec<_> = requests
        .iter()
        .filter(|r| r.scenario.as_deref() == Some("root"))
        .collect();
    assert_eq!(root.len(), 6, "{requests:?}");
    assert!(requests.iter().all(|r| r.status == 200), "{requests:?}");
    assert!(root.iter().all(|r| r.stream));
    assert!(
        root[0].tools.iter().any(|t| t == "mcp__agency__mail_send"),
        "{:?}",
        root[0].tools
    );
    let called: Vec<&str> = root
        .iter()
        .flat_map(|r| r.tool_calls.iter().map(|c| c.name.as_str()))
        .collect();
    assert_eq!(
        called,
        [
            "mcp__agency__mail_inbox",
            "mcp__agency__mail_ack",
            "mcp__agency__kb_create",
            "mcp__agency__mail_send",
            "mcp__agency__audit_submit"
        ]
    );
    let log = json(&home, &["audit", &agent["handler"].as_str().unwrap()[..8]]);
    assert!(
        log.as_array()
            .unwrap()
            .iter()
            .any(|e| e["summary"] == "Wrote the guide and sent it to the user.")
    );
    let run_dir = home.join("run");
    assert!(
        std::fs::read_dir(&run_dir).map(|d| d.count()).unwrap_or(0) == 0,
        "workspaces are deleted after exit"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        json(&home, &["agents"])["recent"].as_array().unwrap().len(),
        1,
        "no respawn without work"
    );

    Command::new("kill")
        .arg("-TERM")
        .arg(serve.id().to_string())
        .status()
        .unwrap();
    assert!(serve.wait().unwrap().success());
    model.shutdown().await;
}
