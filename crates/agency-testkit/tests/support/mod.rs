//! Helpers shared by the integration tests: starting a server from JSON,
//! posting requests, and parsing both APIs' event streams the way a client
//! would.

#![allow(dead_code)] // each test binary uses a different subset

use agency_testkit::{ModelServer, Script};
use serde_json::{Value, json};

pub async fn start(script: &str) -> ModelServer {
    let script = Script::from_json(script).expect("test script should load");
    ModelServer::start(script)
        .await
        .expect("server should start")
}

pub struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub text: String,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("body is not JSON ({e}): {}", self.text))
    }

    pub fn content_type(&self) -> &str {
        self.headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

pub async fn post(server: &ModelServer, path: &str, body: &Value) -> Answer {
    let response = reqwest::Client::new()
        .post(format!("{}{path}", server.base_url()))
        .header("x-api-key", "anything")
        .json(body)
        .send()
        .await
        .expect("request should reach the server");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let text = response.text().await.expect("body should be readable");
    Answer {
        status,
        headers,
        text,
    }
}

/// A Messages API request with the given system prompt and messages.
pub fn anthropic(system: &str, messages: Value, stream: bool) -> Value {
    json!({
        "model": "claude-test",
        "max_tokens": 1024,
        "system": system,
        "messages": messages,
        "tools": [
            {"name": "mail_inbox", "description": "d", "input_schema": {"type": "object"}},
            {"name": "outcome_create", "description": "d", "input_schema": {"type": "object"}},
        ],
        "stream": stream,
    })
}

/// A chat-completions request with the given system prompt and messages.
pub fn openai(system: &str, mut messages: Vec<Value>, stream: bool) -> Value {
    messages.insert(0, json!({"role": "system", "content": system}));
    json!({
        "model": "local-test",
        "messages": messages,
        "tools": [
            {"type": "function", "function": {"name": "mail_inbox", "description": "d", "parameters": {"type": "object"}}},
        ],
        "stream": stream,
    })
}

/// Parses an Anthropic event stream into (event name, data) pairs, checking
/// every event has exactly the `event:` and `data:` lines and that the
/// data's `type` repeats the event name.
pub fn anthropic_events(text: &str) -> Vec<(String, Value)> {
    assert!(
        text.ends_with("\n\n"),
        "stream should end with a blank line"
    );
    text.split("\n\n")
        .filter(|chunk| !chunk.is_empty())
        .map(|chunk| {
            let lines: Vec<&str> = chunk.lines().collect();
            assert_eq!(lines.len(), 2, "event should be two lines: {chunk:?}");
            let name = lines[0]
                .strip_prefix("event: ")
                .unwrap_or_else(|| panic!("no event line: {chunk:?}"));
            let data: Value = serde_json::from_str(
                lines[1]
                    .strip_prefix("data: ")
                    .unwrap_or_else(|| panic!("no data line: {chunk:?}")),
            )
            .expect("data should be JSON");
            assert_eq!(data["type"], name, "type should match event name");
            (name.to_owned(), data)
        })
        .collect()
}

/// A streamed Anthropic message reassembled as a client would: the blocks
/// (text concatenated, tool input JSON parsed from its pieces) and the
/// stop reason.
pub struct Assembled {
    pub blocks: Vec<Value>,
    pub stop_reason: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub json_pieces: Vec<usize>,
}

pub fn assemble_anthropic(events: &[(String, Value)]) -> Assembled {
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"message_start"), "{names:?}");
    assert_eq!(names.last(), Some(&"message_stop"), "{names:?}");
    assert_eq!(names[names.len() - 2], "message_delta", "{names:?}");
    let mut blocks: Vec<Value> = Vec::new();
    let mut partial = String::new();
    let mut json_pieces = Vec::new();
    let mut open: Option<usize> = None;
    let mut pieces = 0;
    for (name, data) in &events[1..events.len() - 2] {
        let index = data["index"].as_u64().expect("index") as usize;
        match name.as_str() {
            "content_block_start" => {
                assert_eq!(open, None, "a block is already open");
                assert_eq!(index, blocks.len(), "blocks are numbered in order");
                open = Some(index);
                blocks.push(data["content_block"].clone());
                partial.clear();
                pieces = 0;
            }
            "content_block_delta" => {
                assert_eq!(open, Some(index));
                let delta = &data["delta"];
                match delta["type"].as_str() {
                    Some("text_delta") => {
                        let text = blocks[index]["text"].as_str().unwrap_or("").to_owned()
                            + delta["text"].as_str().expect("text");
                        blocks[index]["text"] = json!(text);
                    }
                    Some("input_json_delta") => {
                        partial.push_str(delta["partial_json"].as_str().expect("partial_json"));
                        pieces += 1;
                    }
                    other => panic!("unexpected delta {other:?}"),
                }
            }
            "content_block_stop" => {
                assert_eq!(open, Some(index));
                open = None;
                if blocks[index]["type"] == "tool_use" {
                    blocks[index]["input"] =
                        serde_json::from_str(&partial).expect("tool input should reassemble");
                    json_pieces.push(pieces);
                }
            }
            other => panic!("unexpected event {other}"),
        }
    }
    assert_eq!(open, None, "every block is closed");
    let start = &events[0].1["message"];
    let delta = &events[events.len() - 2].1;
    Assembled {
        blocks,
        stop_reason: delta["delta"]["stop_reason"]
            .as_str()
            .expect("stop_reason")
            .to_owned(),
        input_tokens: start["usage"]["input_tokens"].as_u64().expect("input"),
        output_tokens: delta["usage"]["output_tokens"].as_u64().expect("output"),
        json_pieces,
    }
}

/// Parses an OpenAI stream into its chunks; asserts it ends in `[DONE]`.
pub fn openai_chunks(text: &str) -> Vec<Value> {
    let datas: Vec<&str> = text
        .split("\n\n")
        .filter(|c| !c.is_empty())
        .map(|c| c.strip_prefix("data: ").expect("data line"))
        .collect();
    assert_eq!(datas.last(), Some(&"[DONE]"));
    datas[..datas.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).expect("chunk should be JSON"))
        .collect()
}
