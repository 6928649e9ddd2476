//! Script behaviour over HTTP: scenario selection, error turns with
//! retry-after, the end of a script, the request log endpoint, and the
//! server's lifecycle (`shutdown`, `serve`, `Script::load`).

mod support;

use agency_testkit::{Api, ModelServer, RecordedRequest, Script, serve};
use serde_json::{Value, json};
use support::{anthropic, post, start};

const HANDLER: &str = "6f1c0b7e-aaaa-4bbb-8ccc-ddddeeeeffff";

fn script() -> String {
    format!(
        r#"{{
      "scenarios": [
        {{"name": "by system", "match": {{"system_contains": "You are the root"}}, "turns": [{{"text": "root"}}]}},
        {{"name": "by handler", "match": {{"handler": "{}"}}, "turns": [{{"text": "handler"}}]}},
        {{"name": "by both", "match": {{"system_contains": "worker", "user_contains": "urgent"}}, "turns": [{{"text": "urgent worker"}}]}},
        {{"name": "flaky", "match": {{"user_contains": "flaky"}}, "turns": [
          {{"text": "start"}},
          {{"error": {{"status": 429, "message": "rate limited", "times": 2, "retry_after_seconds": 3}}}},
          {{"text": "recovered"}}
        ]}},
        {{"name": "short", "match": {{"user_contains": "short"}}, "turns": [{{"text": "only"}}]}},
        {{"name": "with after_last", "match": {{"user_contains": "after"}}, "turns": [{{"text": "only"}}], "after_last": {{"text": "nothing more"}}}}
      ],
      "fallback": {{"text": "fallback answer"}}
    }}"#,
        HANDLER.to_uppercase()
    )
}

fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

async fn text_at(server: &ModelServer, system: &str, messages: Value) -> (u16, String) {
    let answer = post(server, "/v1/messages", &anthropic(system, messages, false)).await;
    if answer.status != 200 {
        return (answer.status, answer.json()["error"]["message"].to_string());
    }
    let text = answer.json()["content"][0]["text"]
        .as_str()
        .expect("a text block")
        .to_owned();
    (answer.status, text)
}

/// A conversation at `position` (that many assistant messages).
fn at(first: &str, position: usize) -> Value {
    let mut messages = vec![user(first)];
    for i in 0..position {
        messages.push(json!({"role": "assistant", "content": format!("a{i}")}));
        messages.push(user("next"));
    }
    json!(messages)
}

#[tokio::test]
async fn selects_the_first_matching_scenario() {
    let server = start(&script()).await;
    let cases = [
        ("You are the root handler", "hi", "root"),
        (
            "You are handler 6f1c0b7e-aaaa-4bbb-8ccc-ddddeeeeffff (worker)",
            "urgent",
            "handler",
        ),
        ("You are a worker", "urgent task", "urgent worker"),
        ("You are a worker", "calm task", "fallback answer"),
        ("You are nobody", "hi", "fallback answer"),
    ];
    for (system, first, expected) in cases {
        let (status, text) = text_at(&server, system, at(first, 0)).await;
        assert_eq!(
            (status, text.as_str()),
            (200, expected),
            "{system} / {first}"
        );
    }
    let scenarios: Vec<Option<String>> =
        server.requests().into_iter().map(|r| r.scenario).collect();
    assert_eq!(
        scenarios,
        [
            Some("by system".to_owned()),
            Some("by handler".to_owned()),
            Some("by both".to_owned()),
            None,
            None
        ]
    );
    server.shutdown().await;
}

#[tokio::test]
async fn no_match_without_fallback_is_a_400() {
    let server = start(
        r#"{"scenarios": [{"name": "only", "match": {"system_contains": "zzz"}, "turns": [{"text": "x"}]}]}"#,
    )
    .await;
    let (status, message) = text_at(&server, "You are nobody", at("hi", 0)).await;
    assert_eq!(status, 400);
    assert!(message.contains("failed to choose a scenario"), "{message}");
    assert!(message.contains("You are nobody"), "{message}");
    server.shutdown().await;
}

#[tokio::test]
async fn error_turn_fails_twice_with_retry_after_then_succeeds() {
    let server = start(&script()).await;
    assert_eq!(text_at(&server, "s", at("flaky", 0)).await.1, "start");
    for _ in 0..2 {
        let answer = post(
            &server,
            "/v1/messages",
            &anthropic("s", at("flaky", 1), true),
        )
        .await;
        assert_eq!(answer.status, 429);
        assert_eq!(answer.headers["retry-after"], "3");
        let body = answer.json();
        assert_eq!(body["error"]["type"], "rate_limit_error");
        assert_eq!(body["error"]["message"], "rate limited");
    }
    // The error turn took no position: the next turn answers position 1.
    assert_eq!(
        text_at(&server, "s", at("flaky", 1)).await,
        (200, "recovered".to_owned())
    );
    assert_eq!(
        text_at(&server, "s", at("flaky", 1)).await,
        (200, "recovered".to_owned())
    );
    // Another conversation counts its own errors.
    assert_eq!(text_at(&server, "s", at("flaky too", 1)).await.0, 429);
    let log: Vec<(usize, Option<usize>, u16)> = server
        .requests()
        .into_iter()
        .map(|r| (r.turn, r.script_turn, r.status))
        .collect();
    assert_eq!(
        log,
        [
            (0, Some(0), 200),
            (1, Some(1), 429),
            (1, Some(1), 429),
            (1, Some(2), 200),
            (1, Some(2), 200),
            (1, Some(1), 429),
        ]
    );
    server.shutdown().await;
}

#[tokio::test]
async fn past_the_last_turn_answers_end_of_script_or_after_last() {
    let server = start(&script()).await;
    assert_eq!(text_at(&server, "s", at("short", 0)).await.1, "only");
    for position in [1, 5] {
        let answer = post(
            &server,
            "/v1/messages",
            &anthropic("s", at("short", position), false),
        )
        .await;
        let body = answer.json();
        assert_eq!(body["stop_reason"], "end_turn");
        assert_eq!(
            body["content"][0]["text"],
            "end of script (scenario \"short\")"
        );
    }
    assert_eq!(
        text_at(&server, "s", at("after", 1)).await.1,
        "nothing more"
    );
    let last = server.requests().pop().unwrap();
    assert_eq!(last.script_turn, None);
    assert_eq!(last.scenario.as_deref(), Some("with after_last"));
    server.shutdown().await;
}

#[tokio::test]
async fn the_request_log_is_served_as_json() {
    let server = start(&script()).await;
    text_at(&server, "You are the root", at("hi", 0)).await;
    let log: Vec<RecordedRequest> = reqwest::get(format!("{}/_agency/requests", server.base_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(log, server.requests());
    assert_eq!(log[0].api, Api::Anthropic);
    assert_eq!(log[0].model, "claude-test");
    let raw: Value = reqwest::get(format!("{}/_agency/requests", server.base_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(raw[0]["api"], "anthropic");
    server.shutdown().await;
}

#[tokio::test]
async fn shutdown_stops_listening() {
    let server = start(&script()).await;
    let url = server.base_url();
    // Keep a pooled connection open across shutdown: it must not block it.
    let client = reqwest::Client::new();
    assert_eq!(client.get(&url).send().await.unwrap().status(), 200);
    server.shutdown().await;
    assert!(client.get(&url).send().await.is_err());
}

#[tokio::test]
async fn serve_runs_until_its_shutdown_future_completes() {
    // Find a free port, then serve on it.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let script = Script::from_json(&script()).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(serve(script, port, async {
        let _ = stopped.await;
    }));
    let url = format!("http://127.0.0.1:{port}/");
    let mut up = false;
    for _ in 0..100 {
        if reqwest::get(&url).await.is_ok() {
            up = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(up, "server should come up on port {port}");
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
    assert!(reqwest::get(&url).await.is_err());
}

#[tokio::test]
async fn load_reads_a_file_and_names_it_in_errors() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.json");
    std::fs::write(&good, script()).unwrap();
    let loaded = Script::load(&good).unwrap();
    assert_eq!(loaded.scenario_names().count(), 6);

    let bad = dir.path().join("bad.json");
    std::fs::write(
        &bad,
        r#"{"scenarios": [{"name": "a", "turns": [{"text": "x"}, {"text": "y", "tool_calls": [{"name": "t", "input": {"x": "{{result:nope}}"}}]}]}]}"#,
    )
    .unwrap();
    let err = Script::load(&bad).unwrap_err().to_string();
    let expected = format!(
        "failed to load model script {}: scenario 1 (\"a\") turn 2: tool call 1: input at /x: placeholder {{{{result:nope}}}}",
        bad.display()
    );
    assert!(err.starts_with(&expected), "{err}");
}
