//! The built-in agent loop end to end: the real Agency daemon (MCP with
//! token auth) on one side, the testkit's scripted model server (or a
//! hand-written capture server) on the other, both over loopback HTTP.

#![allow(clippy::unwrap_used)]

mod support;
mod workspace;

use std::str::FromStr;

use agency_agent::{Api, Ended, LIMIT_NOTICE, run, run_with, run_with_secrets};
use agency_core::FileId;
use serde_json::{Value, json};
use support::{
    API_KEY, Agency, anthropic_sse, capture_server, events, model_server, result_file, transcript,
};

const KB_SCRIPT: &str = r#"{
  "scenarios": [{
    "name": "kb round trip",
    "match": {"system_contains": "KB-ROUND-TRIP"},
    "turns": [
      {"text": "Writing the plan.", "tool_calls": [{"name": "kb_create", "input": {"description": "Garden plan", "content": "dig, plant, water"}}]},
      {"tool_calls": [{"name": "kb_read", "input": {"file": "{{result:/file}}"}}]},
      {"text": "All done."}
    ]
  }],
  "fallback": {"text": "unexpected conversation"}
}"#;

async fn kb_round_trip(api: Api, base_suffix: &str) {
    let a = Agency::start().await;
    let server = model_server(KB_SCRIPT).await;
    let base = format!("{}{base_suffix}", server.base_url());
    let cfg = a.config(api, &base, "You are an agent. KB-ROUND-TRIP");
    let s = run_with_secrets(&cfg, a.secrets()).await.unwrap();

    assert_eq!(s.ended, Ended::Completed, "{s:?}");
    assert_eq!(s.exit_code(), 0);
    assert_eq!(
        (s.turns, s.tool_calls, s.tool_errors, s.retries),
        (3, 2, 0, 0)
    );
    assert!(s.input_tokens > 0 && s.output_tokens > 0, "{s:?}");
    assert!(!s.usage_estimated);
    assert_eq!(s.final_text, "All done.");
    assert_eq!(s.api, api);
    assert_eq!(result_file(&cfg), s);

    let lines = transcript(&cfg);
    assert_eq!(lines.first().unwrap()["event"], "run_start");
    assert_eq!(lines.last().unwrap()["event"], "run_end");
    assert_eq!(lines.last().unwrap()["ended"], "completed");
    let connected = events(&lines, "mcp_connected");
    assert_eq!(
        connected[0]["tools"].as_array().unwrap().len(),
        agency_mcp::TOOL_NAMES.len()
    );
    assert_eq!(events(&lines, "model_request").len(), 3);
    let replies = events(&lines, "model_reply");
    assert_eq!(replies.len(), 3);
    assert_eq!(replies[0]["text"], "Writing the plan.");
    assert_eq!(replies[0]["tool_calls"][0]["name"], "kb_create");
    assert_eq!(replies[2]["text"], "All done.");
    assert_eq!(events(&lines, "tool_call").len(), 2);
    let results = events(&lines, "tool_result");
    assert_eq!(results.len(), 2);
    assert!(
        results.iter().all(|r| r["is_error"] == false),
        "{results:?}"
    );
    let created: Value = serde_json::from_str(results[0]["content"].as_str().unwrap()).unwrap();
    let file = created["file"].as_str().unwrap().to_owned();
    let read: Value = serde_json::from_str(results[1]["content"].as_str().unwrap()).unwrap();
    assert_eq!(read["content"], "dig, plant, water");

    // The file is really in Agency's KB.
    let content = a
        .svc()
        .kb_read(a.me(), FileId::from_str(&file).unwrap())
        .unwrap();
    assert_eq!(content.text(), "dig, plant, water");
    assert_eq!(content.description, "Garden plan");

    // The model server saw every tool, and the resolved file id.
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    assert!(reqs.iter().all(|r| r.status == 200 && r.stream), "{reqs:?}");
    assert_eq!(
        reqs[0].tools.len(),
        agency_mcp::TOOL_NAMES.len() + agency_agent::WORKSPACE_TOOLS.len()
    );
    assert_eq!(reqs[1].tool_calls[0].input["file"], json!(file));
    server.shutdown().await;
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_run_creates_and_reads_a_kb_file() {
    kb_round_trip(Api::Anthropic, "").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_run_creates_and_reads_a_kb_file() {
    // A base URL ending in /v1 is accepted as well.
    kb_round_trip(Api::Openai, "/v1").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn turn_limit_asks_the_agent_to_save_its_state() {
    let a = Agency::start().await;
    let server = model_server(
        r#"{"scenarios": [{"name": "limit", "turns": [
            {"tool_calls": [{"name": "kb_list", "input": {}}]},
            {"tool_calls": [{"name": "state_read", "input": {}}]},
            {"tool_calls": [{"name": "state_write", "input": {"base_version": "{{result:/version}}", "base_hash": "{{result:/hash}}", "content": "Progress: saved at the limit"}}]},
            {"tool_calls": [{"name": "audit_submit", "input": {"summary": "stopped at the turn limit"}}]},
            {"text": "State saved."}
        ]}]}"#,
    )
    .await;
    let mut cfg = a.config(Api::Anthropic, &server.base_url(), "agent");
    cfg.max_turns = 2;
    let s = run_with_secrets(&cfg, a.secrets()).await.unwrap();

    assert_eq!(s.ended, Ended::TurnLimit, "{s:?}");
    assert_eq!(s.exit_code(), 0);
    assert_eq!((s.turns, s.tool_calls, s.tool_errors), (5, 4, 0));
    assert_eq!(s.final_text, "State saved.");
    assert_eq!(result_file(&cfg).ended, Ended::TurnLimit);

    let lines = transcript(&cfg);
    let kinds: Vec<&str> = lines.iter().map(|l| l["event"].as_str().unwrap()).collect();
    let limit_at = kinds.iter().position(|k| *k == "limit").unwrap();
    let requests_before = kinds[..limit_at]
        .iter()
        .filter(|k| **k == "model_request")
        .count();
    assert_eq!(requests_before, 2, "{kinds:?}");
    assert_eq!(lines[limit_at]["limit"], "turn_limit");
    assert_eq!(lines[limit_at]["notice"], LIMIT_NOTICE);
    assert_eq!(events(&lines, "limit").len(), 1);

    let state = a.svc().state_read(a.me(), None).unwrap();
    assert_eq!(state.text(), "Progress: saved at the limit");
    let log = a.svc().audit_read(a.me(), None).unwrap();
    assert!(
        log.iter().any(|e| e.summary == "stopped at the turn limit"),
        "{log:?}"
    );
    server.shutdown().await;
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_three_calls_follow_the_limit_notice() {
    let a = Agency::start().await;
    let server = model_server(
        r#"{"scenarios": [{"name": "endless", "turns": [
            {"tool_calls": [{"name": "kb_list", "input": {}}]}
        ], "after_last": {"tool_calls": [{"name": "kb_list", "input": {}}]}}]}"#,
    )
    .await;
    let mut cfg = a.config(Api::Openai, &server.base_url(), "agent");
    cfg.max_turns = 1;
    let s = run_with_secrets(&cfg, a.secrets()).await.unwrap();
    assert_eq!(s.ended, Ended::TurnLimit, "{s:?}");
    // One allowed call, three after the notice; the last answer's tool
    // calls are still carried out (they may be the state save).
    assert_eq!((s.turns, s.tool_calls), (4, 4));
    assert_eq!(server.requests().len(), 4);
    server.shutdown().await;
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_limit_ends_the_run_after_the_notice() {
    let a = Agency::start().await;
    let server = model_server(
        r#"{"scenarios": [{"name": "tokens", "turns": [
            {"tool_calls": [{"name": "kb_list", "input": {}}]},
            {"text": "Saved, stopping."}
        ]}]}"#,
    )
    .await;
    let mut cfg = a.config(Api::Openai, &server.base_url(), "agent");
    cfg.max_total_tokens = 1;
    let s = run_with_secrets(&cfg, a.secrets()).await.unwrap();
    assert_eq!(s.ended, Ended::TokenLimit, "{s:?}");
    assert_eq!(s.turns, 2);
    let lines = transcript(&cfg);
    assert_eq!(events(&lines, "limit")[0]["limit"], "token_limit");
    server.shutdown().await;
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_notice_follows_the_tool_results_in_the_same_user_turn() {
    let a = Agency::start().await;
    let cap = capture_server(|n, _| {
        let body = if n == 0 {
            anthropic_sse("Listing.", &[("kb_list", json!({"limit": 5}))])
        } else {
            anthropic_sse("Saved.", &[])
        };
        (200, "text/event-stream", body)
    })
    .await;
    let mut cfg = a.config(Api::Anthropic, &cap.base_url, "sys");
    cfg.max_turns = 1;
    let s = run_with_secrets(&cfg, a.secrets()).await.unwrap();
    assert_eq!(s.ended, Ended::TurnLimit, "{s:?}");
    assert_eq!((s.turns, s.tool_calls, s.tool_errors), (2, 1, 0));
    assert_eq!((s.input_tokens, s.output_tokens), (22, 14));

    let reqs = cap.requests();
    assert_eq!(reqs.len(), 2);
    let h = &reqs[0].headers;
    assert_eq!(reqs[0].path, "/v1/messages");
    assert_eq!(h["x-api-key"], API_KEY);
    assert_eq!(h["anthropic-version"], "2023-06-01");
    assert_eq!(h["content-type"], "application/json");
    let body = &reqs[0].body;
    assert_eq!(body["stream"], true);
    assert_eq!(body["system"], "sys");
    assert_eq!(body["max_tokens"], 1024);
    assert_eq!(
        body["tools"].as_array().unwrap().len(),
        agency_mcp::TOOL_NAMES.len() + agency_agent::WORKSPACE_TOOLS.len()
    );
    assert!(body["tools"][0]["input_schema"].is_object());

    let msgs = reqs[1].body["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3);
    assert_eq!(msgs[1]["role"], "assistant");
    assert_eq!(msgs[1]["content"][1]["input"], json!({"limit": 5}));
    let last = &msgs[2];
    assert_eq!(last["role"], "user");
    assert_eq!(last["content"][0]["type"], "tool_result");
    assert_eq!(last["content"][0]["tool_use_id"], "toolu_0");
    assert_eq!(last["content"][0]["is_error"], false);
    assert_eq!(
        last["content"][1],
        json!({"type": "text", "text": LIMIT_NOTICE})
    );
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_requests_and_a_server_that_ignores_stream() {
    let a = Agency::start().await;
    // Answers whole JSON (no SSE) and no usage: both must be tolerated.
    let cap = capture_server(|n, _| {
        let body = if n == 0 {
            json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "kb_list", "arguments": "{}"}}]},
                "finish_reason": "tool_calls"}]})
        } else {
            json!({"choices": [{"message": {"content": "fine"}, "finish_reason": "stop"}], "extra": [1]})
        };
        (200, "application/json", body.to_string())
    })
    .await;
    let cfg = a.config(Api::Openai, &format!("{}/", cap.base_url), "sys");
    let s = run_with_secrets(&cfg, a.secrets()).await.unwrap();
    assert_eq!(s.ended, Ended::Completed, "{s:?}");
    assert_eq!((s.turns, s.tool_calls), (2, 1));
    assert!(s.usage_estimated && s.input_tokens > 0, "{s:?}");

    let reqs = cap.requests();
    assert_eq!(reqs[0].path, "/v1/chat/completions");
    assert_eq!(
        reqs[0].headers["authorization"],
        format!("Bearer {API_KEY}").as_str()
    );
    let body = &reqs[0].body;
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(
        body["messages"][0],
        json!({"role": "system", "content": "sys"})
    );
    assert_eq!(body["tools"][0]["type"], "function");
    let msgs = reqs[1].body["messages"].as_array().unwrap();
    assert_eq!(msgs[2]["tool_calls"][0]["id"], "c1");
    assert_eq!(msgs[3]["role"], "tool");
    assert_eq!(msgs[3]["tool_call_id"], "c1");
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limits_are_retried_with_backoff() {
    let a = Agency::start().await;
    let server = model_server(
        r#"{"scenarios": [{"name": "busy", "turns": [
            {"error": {"status": 429, "message": "slow down", "times": 2, "retry_after_seconds": 30}},
            {"text": "made it"}
        ]}]}"#,
    )
    .await;
    let cfg = a.config(Api::Anthropic, &server.base_url(), "agent");
    let started = std::time::Instant::now();
    let s = run_with_secrets(&cfg, a.secrets()).await.unwrap();
    assert_eq!(s.ended, Ended::Completed, "{s:?}");
    assert_eq!((s.turns, s.retries), (1, 2));
    assert_eq!(s.final_text, "made it");
    // retry-after (30 s) was capped by max_backoff_ms (200 ms).
    assert!(started.elapsed() < std::time::Duration::from_secs(10));

    let lines = transcript(&cfg);
    let retries = events(&lines, "retry");
    assert_eq!(retries.len(), 2);
    assert_eq!(retries[0]["status"], 429);
    assert_eq!(retries[0]["attempt"], 1);
    assert_eq!(retries[1]["attempt"], 2);
    assert_eq!(retries[0]["wait_ms"], 200);
    assert!(
        retries[0]["error"].as_str().unwrap().contains("slow down"),
        "{retries:?}"
    );
    let statuses: Vec<u16> = server.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [429, 429, 200]);
    server.shutdown().await;
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_errors_fail_at_once_and_retries_run_out() {
    let a = Agency::start().await;
    let server = model_server(
        r#"{"scenarios": [
            {"name": "bad", "match": {"system_contains": "BAD"}, "turns": [
                {"error": {"status": 400, "message": "max_tokens too large"}}]},
            {"name": "down", "match": {"system_contains": "DOWN"}, "turns": [
                {"error": {"status": 503, "message": "maintenance", "times": 10}}]}
        ]}"#,
    )
    .await;
    let cfg = a.config(Api::Openai, &server.base_url(), "BAD");
    let s = run_with_secrets(&cfg, a.secrets()).await.unwrap();
    let Ended::Error(msg) = &s.ended else {
        panic!("{s:?}")
    };
    assert!(
        msg.starts_with("failed to call the model at http://"),
        "{msg}"
    );
    assert!(msg.contains("/v1/chat/completions"), "{msg}");
    assert!(
        msg.contains("400") && msg.contains("max_tokens too large"),
        "{msg}"
    );
    assert_eq!((s.retries, s.exit_code()), (0, 1));
    assert_eq!(result_file(&cfg).exit_code(), 1);
    assert_eq!(events(&transcript(&cfg), "error").len(), 1);

    let mut cfg = a.config(Api::Anthropic, &server.base_url(), "DOWN");
    cfg.retry.max_attempts = 2;
    let s = run_with_secrets(&cfg, a.secrets()).await.unwrap();
    let Ended::Error(msg) = &s.ended else {
        panic!("{s:?}")
    };
    assert!(
        msg.contains("maintenance") && msg.contains("gave up after 2 attempts"),
        "{msg}"
    );
    assert_eq!(s.retries, 1);
    server.shutdown().await;
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_tool_calls_become_error_results_and_the_loop_goes_on() {
    let a = Agency::start().await;
    let missing = uuid::Uuid::new_v4();
    let script = json!({"scenarios": [{"name": "refused", "turns": [
        {"tool_calls": [{"name": "kb_read", "input": {"file": missing.to_string()}}]},
        {"tool_calls": [{"name": "no_such_tool", "input": {}}, {"name": "kb_list", "input": {}}]},
        {"text": "I could not read it."}
    ]}]});
    let server = model_server(&script.to_string()).await;
    let cfg = a.config(Api::Anthropic, &server.base_url(), "agent");
    let s = run_with_secrets(&cfg, a.secrets()).await.unwrap();
    assert_eq!(s.ended, Ended::Completed, "{s:?}");
    assert_eq!((s.turns, s.tool_calls, s.tool_errors), (3, 3, 2));

    let lines = transcript(&cfg);
    let results = events(&lines, "tool_result");
    assert_eq!(results[0]["is_error"], true);
    let refused = results[0]["content"].as_str().unwrap();
    assert!(refused.starts_with('['), "{refused}");
    assert!(
        refused.contains(&missing.to_string()) || refused.contains("not"),
        "{refused}"
    );
    assert_eq!(results[1]["is_error"], true);
    assert!(
        results[1]["content"]
            .as_str()
            .unwrap()
            .starts_with("[not_found] failed to call tool \"no_such_tool\"")
    );
    assert_eq!(results[2]["is_error"], false);
    server.shutdown().await;
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_never_reach_the_transcript_or_the_result() {
    let a = Agency::start().await;
    let token = a.token.clone();
    let server = model_server(KB_SCRIPT).await;
    let cfg = a.config(Api::Anthropic, &server.base_url(), "KB-ROUND-TRIP");
    let s = run_with_secrets(&cfg, a.secrets()).await.unwrap();
    assert_eq!(s.ended, Ended::Completed);
    let mut written = vec![
        std::fs::read_to_string(cfg.transcript_path.as_ref().unwrap()).unwrap(),
        std::fs::read_to_string(cfg.result_path.as_ref().unwrap()).unwrap(),
    ];

    // A server that echoes both secrets in its error body.
    let echo = format!("invalid x-api-key {API_KEY} (and token {token})");
    let cap = capture_server(move |_, _| (401, "application/json", echo.clone())).await;
    let mut cfg2 = a.config(Api::Anthropic, &cap.base_url, "x");
    cfg2.transcript_path = Some(a.dir.path().join("run2/transcript.jsonl"));
    cfg2.result_path = Some(a.dir.path().join("run2/result.json"));
    let s2 = run_with_secrets(&cfg2, a.secrets()).await.unwrap();
    let Ended::Error(msg) = &s2.ended else {
        panic!("{s2:?}")
    };
    assert!(msg.contains("401") && msg.contains("[redacted]"), "{msg}");
    written.push(std::fs::read_to_string(cfg2.transcript_path.as_ref().unwrap()).unwrap());
    written.push(std::fs::read_to_string(cfg2.result_path.as_ref().unwrap()).unwrap());

    // An MCP server that refuses the token.
    let mut cfg3 = a.config(Api::Anthropic, &server.base_url(), "x");
    cfg3.transcript_path = Some(a.dir.path().join("run3/transcript.jsonl"));
    cfg3.result_path = Some(a.dir.path().join("run3/result.json"));
    let mut bad = a.secrets();
    bad.mcp_token = format!("{token}-revoked");
    let s3 = run_with_secrets(&cfg3, bad).await.unwrap();
    let Ended::Error(msg) = &s3.ended else {
        panic!("{s3:?}")
    };
    assert!(
        msg.starts_with("failed to connect to the MCP server at http://"),
        "{msg}"
    );
    written.push(std::fs::read_to_string(cfg3.transcript_path.as_ref().unwrap()).unwrap());
    written.push(std::fs::read_to_string(cfg3.result_path.as_ref().unwrap()).unwrap());

    for text in &written {
        assert!(!text.is_empty());
        assert!(!text.contains(API_KEY), "API key leaked: {text}");
        assert!(!text.contains(&token), "MCP token leaked: {text}");
        assert!(
            !text.contains("DO-NOT-LEAK"),
            "part of the key leaked: {text}"
        );
    }
    server.shutdown().await;
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_environment_secrets_end_the_run_with_an_error() {
    let a = Agency::start().await;
    let mut cfg = a.config(Api::Openai, "http://127.0.0.1:9", "agent");
    cfg.api_key_env = Some("AGENCY_AGENT_TEST_SURELY_UNSET_KEY".into());
    let s = run(&cfg).await.unwrap();
    let Ended::Error(msg) = &s.ended else {
        panic!("{s:?}")
    };
    assert_eq!(
        msg,
        "failed to read the API key from environment variable AGENCY_AGENT_TEST_SURELY_UNSET_KEY: it is not set"
    );
    assert_eq!(result_file(&cfg).exit_code(), 1);
    assert_eq!(s.turns, 0);
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_signal_ends_a_hanging_call_and_still_writes_the_result() {
    let a = Agency::start().await;
    // Accepts connections (in the backlog) and never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", silent.local_addr().unwrap());
    let cfg = a.config(Api::Anthropic, &base, "agent");
    let started = std::time::Instant::now();
    let stop = tokio::time::sleep(std::time::Duration::from_millis(300));
    let s = run_with(&cfg, Some(a.secrets()), stop).await.unwrap();
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    let Ended::Error(msg) = &s.ended else {
        panic!("{s:?}")
    };
    assert!(msg.contains("stopped"), "{msg}");
    assert_eq!(result_file(&cfg).exit_code(), 1);
    let lines = transcript(&cfg);
    assert_eq!(lines.last().unwrap()["event"], "run_end");
    assert_eq!(events(&lines, "model_request").len(), 1);
    drop(silent);
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_in_the_middle_of_a_stream_are_retried() {
    let a = Agency::start().await;
    let cap = capture_server(|n, _| {
        let whole = anthropic_sse("recovered", &[]);
        let body = match n {
            // An `error` event after the answer began.
            0 => format!(
                "{}event: error\ndata: {}\n\n",
                &whole[..whole.find("event: content_block_start").unwrap()],
                json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
            ),
            // A stream cut off before message_stop.
            1 => whole[..whole.find("event: message_delta").unwrap()].to_owned(),
            _ => whole,
        };
        (200, "text/event-stream", body)
    })
    .await;
    let cfg = a.config(Api::Anthropic, &cap.base_url, "agent");
    let s = run_with_secrets(&cfg, a.secrets()).await.unwrap();
    assert_eq!(s.ended, Ended::Completed, "{s:?}");
    assert_eq!((s.turns, s.retries), (1, 2));
    assert_eq!(s.final_text, "recovered");
    let lines = transcript(&cfg);
    let retries = events(&lines, "retry");
    assert!(
        retries[0]["error"]
            .as_str()
            .unwrap()
            .contains("overloaded_error"),
        "{retries:?}"
    );
    assert!(
        retries[1]["error"]
            .as_str()
            .unwrap()
            .contains("message_stop"),
        "{retries:?}"
    );
    assert_eq!(cap.requests().len(), 3);
    a.stop().await;
}
