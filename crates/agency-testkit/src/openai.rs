//! The OpenAI-compatible chat-completions face (what Ollama, vLLM and
//! llama.cpp serve): reading a `POST /v1/chat/completions` body into a
//! [`Conversation`], and writing a reply as a `chat.completion` object or as
//! `data:` chunks ending in `data: [DONE]`.
//!
//! Lenient like the Anthropic face: content may be a string, null or an
//! array of parts; `system` and `developer` messages both make the system
//! prompt.

use crate::anthropic::text_of;
use crate::engine::{Conversation, Failure, Reply, pieces};
use serde_json::{Value, json};

/// Reads the conversation out of a chat-completions request body.
pub(crate) fn conversation(body: &Value) -> Result<Conversation, String> {
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .ok_or("failed to read the request: `messages` must be an array")?;
    let mut conv = Conversation {
        input_chars: body["messages"].to_string().chars().count(),
        ..Conversation::default()
    };
    let mut system = Vec::new();
    let mut seen_user = false;
    for message in messages {
        let content = message.get("content").unwrap_or(&Value::Null);
        match message.get("role").and_then(Value::as_str) {
            Some("system" | "developer") => system.push(text_of(content)),
            Some("user") if !seen_user => {
                seen_user = true;
                conv.first_user = text_of(content);
            }
            Some("assistant") => conv.assistant_messages += 1,
            Some("tool") => conv.tool_results.push(text_of(content)),
            _ => {}
        }
    }
    conv.system = system.join("\n");
    conv.tools = body
        .get("tools")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| {
            // {"type": "function", "function": {"name": …}}, or a bare
            // {"name": …} from looser clients.
            t.get("function")
                .unwrap_or(t)
                .get("name")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .collect();
    Ok(conv)
}

fn finish_reason(reply: &Reply) -> &'static str {
    if reply.tool_calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    }
}

fn call_id(reply: &Reply, i: usize) -> String {
    format!("call_{}{i:02}", reply.id)
}

fn usage(reply: &Reply) -> Value {
    json!({
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": reply.input_tokens + reply.output_tokens,
    })
}

/// The non-streaming answer. `content` is null when there is no text, and
/// `tool_calls` is left out when there are none, as OpenAI does.
pub(crate) fn completion(reply: &Reply, model: &str) -> Value {
    let mut message = json!({"role": "assistant", "content": reply.text});
    if !reply.tool_calls.is_empty() {
        message["tool_calls"] = reply
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, call)| {
                json!({
                    "id": call_id(reply, i),
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.input.to_string()},
                })
            })
            .collect();
    }
    json!({
        "id": format!("chatcmpl-{}", reply.id),
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(reply), "logprobs": null}],
        "usage": usage(reply),
    })
}

/// The streaming answer: one `data:` line (plus blank line) per chunk.
pub(crate) fn chunks(reply: &Reply, model: &str, include_usage: bool) -> Vec<String> {
    let id = format!("chatcmpl-{}", reply.id);
    let chunk = |delta: Value, finish: Value| {
        data(&json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": null}],
        }))
    };
    let mut out = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    if let Some(text) = &reply.text {
        for piece in pieces(text) {
            out.push(chunk(json!({"content": piece}), Value::Null));
        }
    }
    for (i, call) in reply.tool_calls.iter().enumerate() {
        out.push(chunk(
            json!({"tool_calls": [{
                "index": i,
                "id": call_id(reply, i),
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }]}),
            Value::Null,
        ));
        let arguments = call.input.to_string();
        for piece in pieces(&arguments) {
            out.push(chunk(
                json!({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}),
                Value::Null,
            ));
        }
    }
    out.push(chunk(json!({}), json!(finish_reason(reply))));
    if include_usage {
        out.push(data(&json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": [],
            "usage": usage(reply),
        })));
    }
    out.push("data: [DONE]\n\n".to_owned());
    out
}

fn data(chunk: &Value) -> String {
    format!("data: {chunk}\n\n")
}

/// The error body OpenAI-compatible servers use.
pub(crate) fn error_body(failure: &Failure) -> Value {
    let kind = match failure.status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        404 => "not_found_error",
        429 => "rate_limit_exceeded",
        _ => "server_error",
    };
    json!({"error": {"message": failure.message, "type": kind, "param": null, "code": null}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_chat_requests_leniently() {
        let body = json!({
            "model": "m",
            "messages": [
                {"role": "system", "content": "Sys A"},
                {"role": "developer", "content": [{"type": "text", "text": "Sys B"}]},
                {"role": "user", "content": [{"type": "text", "text": "first"}]},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c", "content": "{\"a\":1}"},
                {"role": "user", "content": "second"},
            ],
            "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}, {"name": "g"}],
        });
        let conv = conversation(&body).unwrap();
        assert_eq!(conv.system, "Sys A\nSys B");
        assert_eq!(conv.first_user, "first");
        assert_eq!(conv.assistant_messages, 1);
        assert_eq!(conv.tool_results, ["{\"a\":1}"]);
        assert_eq!(conv.tools, ["f", "g"]);
    }
}
