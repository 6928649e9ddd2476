//! A structured call as an OpenAI chat completions body. Constrained:
//! `response_format: {type: "json_schema", json_schema: {name, schema,
//! strict: true}}`, the schema reduced to what strict mode accepts
//! (`constrain`). Unconstrained: a plain request; the system prompt
//! (built by the ladder) asks for JSON only and carries the schema.

use serde::Deserialize;
use serde_json::{Value, json};

use super::WireApi;
use super::constrain::constraint;
use crate::client::{ModelAnswer, Role, StructuredRequest};

/// The request body for the model id `model`.
pub fn body(req: &StructuredRequest, model: &str) -> Value {
    let mut messages = Vec::with_capacity(req.messages.len() + 1);
    if !req.system.is_empty() {
        messages.push(json!({"role": "system", "content": req.system}));
    }
    messages.extend(req.messages.iter().map(|m| {
        json!({
            "role": match m.role { Role::User => "user", Role::Assistant => "assistant" },
            "content": m.content,
        })
    }));
    let mut body = json!({
        "model": model,
        "max_completion_tokens": req.max_output_tokens,
        "messages": messages,
    });
    if req.constrained {
        body["response_format"] = json!({
            "type": "json_schema",
            "json_schema": {
                "name": req.schema_name,
                "schema": constraint(WireApi::OpenAi, &req.schema),
                "strict": true,
            }
        });
    }
    body
}

#[derive(Deserialize)]
struct Answer {
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Usage,
}

#[derive(Deserialize)]
struct Choice {
    message: Msg,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Msg {
    #[serde(default)]
    content: Option<String>,
    /// Set, with no content, when the model refused under structured
    /// outputs.
    #[serde(default)]
    refusal: Option<String>,
}

#[derive(Deserialize, Default)]
struct Usage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

/// Read a (non-streamed) chat completion: the first choice's content.
pub fn parse(body: &[u8]) -> Result<ModelAnswer, String> {
    let a: Answer = serde_json::from_slice(body)
        .map_err(|e| format!("failed to read the chat completion: {e}"))?;
    let Some(choice) = a.choices.into_iter().next() else {
        return Err("failed to read the chat completion: it has no choices".to_owned());
    };
    let (text, stop_reason) = match (choice.message.content, choice.message.refusal) {
        (Some(c), _) => (c, choice.finish_reason),
        // A refusal is an answer that will not validate: kept for diagnosis.
        (None, Some(r)) => (r, Some("refusal".to_owned())),
        (None, None) => (String::new(), choice.finish_reason),
    };
    Ok(ModelAnswer {
        text,
        input_tokens: a.usage.prompt_tokens,
        output_tokens: a.usage.completion_tokens,
        stop_reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ladder::tests::request;

    #[test]
    fn constrained_body() {
        insta::assert_json_snapshot!(body(&request(true), "gpt-x"), @r#"
        {
          "max_completion_tokens": 1024,
          "messages": [
            {
              "content": "You are the Observer.",
              "role": "system"
            },
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
          "model": "gpt-x",
          "response_format": {
            "json_schema": {
              "name": "Observer",
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
              "strict": true
            },
            "type": "json_schema"
          }
        }
    "#);
    }

    #[test]
    fn unconstrained_body() {
        insta::assert_json_snapshot!(body(&request(false), "gpt-x"), @r#"
        {
          "max_completion_tokens": 1024,
          "messages": [
            {
              "content": "You are the Observer.",
              "role": "system"
            },
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
          "model": "gpt-x"
        }
    "#);
    }

    #[test]
    fn parses_answers() {
        let a = parse(br#"{"choices":[{"message":{"role":"assistant","content":"{}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":3}}"#).expect("parses");
        assert_eq!(
            (a.text.as_str(), a.input_tokens, a.output_tokens),
            ("{}", 7, 3)
        );
        assert_eq!(a.stop_reason.as_deref(), Some("stop"));
        let r = parse(
            br#"{"choices":[{"message":{"content":null,"refusal":"no"},"finish_reason":"stop"}]}"#,
        )
        .expect("parses");
        assert_eq!(
            (r.text.as_str(), r.stop_reason.as_deref()),
            ("no", Some("refusal"))
        );
        assert!(parse(br#"{"choices":[]}"#).is_err());
        assert!(parse(b"<html>").is_err());
    }
}
