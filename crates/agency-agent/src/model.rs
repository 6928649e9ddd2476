//! The conversation as the loop sees it, independent of the wire format:
//! messages, tool specifications, tool calls and the model's reply. The
//! `anthropic` and `openai` modules translate to and from their APIs.

use serde_json::Value;

/// A tool offered to the model (from the MCP server's tool list).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolSpec {
    pub name: String,
    pub description: String,
    /// A JSON Schema object.
    pub input_schema: Value,
}

/// One tool call in a model answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolCall {
    /// The API's call id (synthesised when a server sends none).
    pub id: String,
    pub name: String,
    /// The arguments as the model wrote them, kept verbatim to echo back
    /// in the history (OpenAI carries them as a string).
    pub raw_arguments: String,
    /// The parsed arguments: always a JSON object (`{}` when the model's
    /// text was not one, with `invalid` saying why).
    pub input: Value,
    /// Why the arguments could not be used; the call is then not made and
    /// the model gets this as an error result instead.
    pub invalid: Option<String>,
}

impl ToolCall {
    /// Build a call from the model's argument text. An empty text means no
    /// arguments (some servers send nothing for argument-less calls).
    pub fn parse(id: String, name: String, raw_arguments: String) -> ToolCall {
        let (input, invalid) = if raw_arguments.trim().is_empty() {
            (Value::Object(Default::default()), None)
        } else {
            match serde_json::from_str::<Value>(&raw_arguments) {
                Ok(v @ Value::Object(_)) => (v, None),
                Ok(_) => (
                    Value::Object(Default::default()),
                    Some("the arguments are not a JSON object".to_owned()),
                ),
                Err(e) => (
                    Value::Object(Default::default()),
                    Some(format!("the arguments are not valid JSON ({e})")),
                ),
            }
        };
        ToolCall {
            id,
            name,
            raw_arguments,
            input,
            invalid,
        }
    }
}

/// The result of one tool call, as sent back to the model.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolResult {
    pub call_id: String,
    pub content: String,
    pub is_error: bool,
}

/// One entry of the conversation history (the system prompt is separate).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Message {
    User(String),
    Assistant {
        text: String,
        tool_calls: Vec<ToolCall>,
    },
    /// The results of the previous answer's tool calls, optionally followed
    /// by a user text (the limit notice) in the same turn: Anthropic wants
    /// user and assistant turns to alternate.
    ToolResults {
        results: Vec<ToolResult>,
        then: Option<String>,
    },
}

/// Token counts of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The server reported none, so these are estimates (bytes / 4): the
    /// token budget must still move.
    pub estimated: bool,
}

/// A complete model answer.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Reply {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    /// `end_turn`, `tool_use`, `stop`, `tool_calls`, `max_tokens`, `length`…
    pub stop_reason: Option<String>,
    /// What the server reported, if anything.
    pub usage: Option<Usage>,
}

/// What an API module needs to build a request body.
#[derive(Debug)]
pub(crate) struct Request<'a> {
    pub model: &'a str,
    pub system: &'a str,
    pub messages: &'a [Message],
    pub tools: &'a [ToolSpec],
    pub max_tokens: u32,
}

/// A JSON value's unsigned integer, leniently: servers send counts as
/// numbers, floats or strings, or not at all.
pub(crate) fn lenient_u64(v: Option<&Value>) -> Option<u64> {
    match v? {
        Value::Number(n) => n
            .as_u64()
            .or_else(|| n.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A JSON value's string, leniently: `null` and missing are `None`.
pub(crate) fn lenient_str(v: Option<&Value>) -> Option<&str> {
    v.and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn tool_call_arguments_are_parsed_leniently() {
        let c = ToolCall::parse("1".into(), "t".into(), String::new());
        assert_eq!((c.input, c.invalid), (json!({}), None));
        let c = ToolCall::parse("1".into(), "t".into(), r#"{"a":1}"#.into());
        assert_eq!((c.input, c.invalid), (json!({"a": 1}), None));
        let c = ToolCall::parse("1".into(), "t".into(), "[1]".into());
        assert!(c.invalid.unwrap().contains("not a JSON object"));
        let c = ToolCall::parse("1".into(), "t".into(), r#"{"a":"#.into());
        assert!(c.invalid.unwrap().contains("not valid JSON"));
        assert_eq!(c.raw_arguments, r#"{"a":"#);
    }

    #[test]
    fn lenient_numbers() {
        assert_eq!(lenient_u64(Some(&json!(3))), Some(3));
        assert_eq!(lenient_u64(Some(&json!(3.0))), Some(3));
        assert_eq!(lenient_u64(Some(&json!("7"))), Some(7));
        assert_eq!(lenient_u64(Some(&json!(null))), None);
        assert_eq!(lenient_u64(Some(&json!(-1))), None);
        assert_eq!(lenient_u64(None), None);
    }
}
