//! A structured call as an Anthropic Messages API body. Constrained: the
//! schema goes in `output_config.format` (`{"type": "json_schema",
//! "schema": …}`, structured outputs) and the answer's text is the JSON.
//! The schema is reduced to what structured outputs accept (`constrain`).
//! Unconstrained: a plain request; the system prompt (built by the
//! ladder) asks for JSON only and carries the schema.

use serde::Deserialize;
use serde_json::{Value, json};

use super::WireApi;
use super::constrain::constraint;
use crate::client::{ModelAnswer, Role, StructuredRequest};

/// The request body for the model id `model`.
pub fn body(req: &StructuredRequest, model: &str) -> Value {
    let messages: Vec<Value> = req
        .messages
        .iter()
        .map(|m| {
            json!({
                "role": match m.role { Role::User => "user", Role::Assistant => "assistant" },
                "content": m.content,
            })
        })
        .collect();
    let mut body = json!({
        "model": model,
        "max_tokens": req.max_output_tokens,
        "messages": messages,
    });
    if !req.system.is_empty() {
        body["system"] = Value::from(req.system.as_str());
    }
    if req.constrained {
        body["output_config"] = json!({
            "format": {
                "type": "json_schema",
                "schema": constraint(WireApi::Anthropic, &req.schema),
            }
        });
    }
    body
}

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    content: Vec<Block>,
    #[serde(default)]
    usage: Usage,
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
struct Block {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: String,
}

#[derive(Deserialize, Default)]
struct Usage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    cache_creation_input_tokens: u64,
    #[serde(default)]
    cache_read_input_tokens: u64,
}

/// Read a (non-streamed) Messages API answer: its text blocks joined.
pub fn parse(body: &[u8]) -> Result<ModelAnswer, String> {
    let a: Answer = serde_json::from_slice(body)
        .map_err(|e| format!("failed to read the Messages API answer: {e}"))?;
    let text = a
        .content
        .iter()
        .filter(|b| b.kind == "text")
        .map(|b| b.text.as_str())
        .collect::<String>();
    Ok(ModelAnswer {
        text,
        // Cached input is input the call was billed for too.
        input_tokens: a.usage.input_tokens
            + a.usage.cache_creation_input_tokens
            + a.usage.cache_read_input_tokens,
        output_tokens: a.usage.output_tokens,
        stop_reason: a.stop_reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ladder::tests::request;

    #[test]
    fn constrained_body() {
        insta::assert_json_snapshot!(body(&request(true), "claude-x"), @r#"
        {
          "max_tokens": 1024,
          "messages": [
            {
              "content": "Classify: build a CLI",
              "role": "user"
            },
            {
              "content": "{\"domain\": 1}",
              "role": "assistant"
            },
            {
              "content": "Fix it.",
              "role": "user"
            }
          ],
          "model": "claude-x",
          "output_config": {
            "format": {
              "schema": {
                "additionalProperties": false,
                "properties": {
                  "domain": {
                    "type": "string"
                  }
                },
                "required": [
                  "domain"
                ],
                "type": "object"
              },
              "type": "json_schema"
            }
          },
          "system": "You are the Observer."
        }
    "#);
    }

    #[test]
    fn unconstrained_body() {
        insta::assert_json_snapshot!(body(&request(false), "claude-x"), @r#"
        {
          "max_tokens": 1024,
          "messages": [
            {
              "content": "Classify: build a CLI",
              "role": "user"
            },
            {
              "content": "{\"domain\": 1}",
              "role": "assistant"
            },
            {
              "content": "Fix it.",
              "role": "user"
            }
          ],
          "model": "claude-x",
          "system": "You are the Observer."
        }
    "#);
    }

    #[test]
    fn parses_answers() {
        let a = parse(br#"{"content":[{"type":"thinking","thinking":"hm"},{"type":"text","text":"{\"a\":"},{"type":"text","text":"1}"}],"usage":{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":2},"stop_reason":"end_turn"}"#).expect("parses");
        assert_eq!(a.text, "{\"a\":1}");
        assert_eq!((a.input_tokens, a.output_tokens), (12, 5));
        assert_eq!(a.stop_reason.as_deref(), Some("end_turn"));
        assert!(parse(b"not json").is_err());
        assert!(parse(br#"{"content": 3}"#).is_err());
    }
}
