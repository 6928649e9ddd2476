//! Fuzzing of the model server's request path: whatever body a client
//! posts (shaped like an Anthropic or OpenAI request, or any JSON at all)
//! is parsed into a conversation, matched against a script with templates,
//! and rendered as a reply and as stream events, without a panic.

use proptest::prelude::*;
use serde_json::{Value, json};

use crate::engine::{Engine, Outcome};
use crate::script::Script;
use crate::{anthropic, openai};

/// A script whose answers fill placeholders from the system prompt and
/// from earlier tool results, and that fails some turns on purpose.
const SCRIPT: &str = r#"{
  "scenarios": [
    {
      "name": "root",
      "match": { "system_contains": "Outcome" },
      "turns": [
        { "tool_calls": [ { "name": "outcome_create", "input": { "title": "t", "parents": ["{{system:Outcome ([0-9a-f-]{36})}}"] } } ] },
        { "tool_calls": [ { "name": "delegate", "input": { "outcome": "{{result:/outcome}}" } } ] },
        { "error": { "status": 529, "message": "overloaded", "times": 1 } },
        { "text": "done {{result:/missing/pointer}}" }
      ]
    }
  ],
  "fallback": { "text": "nothing scripted" }
}"#;

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("Outcome 123e4567-e89b-12d3-a456-426614174000".to_owned()),
        Just(r#"{"outcome":"123e4567-e89b-12d3-a456-426614174000"}"#.to_owned()),
        Just("{{result:/outcome}}".to_owned()),
        "\\PC{0,30}",
    ]
}

fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z_]{1,10}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A content block of either API, sometimes malformed.
fn block() -> impl Strategy<Value = Value> {
    prop_oneof![
        text().prop_map(|t| json!({"type": "text", "text": t})),
        (text(), any_json()).prop_map(|(n, i)| json!({"type": "tool_use", "id": "t1", "name": n, "input": i})),
        text().prop_map(|t| json!({"type": "tool_result", "tool_use_id": "t1", "content": t})),
        text().prop_map(|t| json!({"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": t}]})),
        any_json(),
    ]
}

fn message() -> impl Strategy<Value = Value> {
    let role = prop_oneof![
        Just("user"),
        Just("assistant"),
        Just("system"),
        Just("tool"),
        Just("robot")
    ];
    let content = prop_oneof![
        text().prop_map(Value::String),
        proptest::collection::vec(block(), 0..3).prop_map(Value::Array),
        Just(Value::Null),
        any_json(),
    ];
    let calls = proptest::option::of(proptest::collection::vec(
        (text(), any_json()).prop_map(|(n, a)| {
            json!({"id": "c1", "type": "function", "function": {"name": n, "arguments": a.to_string()}})
        }),
        0..2,
    ));
    (role, content, calls).prop_map(|(role, content, calls)| {
        let mut m = json!({"role": role, "content": content, "tool_call_id": "c1"});
        if let Some(c) = calls {
            m["tool_calls"] = Value::Array(c);
        }
        m
    })
}

fn request() -> impl Strategy<Value = Value> {
    let system = prop_oneof![
        text().prop_map(Value::String),
        proptest::collection::vec(block(), 0..2).prop_map(Value::Array),
        any_json(),
    ];
    prop_oneof![
        4 => (
            proptest::option::of(system),
            proptest::collection::vec(message(), 0..6),
            any::<bool>()
        )
            .prop_map(|(system, messages, stream)| {
                let mut r = json!({"model": "m", "max_tokens": 100, "messages": messages, "stream": stream,
                    "tools": [{"name": "kb_read", "input_schema": {"type": "object"}}]});
                if let Some(s) = system {
                    r["system"] = s;
                }
                r
            }),
        1 => any_json(),
    ]
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(512)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn any_request_body_is_answered_or_refused_without_panic(body in request()) {
        let engine = Engine::new(Script::from_json(SCRIPT).unwrap());
        for conv in [anthropic::conversation(&body), openai::conversation(&body)]
            .into_iter()
            .flatten()
        {
            // Twice: the second answer of an error turn differs.
            for _ in 0..2 {
                match engine.decide(&conv).outcome {
                    Outcome::Reply(reply) => {
                        let _ = anthropic::message(&reply, "m");
                        let _ = anthropic::events(&reply, "m");
                        let _ = openai::completion(&reply, "m");
                        let _ = openai::chunks(&reply, "m", true);
                    }
                    Outcome::Fail(f) => {
                        let _ = anthropic::error_body(&f);
                        let _ = openai::error_body(&f);
                    }
                }
            }
        }
    }
}
