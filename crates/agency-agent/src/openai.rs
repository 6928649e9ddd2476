//! The OpenAI-compatible chat-completions API (OpenAI, Ollama, vLLM,
//! llama.cpp server): the request body, and the assembly of streamed
//! `data:` chunks (`delta.content`, `delta.tool_calls[i]` pieces by index,
//! `finish_reason`, the usage chunk, `[DONE]`) into a [`Reply`].
//!
//! "Compatible" servers differ in the details, so everything is read
//! leniently from `serde_json::Value`: missing fields, nulls, extra
//! fields, counts as strings, tool calls without an index or id, argument
//! objects instead of strings, and usage in any chunk.

use serde_json::{Value, json};

use crate::model::{Message, Reply, Request, ToolCall, Usage, lenient_str, lenient_u64};
use agency_sse::SseEvent;

use crate::error::ReplyError;

/// The request body (always streaming, asking for the usage chunk).
pub(crate) fn request_body(req: &Request<'_>) -> Value {
    let mut messages = Vec::with_capacity(req.messages.len() + 1);
    if !req.system.is_empty() {
        messages.push(json!({"role": "system", "content": req.system}));
    }
    for m in req.messages {
        push_message(&mut messages, m);
    }
    let mut body = json!({
        "model": req.model,
        "messages": messages,
        // `max_tokens` rather than the newer `max_completion_tokens`:
        // every compatible server understands it.
        "max_tokens": req.max_tokens,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.input_schema}})
            })
            .collect();
        body["tools"] = json!(tools);
    }
    body
}

fn push_message(out: &mut Vec<Value>, m: &Message) {
    match m {
        Message::User(text) => out.push(json!({"role": "user", "content": text})),
        Message::Assistant { text, tool_calls } => {
            let mut msg = json!({"role": "assistant", "content": text});
            if !tool_calls.is_empty() {
                if text.is_empty() {
                    msg["content"] = Value::Null;
                }
                let calls: Vec<Value> = tool_calls
                    .iter()
                    .map(|c| {
                        json!({"id": c.id, "type": "function", "function": {
                            "name": c.name, "arguments": c.raw_arguments}})
                    })
                    .collect();
                msg["tool_calls"] = json!(calls);
            }
            out.push(msg);
        }
        Message::ToolResults { results, then } => {
            for r in results {
                // No `is_error` field in this API: the content's "[kind]"
                // prefix tells the model the call failed.
                out.push(json!({"role": "tool", "tool_call_id": r.call_id, "content": r.content}));
            }
            if let Some(text) = then {
                out.push(json!({"role": "user", "content": text}));
            }
        }
    }
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Folds a completion's chunks into a [`Reply`].
#[derive(Debug, Default)]
pub(crate) struct StreamAssembler {
    text: String,
    calls: Vec<(u64, PartialCall)>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    done: bool,
}

impl StreamAssembler {
    /// Take one event. `Err` is an error object in the stream or an
    /// unreadable chunk: the call is retried.
    pub fn event(&mut self, ev: &SseEvent) -> Result<(), ReplyError> {
        let data = ev.data.trim();
        if data.is_empty() {
            return Ok(());
        }
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk: Value = serde_json::from_str(data).map_err(ReplyError::UnreadableChunk)?;
        self.chunk(&chunk)
    }

    fn chunk(&mut self, chunk: &Value) -> Result<(), ReplyError> {
        if let Some(e) = chunk.get("error").filter(|e| !e.is_null()) {
            let msg = lenient_str(e.get("message"))
                .or_else(|| e.as_str())
                .unwrap_or("(no message)");
            return Err(ReplyError::Reported {
                kind: "an error".to_owned(),
                message: msg.to_owned(),
            });
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(Usage {
                input_tokens: lenient_u64(u.get("prompt_tokens")).unwrap_or(0),
                output_tokens: lenient_u64(u.get("completion_tokens")).unwrap_or(0),
                estimated: false,
            });
        }
        let choices = chunk.get("choices").and_then(Value::as_array);
        // Only the first choice is ours (we never ask for `n` > 1).
        let Some(choice) = choices.and_then(|c| c.first()) else {
            return Ok(());
        };
        if let Some(r) = lenient_str(choice.get("finish_reason")) {
            self.finish_reason = Some(r.to_owned());
        }
        // `delta` when streaming; `message` in a whole answer.
        let Some(delta) = choice.get("delta").or_else(|| choice.get("message")) else {
            return Ok(());
        };
        if let Some(t) = lenient_str(delta.get("content")) {
            self.text.push_str(t);
        }
        if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
            for tc in calls {
                self.tool_call_piece(tc);
            }
        }
        Ok(())
    }

    fn tool_call_piece(&mut self, tc: &Value) {
        let id = lenient_str(tc.get("id")).filter(|s| !s.is_empty());
        // Servers that omit the index send each call whole, or continue
        // the last one without an id.
        let index = lenient_u64(tc.get("index")).unwrap_or_else(|| match id {
            Some(id) => self
                .calls
                .iter()
                .find(|(_, c)| c.id == id)
                .map(|(i, _)| *i)
                .unwrap_or_else(|| self.next_index()),
            None => self.calls.last().map_or(0, |(i, _)| *i),
        });
        let found = self.calls.iter().position(|(i, _)| *i == index);
        // A different id at a used index is a new call: some servers send
        // every call whole at index 0.
        let found = found.filter(|&p| {
            let known = &self.calls[p].1.id;
            id.is_none_or(|id| known.is_empty() || known == id)
        });
        let index = if found.is_none() && self.calls.iter().any(|(i, _)| *i == index) {
            self.next_index()
        } else {
            index
        };
        let pos = match found {
            Some(p) => p,
            None => {
                self.calls.push((index, PartialCall::default()));
                self.calls.len() - 1
            }
        };
        let call = &mut self.calls[pos].1;
        if let Some(id) = id {
            call.id = id.to_owned();
        }
        let f = tc.get("function").unwrap_or(&Value::Null);
        if let Some(name) = lenient_str(f.get("name")) {
            // Names normally arrive whole in the first piece; some servers
            // repeat the name in every piece, which must not double it.
            if call.name != name {
                call.name.push_str(name);
            }
        }
        match f.get("arguments") {
            Some(Value::String(s)) => call.arguments.push_str(s),
            Some(v @ Value::Object(_)) => call.arguments = v.to_string(),
            _ => {}
        }
    }

    /// Whether `[DONE]` arrived (the caller may stop reading).
    pub fn is_done(&self) -> bool {
        self.done
    }

    fn next_index(&self) -> u64 {
        self.calls.iter().map(|(i, _)| i + 1).max().unwrap_or(0)
    }

    /// The assembled reply. A stream that ended without `[DONE]` is
    /// accepted once a `finish_reason` was seen; otherwise it was cut off
    /// and the call is retried.
    pub fn finish(mut self) -> Result<Reply, ReplyError> {
        if !self.done && self.finish_reason.is_none() {
            return Err(ReplyError::Cut("a finish_reason or [DONE]"));
        }
        self.calls.sort_by_key(|(i, _)| *i);
        let tool_calls = self
            .calls
            .into_iter()
            .enumerate()
            .map(|(n, (_, c))| {
                let id = if c.id.is_empty() {
                    format!("call_{n}")
                } else {
                    c.id
                };
                ToolCall::parse(id, c.name, c.arguments)
            })
            .collect();
        Ok(Reply {
            text: self.text,
            tool_calls,
            stop_reason: self.finish_reason,
            usage: self.usage,
        })
    }
}

/// A non-streamed answer (a server that ignored `stream: true`).
pub(crate) fn parse_whole(body: &Value) -> Result<Reply, ReplyError> {
    let mut a = StreamAssembler {
        done: true,
        ..StreamAssembler::default()
    };
    a.chunk(body)?;
    a.finish()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::model::{ToolResult, ToolSpec};
    use agency_sse::SseParser;

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
        "data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"On it\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"kb_create\",\"arguments\":\"\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"description\\\":\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"call_b\",\"function\":{\"name\":\"kb_list\",\"arguments\":\"{}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"plan\\\"}\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}],\"usage\":null}\n\n",
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":120,\"completion_tokens\":17,\"total_tokens\":137}}\n\n",
        "data: [DONE]\n\n",
    );

    #[test]
    fn assembles_tool_calls_by_index_split_anywhere() {
        let whole = assemble(STREAM, STREAM.len()).unwrap();
        assert_eq!(whole.text, "On it");
        assert_eq!(whole.stop_reason.as_deref(), Some("tool_calls"));
        assert_eq!(
            whole.usage,
            Some(Usage {
                input_tokens: 120,
                output_tokens: 17,
                estimated: false
            })
        );
        let names: Vec<_> = whole.tool_calls.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["kb_create", "kb_list"]);
        assert_eq!(whole.tool_calls[0].id, "call_a");
        assert_eq!(whole.tool_calls[0].input, json!({"description": "plan"}));
        assert_eq!(whole.tool_calls[1].input, json!({}));
        for size in [1, 3, 10, 100] {
            assert_eq!(assemble(STREAM, size).unwrap(), whole, "size {size}");
        }
    }

    #[test]
    fn lenient_servers() {
        // No index, no id, arguments as an object, usage in the finishing
        // chunk, no [DONE], CRLF line ends.
        let sse = concat!(
            "data: {\"choices\":[{\"delta\":{\"content\":null,\"tool_calls\":[{\"function\":{\"name\":\"kb_read\",\"arguments\":{\"file\":\"f\"}}}]}}],\"extra\":1}\r\n\r\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"x2\",\"function\":{\"name\":\"kb_list\",\"arguments\":\"\"}}]}}]}\r\n\r\n",
            "data: {\"choices\":[{\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":\"5\",\"completion_tokens\":2}}\r\n\r\n",
        );
        let r = assemble(sse, 7).unwrap();
        assert_eq!(r.tool_calls.len(), 2);
        assert_eq!(r.tool_calls[0].id, "call_0");
        assert_eq!(r.tool_calls[0].input, json!({"file": "f"}));
        assert_eq!(r.tool_calls[1].id, "x2");
        assert_eq!(r.usage.unwrap().input_tokens, 5);

        // Whole calls, each at index 0 with its own id.
        let sse = concat!(
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"a\",\"function\":{\"name\":\"kb_list\",\"arguments\":\"{}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"b\",\"function\":{\"name\":\"kb_read\",\"arguments\":\"{\\\"file\\\":\\\"f\\\"}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: [DONE]\n\n",
        );
        let r = assemble(sse, 13).unwrap();
        let got: Vec<_> = r
            .tool_calls
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str()))
            .collect();
        assert_eq!(got, [("a", "kb_list"), ("b", "kb_read")]);
        assert_eq!(r.tool_calls[1].input, json!({"file": "f"}));
    }

    #[test]
    fn errors_and_cut_streams_fail_the_attempt() {
        let err = assemble(
            "data: {\"error\":{\"message\":\"model overloaded\"}}\n\n",
            5,
        )
        .unwrap_err();
        assert!(err.contains("model overloaded"), "{err}");
        let cut = "data: {\"choices\":[{\"delta\":{\"content\":\"par\"}}]}\n\n";
        assert!(assemble(cut, 3).unwrap_err().contains("finish_reason"));
        assert!(
            assemble("data: nope\n\n", 3)
                .unwrap_err()
                .contains("unreadable")
        );
    }

    #[test]
    fn whole_answers_are_accepted() {
        let r = parse_whole(&json!({
            "choices": [{"message": {"role": "assistant", "content": "hi", "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "kb_list", "arguments": "{}"}}]},
                "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 2},
        }))
        .unwrap();
        assert_eq!(r.text, "hi");
        assert_eq!(r.tool_calls[0].id, "c1");
    }

    #[test]
    fn request_body_shape() {
        let tools = [ToolSpec {
            name: "kb_read".into(),
            description: "Read".into(),
            input_schema: json!({"type": "object"}),
        }];
        let call = ToolCall::parse("c1".into(), "kb_read".into(), r#"{"file":"x"}"#.into());
        let messages = [
            Message::User("go".into()),
            Message::Assistant {
                text: String::new(),
                tool_calls: vec![call],
            },
            Message::ToolResults {
                results: vec![ToolResult {
                    call_id: "c1".into(),
                    content: "{}".into(),
                    is_error: false,
                }],
                then: Some("stop now".into()),
            },
        ];
        let body = request_body(&Request {
            model: "llama",
            system: "sys",
            messages: &messages,
            tools: &tools,
            max_tokens: 64,
        });
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        assert_eq!(
            body["tools"][0]["function"]["parameters"],
            json!({"type": "object"})
        );
        let m = body["messages"].as_array().unwrap();
        assert_eq!(m[0], json!({"role": "system", "content": "sys"}));
        assert_eq!(m[2]["content"], Value::Null);
        assert_eq!(
            m[2]["tool_calls"][0]["function"]["arguments"],
            r#"{"file":"x"}"#
        );
        assert_eq!(
            m[3],
            json!({"role": "tool", "tool_call_id": "c1", "content": "{}"})
        );
        assert_eq!(m[4], json!({"role": "user", "content": "stop now"}));
    }
}
