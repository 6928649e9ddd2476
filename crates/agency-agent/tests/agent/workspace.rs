//! The workspace tools through the whole loop, for both APIs: the scripted
//! model writes a file, edits it and runs `bash` to print it; the file is
//! really changed in the workspace, the transcript records each call, and
//! the model is given what the command printed.

use agency_agent::{Api, Ended, WORKSPACE_TOOLS, run_with_secrets};
use serde_json::json;

use crate::support::{Agency, anthropic_sse, capture_server, events, model_server, transcript};

const EDIT_SCRIPT: &str = r#"{
  "scenarios": [{
    "name": "write, edit, run",
    "match": {"system_contains": "WORKSPACE-TOOLS"},
    "turns": [
      {"text": "Writing a note.", "tool_calls": [{"name": "write_file", "input": {"path": "notes/hello.txt", "content": "hello wrold\n"}}]},
      {"tool_calls": [{"name": "edit_file", "input": {"path": "notes/hello.txt", "old_string": "wrold", "new_string": "world"}}]},
      {"tool_calls": [{"name": "bash", "input": {"command": "cat notes/hello.txt && pwd"}}]},
      {"text": "The command printed: {{result:}}"}
    ]
  }],
  "fallback": {"text": "unexpected conversation"}
}"#;

async fn write_edit_run(api: Api) {
    let a = Agency::start().await;
    let server = model_server(EDIT_SCRIPT).await;
    let cfg = a.config(api, &server.base_url(), "You are an agent. WORKSPACE-TOOLS");
    let ws = cfg.workspace.clone().unwrap();
    let s = run_with_secrets(&cfg, a.secrets()).await.unwrap();

    assert_eq!(s.ended, Ended::Completed, "{s:?}");
    assert_eq!((s.turns, s.tool_calls, s.tool_errors), (4, 3, 0), "{s:?}");
    assert_eq!(
        std::fs::read_to_string(ws.join("notes/hello.txt")).unwrap(),
        "hello world\n"
    );
    // The model was given the command's output and exit code.
    let shown_ws = ws.canonicalize().unwrap();
    assert_eq!(
        s.final_text,
        format!(
            "The command printed: hello world\n{}\n[exit code 0]",
            shown_ws.display()
        )
    );

    let lines = transcript(&cfg);
    let offered = events(&lines, "workspace_tools");
    assert_eq!(offered.len(), 1);
    assert_eq!(offered[0]["tools"], json!(WORKSPACE_TOOLS));
    assert_eq!(offered[0]["workspace"], json!(ws));
    let calls = events(&lines, "tool_call");
    let names: Vec<&str> = calls.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["write_file", "edit_file", "bash"]);
    assert_eq!(calls[1]["input"]["new_string"], "world");
    let results = events(&lines, "tool_result");
    let contents: Vec<&str> = results
        .iter()
        .map(|r| r["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        contents,
        [
            "created notes/hello.txt (12 bytes, 1 line)",
            "edited notes/hello.txt: replaced 1 occurrence",
            &format!("hello world\n{}\n[exit code 0]", shown_ws.display()),
        ]
    );
    assert!(
        results.iter().all(|r| r["is_error"] == false),
        "{results:?}"
    );

    // Every tool was offered: Agency's and the workspace's.
    let reqs = server.requests();
    assert_eq!(
        reqs[0].tools.len(),
        agency_mcp::TOOL_NAMES.len() + WORKSPACE_TOOLS.len()
    );
    for t in WORKSPACE_TOOLS {
        assert!(reqs[0].tools.iter().any(|o| o == t), "{t} not offered");
        assert!(
            !agency_mcp::TOOL_NAMES.contains(t),
            "{t} is an MCP tool too"
        );
    }
    server.shutdown().await;
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_model_writes_edits_and_runs_a_file() {
    write_edit_run(Api::Anthropic).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_model_writes_edits_and_runs_a_file() {
    write_edit_run(Api::Openai).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_workspace_tools_when_none_are_configured() {
    let a = Agency::start().await;
    let server = model_server(
        r#"{"scenarios": [{"name": "shell", "turns": [
            {"tool_calls": [{"name": "bash", "input": {"command": "touch made-it"}}]},
            {"text": "{{result:}}"}
        ]}]}"#,
    )
    .await;
    let mut cfg = a.config(Api::Anthropic, &server.base_url(), "agent");
    cfg.workspace_tools = Vec::new();
    let ws = cfg.workspace.clone().unwrap();
    let s = run_with_secrets(&cfg, a.secrets()).await.unwrap();
    assert_eq!(s.ended, Ended::Completed, "{s:?}");
    assert_eq!(s.tool_errors, 1);
    assert!(
        s.final_text
            .starts_with("[not_found] failed to call tool \"bash\""),
        "{}",
        s.final_text
    );
    assert!(!ws.join("made-it").exists());
    assert_eq!(
        server.requests()[0].tools.len(),
        agency_mcp::TOOL_NAMES.len()
    );
    server.shutdown().await;
    a.stop().await;
}

/// A command that prints a secret (as `cat /proc/$PPID/environ` could in
/// the real process) gives the model the redacted text, and the
/// transcript too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_printed_by_a_command_are_redacted_for_the_model() {
    let a = Agency::start().await;
    let token = a.token.clone();
    let command = format!("echo token={token}; echo key={}", crate::support::API_KEY);
    let cap = capture_server(move |n, _| {
        let body = if n == 0 {
            anthropic_sse("", &[("bash", json!({"command": command}))])
        } else {
            anthropic_sse("ok", &[])
        };
        (200, "text/event-stream", body)
    })
    .await;
    let cfg = a.config(Api::Anthropic, &cap.base_url, "sys");
    let s = run_with_secrets(&cfg, a.secrets()).await.unwrap();
    assert_eq!(s.ended, Ended::Completed, "{s:?}");
    let reqs = cap.requests();
    assert_eq!(reqs.len(), 2);
    let result = &reqs[1].body["messages"][2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(
        result["content"],
        "token=[redacted]\nkey=[redacted]\n[exit code 0]"
    );
    let text = std::fs::read_to_string(cfg.transcript_path.as_ref().unwrap()).unwrap();
    assert!(!text.contains(&a.token) && !text.contains(crate::support::API_KEY));
    a.stop().await;
}

/// The daemon validates `agents.builtin.tools` against its own copy of
/// the list; the two must not drift apart.
#[test]
fn the_daemon_knows_the_same_tools() {
    assert_eq!(agency_config::BuiltinConfig::TOOLS, WORKSPACE_TOOLS);
    assert_eq!(
        agency_config::BuiltinConfig::default().tools,
        WORKSPACE_TOOLS
    );
}
