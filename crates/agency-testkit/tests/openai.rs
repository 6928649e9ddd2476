//! The OpenAI-compatible chat-completions face over real HTTP: JSON and
//! streamed answers, tool-call reassembly, usage chunks and placeholders
//! fed by `tool` messages.

mod support;

use serde_json::{Value, json};
use support::{openai, openai_chunks, post, start};

const SCRIPT: &str = r#"{
  "scenarios": [{
    "name": "worker",
    "match": {"user_contains": "Write"},
    "turns": [
      {"text": "Looking.", "tool_calls": [{"name": "mail_inbox", "input": {"limit": 10, "filter": {"unread": true}}}, {"name": "kb_read", "input": {"path": "notes/a.md"}}]},
      {"tool_calls": [{"name": "outcome_complete", "input": {"outcome": "{{result:/result/outcome}}", "ids": "{{result:/ids}}"}}]},
      {"text": "All done, thank you for waiting."}
    ]
  }]
}"#;

fn user() -> Value {
    json!({"role": "user", "content": "Write a guide"})
}

#[tokio::test]
async fn non_streaming_answers_tool_calls_then_stop() {
    let server = start(SCRIPT).await;
    let answer = post(
        &server,
        "/v1/chat/completions",
        &openai("sys", vec![user()], false),
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    let body = answer.json();
    assert_eq!(body["object"], "chat.completion");
    assert_eq!(body["model"], "local-test");
    let choice = &body["choices"][0];
    assert_eq!(choice["index"], 0);
    assert_eq!(choice["finish_reason"], "tool_calls");
    let message = &choice["message"];
    assert_eq!(message["role"], "assistant");
    assert_eq!(message["content"], "Looking.");
    let calls = message["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["type"], "function");
    assert_eq!(calls[0]["function"]["name"], "mail_inbox");
    let arguments: Value =
        serde_json::from_str(calls[0]["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"limit": 10, "filter": {"unread": true}}));
    assert_ne!(calls[0]["id"], calls[1]["id"]);
    let usage = &body["usage"];
    assert_eq!(
        usage["total_tokens"].as_u64().unwrap(),
        usage["prompt_tokens"].as_u64().unwrap() + usage["completion_tokens"].as_u64().unwrap()
    );

    // Tool messages feed placeholders; the literal {"result": {...}} object
    // is not mistaken for Claude Code's wrapper.
    let messages = vec![
        user(),
        json!({"role": "assistant", "content": null, "tool_calls": calls}),
        json!({"role": "tool", "tool_call_id": calls[0]["id"], "content": "{\"ids\": [1]}"}),
        json!({"role": "tool", "tool_call_id": calls[1]["id"], "content": [{"type": "text", "text": "{\"result\": {\"outcome\": \"o-9\"}, \"ids\": [3, 4]}"}]}),
    ];
    let body = post(
        &server,
        "/v1/chat/completions",
        &openai("sys", messages, false),
    )
    .await
    .json();
    let call = &body["choices"][0]["message"]["tool_calls"][0];
    let arguments: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"outcome": "o-9", "ids": [3, 4]}));
    assert_eq!(body["choices"][0]["message"]["content"], Value::Null);

    let messages = vec![
        user(),
        json!({"role": "assistant", "content": "a"}),
        json!({"role": "user", "content": "b"}),
        json!({"role": "assistant", "content": "c"}),
        json!({"role": "user", "content": "d"}),
    ];
    let body = post(
        &server,
        "/v1/chat/completions",
        &openai("sys", messages, false),
    )
    .await
    .json();
    assert_eq!(body["choices"][0]["finish_reason"], "stop");
    assert_eq!(
        body["choices"][0]["message"]["content"],
        "All done, thank you for waiting."
    );
    assert!(body["choices"][0]["message"].get("tool_calls").is_none());
    let log = server.requests();
    assert!(log.iter().all(|r| r.api == agency_testkit::Api::OpenAi));
    assert_eq!(log.iter().map(|r| r.turn).collect::<Vec<_>>(), [0, 1, 2]);
    server.shutdown().await;
}

/// Reassembles a streamed completion as a client would: (role, content,
/// calls as (id, name, arguments), finish_reason, usage).
struct Streamed {
    role: String,
    content: String,
    calls: Vec<(String, String, String)>,
    argument_pieces: Vec<usize>,
    finish_reason: String,
    usage: Option<Value>,
}

fn reassemble(chunks: &[Value]) -> Streamed {
    let mut out = Streamed {
        role: String::new(),
        content: String::new(),
        calls: Vec::new(),
        argument_pieces: Vec::new(),
        finish_reason: String::new(),
        usage: None,
    };
    for (n, chunk) in chunks.iter().enumerate() {
        assert_eq!(chunk["object"], "chat.completion.chunk");
        if let Some(usage) = chunk.get("usage") {
            assert_eq!(n, chunks.len() - 1, "usage comes last");
            assert_eq!(chunk["choices"], json!([]));
            out.usage = Some(usage.clone());
            continue;
        }
        assert!(
            out.finish_reason.is_empty(),
            "nothing after finish_reason but usage"
        );
        let choice = &chunk["choices"][0];
        let delta = &choice["delta"];
        if let Some(role) = delta["role"].as_str() {
            out.role = role.to_owned();
        }
        if let Some(text) = delta["content"].as_str() {
            out.content.push_str(text);
        }
        for call in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = call["index"].as_u64().expect("index") as usize;
            if index == out.calls.len() {
                out.calls.push((
                    call["id"].as_str().expect("id").to_owned(),
                    call["function"]["name"].as_str().expect("name").to_owned(),
                    String::new(),
                ));
                out.argument_pieces.push(0);
            }
            if let Some(piece) = call["function"]["arguments"]
                .as_str()
                .filter(|p| !p.is_empty())
            {
                out.calls[index].2.push_str(piece);
                out.argument_pieces[index] += 1;
            }
        }
        if let Some(reason) = choice["finish_reason"].as_str() {
            out.finish_reason = reason.to_owned();
        }
    }
    out
}

#[tokio::test]
async fn streaming_reassembles_tool_calls_and_reports_usage() {
    let server = start(SCRIPT).await;
    let mut body = openai("sys", vec![user()], true);
    body["stream_options"] = json!({"include_usage": true});
    let answer = post(&server, "/v1/chat/completions", &body).await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert!(answer.content_type().starts_with("text/event-stream"));
    let streamed = reassemble(&openai_chunks(&answer.text));
    assert_eq!(streamed.role, "assistant");
    assert_eq!(streamed.content, "Looking.");
    assert_eq!(streamed.finish_reason, "tool_calls");
    assert_eq!(streamed.calls.len(), 2);
    assert_eq!(streamed.calls[0].1, "mail_inbox");
    assert_eq!(streamed.calls[1].1, "kb_read");
    let first: Value = serde_json::from_str(&streamed.calls[0].2).unwrap();
    assert_eq!(first, json!({"limit": 10, "filter": {"unread": true}}));
    let second: Value = serde_json::from_str(&streamed.calls[1].2).unwrap();
    assert_eq!(second, json!({"path": "notes/a.md"}));
    assert!(streamed.argument_pieces.iter().all(|&n| n >= 2));
    let usage = streamed.usage.expect("usage chunk");
    assert!(usage["prompt_tokens"].as_u64().unwrap() >= 1);

    // Without include_usage: no usage chunk; a text answer finishes "stop".
    let messages = vec![
        user(),
        json!({"role": "assistant", "content": "a"}),
        json!({"role": "user", "content": "b"}),
        json!({"role": "assistant", "content": "c"}),
        json!({"role": "user", "content": "d"}),
    ];
    let answer = post(
        &server,
        "/v1/chat/completions",
        &openai("sys", messages, true),
    )
    .await;
    let chunks = openai_chunks(&answer.text);
    let streamed = reassemble(&chunks);
    assert_eq!(streamed.content, "All done, thank you for waiting.");
    assert!(chunks.len() > 3, "text should come in pieces");
    assert_eq!(streamed.finish_reason, "stop");
    assert!(streamed.calls.is_empty());
    assert!(streamed.usage.is_none());
    server.shutdown().await;
}

#[tokio::test]
async fn errors_use_the_openai_shape_and_the_path_without_v1_works() {
    let server = start(
        r#"{"scenarios": [{"name": "s", "turns": [{"error": {"status": 500, "message": "boom"}}, {"text": "ok"}]}]}"#,
    )
    .await;
    let answer = post(
        &server,
        "/chat/completions",
        &openai("sys", vec![user()], false),
    )
    .await;
    assert_eq!(answer.status, 500);
    assert_eq!(answer.json()["error"]["message"], "boom");
    assert_eq!(answer.json()["error"]["type"], "server_error");
    let answer = post(
        &server,
        "/chat/completions",
        &openai("sys", vec![user()], false),
    )
    .await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.json()["choices"][0]["message"]["content"], "ok");
    server.shutdown().await;
}
