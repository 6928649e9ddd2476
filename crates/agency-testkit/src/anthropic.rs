//! The Anthropic Messages API face: reading a `POST /v1/messages` body into
//! a [`Conversation`], and writing a reply as a message JSON or as the
//! standard SSE event sequence Claude Code accepts.
//!
//! Reading is deliberately lenient (plain `serde_json::Value` walking):
//! unknown fields and block types are ignored, content may be a string or
//! blocks, a tool result's content a string or text blocks.

use crate::engine::{Conversation, Failure, Reply, pieces};
use serde_json::{Value, json};

/// Reads the conversation out of a Messages API request body.
pub(crate) fn conversation(body: &Value) -> Result<Conversation, String> {
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("failed to read the request: `messages` must be an array")?;
    let system = body.get("system").map(text_of).unwrap_or_default();
    let mut conv = Conversation {
        input_chars: system.chars().count() + body["messages"].to_string().chars().count(),
        system,
        ..Conversation::default()
    };
    let mut seen_user = false;
    for message in messages {
        match message.get("role").and_then(Value::as_str) {
            Some("assistant") => conv.assistant_messages += 1,
            Some("user") => {
                let content = message.get("content").unwrap_or(&Value::Null);
                if !seen_user {
                    seen_user = true;
                    conv.first_user = text_of(content);
                }
                for block in content.as_array().into_iter().flatten() {
                    if block.get("type").and_then(Value::as_str) == Some("tool_result") {
                        conv.tool_results
                            .push(block.get("content").map(text_of).unwrap_or_default());
                    }
                }
            }
            _ => {}
        }
    }
    conv.tools = body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("name").and_then(Value::as_str).map(str::to_owned))
        .collect();
    Ok(conv)
}

/// The text of a string, or of the `text` blocks in an array of blocks
/// (joined by newlines); anything else reads as empty.
pub(crate) fn text_of(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| match b {
                Value::String(text) => Some(text.as_str()),
                _ => b.get("text").and_then(Value::as_str),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn stop_reason(reply: &Reply) -> &'static str {
    if reply.tool_calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    }
}

fn tool_id(reply: &Reply, i: usize) -> String {
    format!("toolu_{}{i:02}", reply.id)
}

/// The non-streaming answer: one message object.
pub(crate) fn message(reply: &Reply, model: &str) -> Value {
    let mut content = Vec::new();
    if let Some(text) = &reply.text {
        content.push(json!({"type": "text", "text": text}));
    }
    for (i, call) in reply.tool_calls.iter().enumerate() {
        content.push(json!({
            "type": "tool_use",
            "id": tool_id(reply, i),
            "name": call.name,
            "input": call.input,
        }));
    }
    json!({
        "id": format!("msg_{}", reply.id),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(reply),
        "stop_sequence": null,
        "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
    })
}

/// The streaming answer: SSE events, each `event:` + `data:` + blank line,
/// one string per event (sent as separate chunks).
pub(crate) fn events(reply: &Reply, model: &str) -> Vec<String> {
    let mut out = vec![event(
        "message_start",
        &json!({
            "type": "message_start",
            "message": {
                "id": format!("msg_{}", reply.id),
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": null,
                "stop_sequence": null,
                "usage": {"input_tokens": reply.input_tokens, "output_tokens": 1},
            },
        }),
    )];
    let mut index = 0;
    if let Some(text) = &reply.text {
        out.push(block_start(index, json!({"type": "text", "text": ""})));
        for piece in pieces(text) {
            out.push(block_delta(
                index,
                json!({"type": "text_delta", "text": piece}),
            ));
        }
        out.push(block_stop(index));
        index += 1;
    }
    for (i, call) in reply.tool_calls.iter().enumerate() {
        out.push(block_start(
            index,
            json!({"type": "tool_use", "id": tool_id(reply, i), "name": call.name, "input": {}}),
        ));
        let input = call.input.to_string();
        for piece in pieces(&input) {
            out.push(block_delta(
                index,
                json!({"type": "input_json_delta", "partial_json": piece}),
            ));
        }
        out.push(block_stop(index));
        index += 1;
    }
    out.push(event(
        "message_delta",
        &json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop_reason(reply), "stop_sequence": null},
            "usage": {"output_tokens": reply.output_tokens},
        }),
    ));
    out.push(event("message_stop", &json!({"type": "message_stop"})));
    out
}

fn event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

fn block_start(index: usize, block: Value) -> String {
    event(
        "content_block_start",
        &json!({"type": "content_block_start", "index": index, "content_block": block}),
    )
}

fn block_delta(index: usize, delta: Value) -> String {
    event(
        "content_block_delta",
        &json!({"type": "content_block_delta", "index": index, "delta": delta}),
    )
}

fn block_stop(index: usize) -> String {
    event(
        "content_block_stop",
        &json!({"type": "content_block_stop", "index": index}),
    )
}

/// The error body the Messages API uses, with its error type by status
/// (clients pick their retry policy from status and type).
pub(crate) fn error_body(failure: &Failure) -> Value {
    let kind = match failure.status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    json!({"type": "error", "error": {"type": kind, "message": failure.message}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_claude_code_shaped_requests() {
        let body = json!({
            "model": "claude-x",
            "system": [{"type": "text", "text": "You are Claude Code."}, {"type": "text", "text": "Handler 1"}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "<system-reminder>r</system-reminder>"}, {"type": "text", "text": "Do it"}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "a", "input": {}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "{\"result\":\"{}\"}"}]},
                    {"type": "tool_result", "tool_use_id": "t2", "content": "plain"},
                    {"type": "tool_result", "tool_use_id": "t3"}
                ]},
            ],
            "tools": [{"name": "mcp__agency__a", "input_schema": {}}, {"type": "custom"}],
            "unknown": true,
        });
        let conv = conversation(&body).unwrap();
        assert_eq!(conv.system, "You are Claude Code.\nHandler 1");
        assert_eq!(
            conv.first_user,
            "<system-reminder>r</system-reminder>\nDo it"
        );
        assert_eq!(conv.assistant_messages, 1);
        assert_eq!(conv.tool_results, ["{\"result\":\"{}\"}", "plain", ""]);
        assert_eq!(conv.tools, ["mcp__agency__a"]);
        assert!(conv.input_chars > 0);
    }

    #[test]
    fn rejects_a_body_without_messages() {
        let err = conversation(&json!({"model": "m"})).unwrap_err();
        assert!(err.contains("`messages`"), "{err}");
    }
}
