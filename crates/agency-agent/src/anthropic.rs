//! The Anthropic Messages API: the request body, and the assembly of a
//! streamed answer (`message_start`, `content_block_start/delta/stop`,
//! `message_delta`, `message_stop`, `ping`, `error`) into a [`Reply`].
//!
//! Parsing goes through `serde_json::Value` and picks fields leniently:
//! unknown events and block types are skipped, missing fields and nulls
//! are defaults, so a near-compatible server or a newer API version does
//! not break the loop.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::model::{Message, Reply, Request, ToolCall, Usage, lenient_str, lenient_u64};
use agency_sse::SseEvent;

use crate::error::ReplyError;

/// The request body (always streaming).
pub(crate) fn request_body(req: &Request<'_>) -> Value {
    let tools: Vec<Value> = req
        .tools
        .iter()
        .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
        .collect();
    let messages: Vec<Value> = req.messages.iter().map(message).collect();
    let mut body = json!({
        "model": req.model,
        "max_tokens": req.max_tokens,
        "messages": messages,
        "stream": true,
    });
    // An empty system prompt is sent as no system prompt: the API refuses
    // empty text blocks.
    if !req.system.is_empty() {
        body["system"] = json!(req.system);
    }
    if !tools.is_empty() {
        body["tools"] = json!(tools);
    }
    body
}

fn message(m: &Message) -> Value {
    match m {
        Message::User(text) => json!({"role": "user", "content": text}),
        Message::Assistant { text, tool_calls } => {
            let mut content = Vec::new();
            // The API refuses empty text blocks.
            if !text.is_empty() {
                content.push(json!({"type": "text", "text": text}));
            }
            for c in tool_calls {
                content.push(
                    json!({"type": "tool_use", "id": c.id, "name": c.name, "input": c.input}),
                );
            }
            if content.is_empty() {
                // Only reachable for an empty answer, which ends the run;
                // kept valid anyway.
                content.push(json!({"type": "text", "text": "(no answer)"}));
            }
            json!({"role": "assistant", "content": content})
        }
        Message::ToolResults { results, then } => {
            let mut content: Vec<Value> = results
                .iter()
                .map(|r| {
                    json!({
                        "type": "tool_result",
                        "tool_use_id": r.call_id,
                        "content": r.content,
                        "is_error": r.is_error,
                    })
                })
                .collect();
            if let Some(text) = then {
                content.push(json!({"type": "text", "text": text}));
            }
            json!({"role": "user", "content": content})
        }
    }
}

#[derive(Debug)]
enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        /// `input` of `content_block_start` (normally `{}`), used when no
        /// delta follows.
        start_input: Value,
        json: String,
    },
    Other,
}

impl Block {
    /// A content block as it starts (streaming) or stands (non-streaming).
    fn from_json(block: &Value) -> Block {
        match lenient_str(block.get("type")) {
            Some("text") => Block::Text(
                lenient_str(block.get("text"))
                    .unwrap_or_default()
                    .to_owned(),
            ),
            Some("tool_use") => Block::ToolUse {
                id: lenient_str(block.get("id")).unwrap_or_default().to_owned(),
                name: lenient_str(block.get("name"))
                    .unwrap_or_default()
                    .to_owned(),
                start_input: block.get("input").cloned().unwrap_or(Value::Null),
                json: String::new(),
            },
            _ => Block::Other,
        }
    }
}

/// Folds a message's SSE events into a [`Reply`].
#[derive(Debug, Default)]
pub(crate) struct StreamAssembler {
    blocks: BTreeMap<u64, Block>,
    stop_reason: Option<String>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    stopped: bool,
}

impl StreamAssembler {
    /// Take one event. `Err` is a failure reported by the server in the
    /// stream or an unreadable event: the call is retried.
    pub fn event(&mut self, ev: &SseEvent) -> Result<(), ReplyError> {
        if ev.data.trim().is_empty() {
            return Ok(());
        }
        let data: Value =
            serde_json::from_str(&ev.data).map_err(|source| ReplyError::UnreadableEvent {
                event: ev.event.clone(),
                source,
            })?;
        // The `type` inside the data is authoritative; the SSE event name
        // is the fallback for servers that omit it.
        let kind = lenient_str(data.get("type")).unwrap_or(&ev.event);
        match kind {
            "message_start" => {
                let usage = data.get("message").and_then(|m| m.get("usage"));
                if let Some(u) = usage {
                    self.take_usage(u);
                }
            }
            "content_block_start" => {
                let index = lenient_u64(data.get("index")).unwrap_or(self.blocks.len() as u64);
                let block = data.get("content_block").unwrap_or(&Value::Null);
                let b = Block::from_json(block);
                self.blocks.insert(index, b);
            }
            "content_block_delta" => {
                let index = lenient_u64(data.get("index")).unwrap_or(0);
                let delta = data.get("delta").unwrap_or(&Value::Null);
                match (lenient_str(delta.get("type")), self.blocks.get_mut(&index)) {
                    (Some("text_delta"), Some(Block::Text(t))) => {
                        t.push_str(lenient_str(delta.get("text")).unwrap_or_default());
                    }
                    // A delta without its start: the server skipped it.
                    (Some("text_delta"), None) => {
                        let t = lenient_str(delta.get("text")).unwrap_or_default();
                        self.blocks.insert(index, Block::Text(t.to_owned()));
                    }
                    (Some("input_json_delta"), Some(Block::ToolUse { json, .. })) => {
                        json.push_str(lenient_str(delta.get("partial_json")).unwrap_or_default());
                    }
                    // Thinking, signatures, citations: not part of the answer.
                    _ => {}
                }
            }
            // Tool input is parsed once the whole reply is there, so a
            // missing stop event loses nothing.
            "content_block_stop" | "ping" => {}
            "message_delta" => {
                if let Some(r) = lenient_str(data.get("delta").and_then(|d| d.get("stop_reason"))) {
                    self.stop_reason = Some(r.to_owned());
                }
                if let Some(u) = data.get("usage") {
                    self.take_usage(u);
                }
            }
            "message_stop" => self.stopped = true,
            "error" => {
                let e = data.get("error").unwrap_or(&data);
                return Err(ReplyError::Reported {
                    kind: lenient_str(e.get("type")).unwrap_or("an error").to_owned(),
                    message: lenient_str(e.get("message"))
                        .unwrap_or("(no message)")
                        .to_owned(),
                });
            }
            _ => {}
        }
        Ok(())
    }

    /// Whether `message_stop` arrived (the caller may stop reading).
    pub fn is_done(&self) -> bool {
        self.stopped
    }

    fn take_usage(&mut self, u: &Value) {
        // Cached prompt tokens are input the budget must count too.
        let input: Option<u64> = [
            "input_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
        ]
        .iter()
        .filter_map(|k| lenient_u64(u.get(*k)))
        .reduce(|a, b| a + b);
        if input.is_some() {
            self.input_tokens = input;
        }
        if let Some(o) = lenient_u64(u.get("output_tokens")) {
            // `message_delta` carries the cumulative count.
            self.output_tokens = Some(o);
        }
    }

    /// The assembled reply. A stream that ended without `message_stop`
    /// is accepted only if `message_delta` said why the model stopped;
    /// otherwise it was cut off and the call is retried.
    pub fn finish(self) -> Result<Reply, ReplyError> {
        if !self.stopped && self.stop_reason.is_none() {
            return Err(ReplyError::Cut("message_stop"));
        }
        let mut reply = Reply {
            stop_reason: self.stop_reason,
            usage: (self.input_tokens.is_some() || self.output_tokens.is_some()).then(|| Usage {
                input_tokens: self.input_tokens.unwrap_or(0),
                output_tokens: self.output_tokens.unwrap_or(0),
                estimated: false,
            }),
            ..Reply::default()
        };
        for (i, b) in self.blocks {
            match b {
                Block::Text(t) => reply.text.push_str(&t),
                Block::ToolUse {
                    id,
                    name,
                    start_input,
                    json,
                } => {
                    let raw = if json.trim().is_empty() && start_input.is_object() {
                        start_input.to_string()
                    } else {
                        json
                    };
                    let id = if id.is_empty() {
                        format!("toolu_{i}")
                    } else {
                        id
                    };
                    reply.tool_calls.push(ToolCall::parse(id, name, raw));
                }
                Block::Other => {}
            }
        }
        Ok(reply)
    }
}

/// A non-streamed answer (a server that ignored `stream: true`).
pub(crate) fn parse_whole(body: &Value) -> Result<Reply, ReplyError> {
    if let Some(e) = body.get("error").filter(|e| !e.is_null()) {
        return Err(ReplyError::Reported {
            kind: "an error".to_owned(),
            message: lenient_str(e.get("message"))
                .unwrap_or("(no message)")
                .to_owned(),
        });
    }
    let mut a = StreamAssembler {
        stopped: true,
        stop_reason: lenient_str(body.get("stop_reason")).map(str::to_owned),
        ..StreamAssembler::default()
    };
    if let Some(u) = body.get("usage") {
        a.take_usage(u);
    }
    let blocks = body
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for (i, block) in blocks.iter().enumerate() {
        let b = Block::from_json(block);
        a.blocks.insert(i as u64, b);
    }
    a.finish()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::model::{ToolResult, ToolSpec};
    use agency_sse::SseParser;

    /// Run an SSE text through the parser and the assembler, in pieces of
    /// `size` bytes.
    fn assemble(sse: &str, size: usize) -> Result<Reply, String> {
        let mut p = SseParser::new();
        let mut a = StreamAssembler::default();
        for chunk in sse.as_bytes().chunks(size) {
            for ev in p.push(chunk).unwrap() {
                a.event(&ev).map_err(|e| e.to_string())?;
            }
        }
        if let Some(ev) = p.finish() {
            a.event(&ev).map_err(|e| e.to_string())?;
        }
        a.finish().map_err(|e| e.to_string())
    }

    const STREAM: &str = concat!(
        "event: message_start\n",
        "data: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":25,\"cache_read_input_tokens\":5,\"output_tokens\":1}}}\n\n",
        "event: content_block_start\n",
        "data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: ping\ndata: {\"type\": \"ping\"}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Let me \"}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"check.\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: content_block_start\n",
        "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"kb_create\",\"input\":{}}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\"}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"descr\"}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"iption\\\": \\\"plan\\\", \\\"content\\\": \\\"x\\\"}\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
        "event: content_block_start\n",
        "data: {\"type\":\"content_block_start\",\"index\":2,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_2\",\"name\":\"kb_list\",\"input\":{}}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":2}\n\n",
        "event: message_delta\n",
        "data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":42}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );

    #[test]
    fn assembles_text_and_tool_use_split_anywhere() {
        let whole = assemble(STREAM, STREAM.len()).unwrap();
        assert_eq!(whole.text, "Let me check.");
        assert_eq!(whole.stop_reason.as_deref(), Some("tool_use"));
        assert_eq!(
            whole.usage,
            Some(Usage {
                input_tokens: 30,
                output_tokens: 42,
                estimated: false
            })
        );
        assert_eq!(whole.tool_calls.len(), 2);
        let c = &whole.tool_calls[0];
        assert_eq!((c.id.as_str(), c.name.as_str()), ("toolu_1", "kb_create"));
        assert_eq!(c.input, json!({"description": "plan", "content": "x"}));
        assert_eq!(c.invalid, None);
        // No delta at all: the start's `{}` is the input.
        assert_eq!(whole.tool_calls[1].input, json!({}));
        for size in [1, 2, 3, 7, 64] {
            assert_eq!(assemble(STREAM, size).unwrap(), whole, "size {size}");
        }
    }

    #[test]
    fn error_event_and_truncation_fail_the_attempt() {
        let err = assemble(
            "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
            5,
        )
        .unwrap_err();
        assert!(err.contains("overloaded_error: Overloaded"), "{err}");
        let cut = &STREAM[..STREAM.find("event: message_delta").unwrap()];
        assert!(assemble(cut, 9).unwrap_err().contains("message_stop"));
        assert!(
            assemble("data: {not json\n\n", 4)
                .unwrap_err()
                .contains("unreadable")
        );
    }

    #[test]
    fn unknown_events_and_blocks_are_skipped() {
        let sse = concat!(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\n",
            "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"thinking\",\"thinking\":\"\"}}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"thinking_delta\",\"thinking\":\"hm\"}}\n\n",
            "event: brand_new\ndata: {\"type\":\"brand_new\",\"x\":null}\n\n",
            "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n",
            "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":null}\n\n",
        );
        let r = assemble(sse, 11).unwrap();
        assert_eq!(r.text, "hi");
        assert!(r.tool_calls.is_empty());
        assert_eq!(r.usage, None);
        assert_eq!(r.stop_reason.as_deref(), Some("end_turn"));
    }

    #[test]
    fn request_body_shape() {
        let tools = [ToolSpec {
            name: "kb_read".into(),
            description: "Read".into(),
            input_schema: json!({"type": "object"}),
        }];
        let call = ToolCall::parse("toolu_1".into(), "kb_read".into(), r#"{"file":"x"}"#.into());
        let messages = [
            Message::User("go".into()),
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![call],
            },
            Message::ToolResults {
                results: vec![ToolResult {
                    call_id: "toolu_1".into(),
                    content: "[not_found] no".into(),
                    is_error: true,
                }],
                then: Some("stop now".into()),
            },
        ];
        let body = request_body(&Request {
            model: "claude",
            system: "sys",
            messages: &messages,
            tools: &tools,
            max_tokens: 100,
        });
        assert_eq!(body["stream"], true);
        assert_eq!(body["system"], "sys");
        assert_eq!(body["max_tokens"], 100);
        assert_eq!(body["tools"][0]["input_schema"], json!({"type": "object"}));
        assert_eq!(
            body["messages"][0],
            json!({"role": "user", "content": "go"})
        );
        assert_eq!(
            body["messages"][1]["content"],
            json!([{"type": "tool_use", "id": "toolu_1", "name": "kb_read", "input": {"file": "x"}}])
        );
        assert_eq!(
            body["messages"][2]["content"],
            json!([
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "[not_found] no", "is_error": true},
                {"type": "text", "text": "stop now"},
            ])
        );
    }

    #[test]
    fn whole_json_answers_are_accepted() {
        let r = parse_whole(&json!({
            "content": [{"type": "text", "text": "ok"}, {"type": "tool_use", "id": "t", "name": "kb_list", "input": {"a": 1}}],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 3, "output_tokens": 4},
        }))
        .unwrap();
        assert_eq!(r.text, "ok");
        assert_eq!(r.tool_calls[0].input, json!({"a": 1}));
        assert_eq!(r.usage.unwrap().output_tokens, 4);
        assert!(parse_whole(&json!({"type": "error", "error": {"message": "bad"}})).is_err());
    }
}
