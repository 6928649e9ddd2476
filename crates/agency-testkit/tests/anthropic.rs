//! The Messages API face over real HTTP: JSON and streamed answers, the
//! probes Claude Code sends, and placeholders fed by `tool_result` blocks in
//! the shapes Claude Code produces.

mod support;

use serde_json::{Value, json};
use support::{anthropic, anthropic_events, assemble_anthropic, post, start};

const SCRIPT: &str = r#"{
  "scenarios": [{
    "name": "root handler",
    "match": {"system_contains": "Help the user accomplish"},
    "turns": [
      {"text": "Checking mail first.", "tool_calls": [{"name": "mail_inbox", "input": {"limit": 10, "filter": {"unread": true}}}]},
      {"tool_calls": [{"name": "outcome_create", "input": {"title": "Guide written", "parents": ["{{system:Outcome ([0-9a-f-]{36})}}"]}}]},
      {"text": "Done for now."}
    ]
  }]
}"#;

const SYSTEM: &str =
    "Help the user accomplish things. Your root Outcome 0b7e6f1c-1111-4222-8333-444455556666.";

fn first_user() -> Value {
    json!({"role": "user", "content": "Write a guide"})
}

#[tokio::test]
async fn non_streaming_answers_tool_use_then_end_turn() {
    let server = start(SCRIPT).await;
    let answer = post(
        &server,
        "/v1/messages",
        &anthropic(SYSTEM, json!([first_user()]), false),
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    let message = answer.json();
    assert_eq!(message["type"], "message");
    assert_eq!(message["role"], "assistant");
    assert_eq!(message["model"], "claude-test");
    assert_eq!(message["stop_reason"], "tool_use");
    assert_eq!(
        message["content"][0],
        json!({"type": "text", "text": "Checking mail first."})
    );
    let call = &message["content"][1];
    assert_eq!(call["type"], "tool_use");
    assert_eq!(call["name"], "mail_inbox");
    assert_eq!(
        call["input"],
        json!({"limit": 10, "filter": {"unread": true}})
    );
    assert!(call["id"].as_str().unwrap().starts_with("toolu_"));
    assert!(message["usage"]["input_tokens"].as_u64().unwrap() >= 1);
    assert!(message["usage"]["output_tokens"].as_u64().unwrap() >= 1);

    // Second position: the system regex placeholder fills the parent.
    let messages = json!([
        first_user(),
        {"role": "assistant", "content": message["content"]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": "[]"}]},
    ]);
    let message = post(
        &server,
        "/v1/messages",
        &anthropic(SYSTEM, messages.clone(), false),
    )
    .await
    .json();
    assert_eq!(message["stop_reason"], "tool_use");
    assert_eq!(
        message["content"][0]["input"],
        json!({"title": "Guide written", "parents": ["0b7e6f1c-1111-4222-8333-444455556666"]})
    );
    // Retrying the same request gets the same answer, ids included.
    let again = post(&server, "/v1/messages", &anthropic(SYSTEM, messages, false))
        .await
        .json();
    assert_eq!(again, message);

    let messages = json!([
        first_user(),
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "b"},
        {"role": "assistant", "content": "c"},
        {"role": "user", "content": "d"},
    ]);
    let message = post(&server, "/v1/messages", &anthropic(SYSTEM, messages, false))
        .await
        .json();
    assert_eq!(message["stop_reason"], "end_turn");
    assert_eq!(
        message["content"],
        json!([{"type": "text", "text": "Done for now."}])
    );

    let log = server.requests();
    assert_eq!(log.len(), 4);
    assert_eq!(log.iter().map(|r| r.turn).collect::<Vec<_>>(), [0, 1, 1, 2]);
    assert!(
        log.iter()
            .all(|r| r.scenario.as_deref() == Some("root handler"))
    );
    assert_eq!(log[0].tools, ["mail_inbox", "outcome_create"]);
    assert_eq!(log[0].tool_calls[0].name, "mail_inbox");
    assert_eq!(log[3].text.as_deref(), Some("Done for now."));
    server.shutdown().await;
}

#[tokio::test]
async fn streaming_follows_the_standard_event_sequence() {
    let server = start(SCRIPT).await;
    let answer = post(
        &server,
        "/v1/messages?beta=true",
        &anthropic(SYSTEM, json!([first_user()]), true),
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert!(answer.content_type().starts_with("text/event-stream"));
    let events = anthropic_events(&answer.text);
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    let text_deltas = names
        .iter()
        .skip(2)
        .take_while(|n| **n == "content_block_delta")
        .count();
    assert!(text_deltas >= 2, "text should come in pieces: {names:?}");
    assert_eq!(names[1], "content_block_start");
    assert_eq!(names[2 + text_deltas], "content_block_stop");
    assert_eq!(names[3 + text_deltas], "content_block_start");
    let assembled = assemble_anthropic(&events);
    assert_eq!(assembled.stop_reason, "tool_use");
    assert_eq!(
        assembled.blocks[0],
        json!({"type": "text", "text": "Checking mail first."})
    );
    assert_eq!(assembled.blocks[1]["type"], "tool_use");
    assert_eq!(assembled.blocks[1]["name"], "mail_inbox");
    assert_eq!(
        assembled.blocks[1]["input"],
        json!({"limit": 10, "filter": {"unread": true}})
    );
    assert!(
        assembled.json_pieces.iter().all(|&n| n >= 2),
        "{:?}",
        assembled.json_pieces
    );
    assert!(assembled.input_tokens >= 1 && assembled.output_tokens >= 1);
    assert_eq!(events[0].1["message"]["stop_reason"], Value::Null);

    // The final turn streams as end_turn.
    let messages = json!([
        first_user(),
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "b"},
        {"role": "assistant", "content": "c"},
        {"role": "user", "content": "d"},
    ]);
    let answer = post(
        &server,
        "/v1/messages?beta=true",
        &anthropic(SYSTEM, messages, true),
    )
    .await;
    let assembled = assemble_anthropic(&anthropic_events(&answer.text));
    assert_eq!(assembled.stop_reason, "end_turn");
    assert_eq!(
        assembled.blocks,
        [json!({"type": "text", "text": "Done for now."})]
    );
    assert!(server.requests().iter().all(|r| r.stream));
    server.shutdown().await;
}

#[tokio::test]
async fn tool_only_answer_streams_an_empty_input_in_two_pieces() {
    let server = start(
        r#"{"scenarios": [{"name": "s", "turns": [{"tool_calls": [{"name": "mail_inbox"}, {"name": "outcome_create", "input": {"t": "x"}}]}]}]}"#,
    )
    .await;
    let answer = post(
        &server,
        "/v1/messages",
        &anthropic("sys", json!([first_user()]), true),
    )
    .await;
    let assembled = assemble_anthropic(&anthropic_events(&answer.text));
    assert_eq!(assembled.blocks.len(), 2);
    assert_eq!(assembled.blocks[0]["input"], json!({}));
    assert_eq!(assembled.blocks[1]["input"], json!({"t": "x"}));
    assert_ne!(assembled.blocks[0]["id"], assembled.blocks[1]["id"]);
    assert_eq!(assembled.json_pieces, [2, 2]);
    server.shutdown().await;
}

#[tokio::test]
async fn placeholders_read_tool_results_in_claude_code_shapes() {
    let server = start(
        r#"{"scenarios": [{"name": "placeholders", "turns": [
            {"tool_calls": [{"name": "mail_inbox"}]},
            {"tool_calls": [{"name": "delegate", "input": {
                "outcome": "{{result:/outcome}}",
                "ids": "{{result:/ids}}",
                "first": "{{result:/ids/0}}",
                "older": "{{result[2]:/name}}",
                "whole": "{{result[3]:}}",
                "note": "outcome {{result:/outcome}} for {{user:guide #(\\d+)}} ids {{result:/ids}}",
                "handler": "{{system:Outcome ([0-9a-f-]{36})}}"
            }}], "text": "Delegating {{result:/outcome}}."}
        ]}]}"#,
    )
    .await;
    // Oldest first: a plain string result, a bare JSON result, then Claude
    // Code's wrapper as an array of text blocks around JSON text.
    let wrapped =
        json!({"result": json!({"outcome": "o-42", "ids": [7, 8]}).to_string()}).to_string();
    let messages = json!([
        {"role": "user", "content": [{"type": "text", "text": "Write guide #12"}]},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "x", "input": {}},
            {"type": "tool_use", "id": "t2", "name": "x", "input": {}},
            {"type": "tool_use", "id": "t3", "name": "y", "input": {}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "just text"},
            {"type": "tool_result", "tool_use_id": "t2", "content": "{\"name\": \"older\"}"},
            {"type": "tool_result", "tool_use_id": "t3", "content": [{"type": "text", "text": wrapped}]},
        ]},
    ]);
    let answer = post(&server, "/v1/messages", &anthropic(SYSTEM, messages, false)).await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    let message = answer.json();
    assert_eq!(message["content"][0]["text"], "Delegating o-42.");
    assert_eq!(
        message["content"][1]["input"],
        json!({
            "outcome": "o-42",
            "ids": [7, 8],
            "first": 7,
            "older": "older",
            "whole": "just text",
            "note": "outcome o-42 for 12 ids [7,8]",
            "handler": "0b7e6f1c-1111-4222-8333-444455556666",
        })
    );
    server.shutdown().await;
}

#[tokio::test]
async fn unresolvable_placeholder_is_a_400_naming_it() {
    let server = start(
        r#"{"scenarios": [{"name": "needs a result", "turns": [
            {"text": "first"},
            {"tool_calls": [{"name": "delegate", "input": {"outcome": "{{result:/outcome}}"}}]}
        ]}]}"#,
    )
    .await;
    let messages = json!([
        first_user(),
        {"role": "assistant", "content": "first"},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "{\"other\": 1}"}]},
    ]);
    let answer = post(&server, "/v1/messages", &anthropic("s", messages, true)).await;
    assert_eq!(answer.status, 400);
    let body = answer.json();
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    let message = body["error"]["message"].as_str().unwrap();
    for needle in [
        "\"needs a result\"",
        "turn 2",
        "{{result:/outcome}}",
        "/outcome",
    ] {
        assert!(message.contains(needle), "{needle} not in {message}");
    }
    let log = server.requests();
    assert_eq!(log[0].status, 400);
    assert_eq!(log[0].error.as_deref(), Some(message));
    server.shutdown().await;
}

#[tokio::test]
async fn scripted_names_use_the_offered_mcp_spelling() {
    let server = start(
        r#"{"scenarios": [{"name": "s", "turns": [{"tool_calls": [{"name": "mail_inbox"}, {"name": "Bash", "input": {"command": "ls"}}]}]}]}"#,
    )
    .await;
    let mut body = anthropic("s", json!([first_user()]), false);
    body["tools"] = json!([
        {"name": "Bash", "input_schema": {}},
        {"name": "mcp__agency__mail_inbox", "input_schema": {}},
    ]);
    let message = post(&server, "/v1/messages", &body).await.json();
    assert_eq!(message["content"][0]["name"], "mcp__agency__mail_inbox");
    assert_eq!(message["content"][1]["name"], "Bash");
    server.shutdown().await;
}

#[tokio::test]
async fn probes_count_tokens_and_bad_requests() {
    let server = start(SCRIPT).await;
    let client = reqwest::Client::new();
    let head = client.head(server.base_url()).send().await.unwrap();
    assert_eq!(head.status(), 200);
    let get = client
        .get(format!("{}/", server.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), 200);

    let counted = post(
        &server,
        "/v1/messages/count_tokens",
        &anthropic(SYSTEM, json!([first_user()]), false),
    )
    .await
    .json();
    assert!(counted["input_tokens"].as_u64().unwrap() >= 1);

    let not_json = client
        .post(format!("{}/v1/messages", server.base_url()))
        .body("{nope")
        .send()
        .await
        .unwrap();
    assert_eq!(not_json.status(), 400);
    let body: Value = not_json.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not JSON")
    );

    let no_messages = post(&server, "/v1/messages", &json!({"model": "m"})).await;
    assert_eq!(no_messages.status, 400);
    assert!(no_messages.text.contains("`messages`"));

    let missing = post(&server, "/v1/complete", &json!({})).await;
    assert_eq!(missing.status, 404);
    assert!(missing.text.contains("/v1/complete"));

    // Only the two model requests are recorded, both refused.
    let statuses: Vec<u16> = server.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [400, 400]);
    server.shutdown().await;
}
