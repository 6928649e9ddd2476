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

use crate::agent_story;

use std::time::Duration;

use agent_story::{SCRIPT, Story, claude_bin, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_root_handlers_claude_code_agent_answers_the_user() {
    let claude = std::fs::canonicalize(claude_bin()).unwrap();
    let script = agency_testkit::Script::from_json(SCRIPT).unwrap();
    let model = agency_testkit::ModelServer::start(script).await.unwrap();
    let cfg = format!(
        "[agents]\nruntime = \"claude-code\"\n[agents.claude_code]\nprogram = {:?}\nmodel = \"scripted\"\nmax_turns = 20\n[agents.claude_code.env]\nANTHROPIC_BASE_URL = {:?}\nANTHROPIC_API_KEY = \"test\"\nCLAUDE_CODE_MAX_RETRIES = \"1\"\n",
        claude.to_str().unwrap(),
        model.base_url()
    );
    let story = Story::start(&cfg, Duration::from_secs(120)).await;
    let (reply, agent) = story.ask_and_wait().await;
    // "completed" comes from the transcript: MCP connected, a successful
    // result without is_error.
    assert_eq!(agent["end_reason"], "completed", "{agent}");
    // Its stderr is kept with the run (issue 9 item 16); stdout, the
    // transcript parsed above, is not mixed into it.
    let log = json(&story.home, &["logs", agent["id"].as_str().unwrap()]);
    assert_eq!(log["captured"], true, "{log}");
    assert!(
        !log["text"]
            .as_str()
            .unwrap()
            .contains("\"type\":\"system\""),
        "{log}"
    );
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
    story.assert_common_outcome(&reply, &agent).await;
    story.stop();
    model.shutdown().await;
}
