//! Extra MCP servers and secrets, end to end with real processes: the user
//! grants the root handler `mcp_server:echo`; its agent (our builtin loop,
//! then the real Claude Code CLI) gets the
//! server in its MCP configuration, started through `agency mcp-launch`,
//! which fetches the secret from the daemon; the server proves it received
//! the secret (it reports it reversed) and that Agency's token did not
//! reach it; and the secret itself appears nowhere: not in the store, the
//! blobs (transcripts included), the run directories, nor the daemon's log.

#![allow(clippy::unwrap_used)]

use crate::agent_story;

use std::path::Path;
use std::time::{Duration, Instant};

use agent_story::{BIN, Story, agency, claude_bin, json};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/echo_mcp.py"
);

const SCRIPT: &str = r#"{
  "scenarios": [{
    "name": "root",
    "match": { "system_contains": "Help the user accomplish all their work" },
    "turns": [
      { "tool_calls": [ { "name": "mail_inbox", "input": {} } ] },
      { "tool_calls": [ { "name": "mail_ack", "input": { "messages": ["{{result:/messages/0/id}}"] } } ] },
      { "tool_calls": [ { "name": "echo__reveal", "input": {} } ] },
      { "tool_calls": [ { "name": "kb_create", "input": { "description": "Echo report", "content": "reversed={{result:/reversed_secret}} token_visible={{result:/agency_token_visible}} mode={{result:/mode}} foreign=[{{result:/foreign}}]" } } ] },
      { "tool_calls": [ { "name": "mail_send", "input": { "to": "boss", "file": "{{result:/file}}", "subject": "Echo report" } } ] },
      { "tool_calls": [ { "name": "audit_submit", "input": { "summary": "Asked the echo server what it sees." } } ] },
      { "text": "Done." }
    ]
  }],
  "fallback": { "text": "ok" }
}"#;

/// Every file under `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            found.extend(files_containing(&p, needle));
        } else if let Ok(bytes) = std::fs::read(&p)
            && bytes.windows(needle.len()).any(|w| w == needle)
        {
            found.push(p.display().to_string());
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_mcp_server_gets_its_secret_and_the_secret_leaks_nowhere() {
    echo_story(|model_url| {
        format!(
            "[agents]\nruntime = \"builtin\"\nagency_program = {BIN:?}\n[agents.builtin]\napi = \"anthropic\"\nbase_url = {model_url:?}\nmodel = \"scripted\"\nmax_turns = 20\n"
        )
    })
    .await;
}

/// The same with Claude Code: the launcher is a stdio server in its
/// `--mcp-config`, and `--allowedTools` lets it call `mcp__echo__reveal`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_gets_a_granted_mcp_server_through_the_launcher() {
    let claude = std::fs::canonicalize(claude_bin()).unwrap();
    echo_story(|model_url| {
        format!(
            "[agents]\nruntime = \"claude-code\"\nagency_program = {BIN:?}\n[agents.claude_code]\nprogram = {:?}\nmodel = \"scripted\"\nmax_turns = 20\n[agents.claude_code.env]\nANTHROPIC_BASE_URL = {model_url:?}\nANTHROPIC_API_KEY = \"test\"\nCLAUDE_CODE_MAX_RETRIES = \"1\"\n",
            claude.to_str().unwrap()
        )
    })
    .await;
}

/// Grant `mcp_server:echo`, ask, check the report and look for leaks.
/// `agents` gives the `[agents]` configuration for the model server's URL.
async fn echo_story(agents: impl FnOnce(&str) -> String) {
    let script = agency_testkit::Script::from_json(SCRIPT).unwrap();
    let model = agency_testkit::ModelServer::start(script).await.unwrap();
    let secrets = tempfile::tempdir().unwrap();
    let secret = format!("s3cr3t-{}", uuid::Uuid::new_v4().simple());
    let secret_file = secrets.path().join("echo_key");
    std::fs::write(&secret_file, format!("{secret}\n")).unwrap();
    // Issue 9 item 5: an `env`-sourced secret the server does not
    // reference and an unrelated variable, both in the daemon's
    // environment, reach neither the agent nor the server.
    let other_secret = format!("other-{}", uuid::Uuid::new_v4().simple());
    let unrelated = format!("unrelated-{}", uuid::Uuid::new_v4().simple());
    let cfg = format!(
        r#"{}
[secrets]
echo_key = {{ file = {:?} }}
other = {{ env = "LEAK_OTHER_SECRET" }}
[mcp_servers.echo]
command = "python3"
args = [{FIXTURE:?}]
env = {{ ECHO_SECRET = "${{secret:echo_key}}", ECHO_MODE = "plain" }}
{}"#,
        agents(&model.base_url()),
        secret_file.display().to_string(),
        // The server (python3, the fixture) runs inside the agent's sandbox.
        agency_testkit::sandbox::sandbox_toml(&[]),
    );
    let mut story = Story::start_with_env(
        &cfg,
        Duration::from_secs(60),
        &[
            ("LEAK_OTHER_SECRET", &other_secret),
            ("LEAK_UNRELATED", &unrelated),
        ],
    )
    .await;
    let root = json(&story.home, &["handlers"])[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (code, out, err) = agency(&story.home, &["grant", &root, "mcp_server:echo", "read"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with(&format!(
            "granted read mcp_server:echo to handler {root} (capability "
        )),
        "{out}"
    );
    let caps = json(&story.home, &["caps", &root]);
    assert!(
        caps.as_array()
            .unwrap()
            .iter()
            .any(|c| c["resource"] == serde_json::json!({"kind": "mcp_server", "id": "echo"})),
        "{caps}"
    );

    let (code, _, err) = agency(&story.home, &["send", "What does the echo server see?"]);
    assert_eq!(code, 0, "{err}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let report = loop {
        let inbox = json(&story.home, &["inbox"]);
        if let Some(m) = inbox
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["subject"] == "Echo report")
        {
            break m["body"].as_str().unwrap().to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "no report; daemon log:\n{}",
            story.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let reversed: String = secret.chars().rev().collect();
    assert_eq!(
        report,
        format!("reversed={reversed} token_visible=false mode=plain foreign=[]")
    );
    // Let the agent finish, so its transcript is in the store.
    loop {
        let agents = json(&story.home, &["agents"]);
        if agents["live"].as_array().unwrap().is_empty()
            && agents["recent"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| !a["ended_at"].is_null())
        {
            break;
        }
        assert!(Instant::now() < deadline, "the agent did not end: {agents}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The user can take the server away again.
    let cap = caps
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["resource"]["kind"] == "mcp_server")
        .unwrap()["id"]
        .to_string();
    let (code, out, err) = agency(&story.home, &["revoke", &cap]);
    assert_eq!(
        (code, out.as_str()),
        (0, format!("revoked capabilities {cap}\n").as_str()),
        "{err}"
    );
    let (code, _, err) = agency(&story.home, &["revoke", &cap]);
    assert_eq!(code, 1);
    assert!(err.contains("live capability"), "{err}");
    story.halt();
    let leaks = files_containing(&story.home, secret.as_bytes());
    assert!(leaks.is_empty(), "the secret is in {leaks:?}");
    for value in [&other_secret, &unrelated] {
        let leaks = files_containing(&story.home, value.as_bytes());
        assert!(leaks.is_empty(), "{value} is in {leaks:?}");
    }
    assert!(!story.log().contains(&secret));
    // The transcript was kept and does show the server's answer.
    assert!(!files_containing(&story.home, reversed.as_bytes()).is_empty());
    model.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_secret_stops_the_daemon_from_starting_with_a_clear_error() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let (code, _, err) = agency(&home, &["init"]);
    assert_eq!(code, 0, "{err}");
    std::fs::write(
        home.join("agency.toml"),
        "[secrets]\ngh = { file = \"no-such-file\" }\n",
    )
    .unwrap();
    let (code, _, err) = agency(&home, &["serve"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("failed to read secret \"gh\" from file ") && err.contains("no-such-file"),
        "{err}"
    );
}
