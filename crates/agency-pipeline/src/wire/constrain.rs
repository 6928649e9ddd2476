//! The schema sent as a constraint: the stage's output schema reduced to
//! what the provider's constrained decoding accepts. An upstream refuses
//! a request whose schema uses a keyword it does not support (Anthropic:
//! numeric, string-length and most array bounds; OpenAI strict: string
//! lengths, optional properties, open objects).
//!
//! Safe by construction: the full schema is still what the answer is
//! validated against, after the call. So the reduction may only drop
//! keywords (looser: validation catches what the decoder let through) or
//! add ones every valid answer can meet (`additionalProperties: false`,
//! every property required: an answer with all declared fields and no
//! others is still valid when each field's value is).

use serde_json::{Map, Value};

use super::WireApi;

/// Keywords neither API's constrained decoding takes.
const DROPPED_ALWAYS: &[&str] = &["$schema", "$id", "minLength", "maxLength", "uniqueItems"];

/// Keywords Anthropic's structured outputs do not take.
const DROPPED_ANTHROPIC: &[&str] = &[
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "maxItems",
    "minProperties",
    "maxProperties",
];

/// Subschema-valued keywords holding a map of schemas.
const SCHEMA_MAPS: &[&str] = &["properties", "$defs", "definitions", "patternProperties"];

/// Subschema-valued keywords holding a list of schemas.
const SCHEMA_LISTS: &[&str] = &["anyOf", "allOf", "oneOf", "prefixItems"];

/// `schema` as the constraint of a call to `api`.
pub fn constraint(api: WireApi, schema: &Value) -> Value {
    let mut s = schema.clone();
    reduce(api, &mut s);
    s
}

fn reduce(api: WireApi, schema: &mut Value) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    for k in DROPPED_ALWAYS {
        obj.remove(*k);
    }
    if api == WireApi::Anthropic {
        for k in DROPPED_ANTHROPIC {
            obj.remove(*k);
        }
        // Only 0 and 1 are accepted.
        if obj
            .get("minItems")
            .and_then(Value::as_u64)
            .is_some_and(|n| n > 1)
        {
            obj.insert("minItems".into(), Value::from(1));
        }
    }
    // Neither decodes `oneOf`; `anyOf` is looser and supported.
    if let Some(one) = obj.remove("oneOf") {
        obj.entry("anyOf").or_insert(one);
    }
    for k in SCHEMA_MAPS {
        if let Some(Value::Object(m)) = obj.get_mut(*k) {
            m.values_mut().for_each(|v| reduce(api, v));
        }
    }
    for k in SCHEMA_LISTS {
        if let Some(Value::Array(a)) = obj.get_mut(*k) {
            a.iter_mut().for_each(|v| reduce(api, v));
        }
    }
    if let Some(items) = obj.get_mut("items") {
        reduce(api, items);
    }
    if is_object_schema(obj) {
        // Both require closed objects.
        obj.insert("additionalProperties".into(), Value::Bool(false));
        if api == WireApi::OpenAi {
            // Strict mode: every property required.
            let names: Vec<Value> = obj
                .get("properties")
                .and_then(Value::as_object)
                .map(|p| p.keys().cloned().map(Value::from).collect())
                .unwrap_or_default();
            obj.insert("required".into(), Value::Array(names));
        }
    }
}

fn is_object_schema(obj: &Map<String, Value>) -> bool {
    match obj.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        _ => obj.contains_key("properties"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::OutputContract;
    use crate::validate::tests::stage;
    use serde_json::json;

    fn scorecard() -> Value {
        json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "required": ["totalScore", "tasks"],
            "properties": {
                "totalScore": {"type": "integer", "minimum": 0, "maximum": 25},
                "note": {"type": "string", "minLength": 1},
                "tasks": {"type": "array", "minItems": 3, "items": {
                    "type": "object",
                    "properties": {"id": {"type": "string"}},
                    "additionalProperties": true
                }},
                "kind": {"oneOf": [{"const": "a"}, {"const": "b"}]}
            }
        })
    }

    #[test]
    fn anthropic_constraint() {
        let c = constraint(WireApi::Anthropic, &scorecard());
        assert_eq!(c.get("$schema"), None);
        assert_eq!(c["additionalProperties"], json!(false));
        assert_eq!(c["required"], json!(["totalScore", "tasks"]));
        assert_eq!(c["properties"]["totalScore"], json!({"type": "integer"}));
        assert_eq!(c["properties"]["note"], json!({"type": "string"}));
        assert_eq!(c["properties"]["tasks"]["minItems"], json!(1));
        assert_eq!(
            c["properties"]["tasks"]["items"]["additionalProperties"],
            json!(false)
        );
        assert_eq!(
            c["properties"]["kind"],
            json!({"anyOf": [{"const": "a"}, {"const": "b"}]})
        );
    }

    #[test]
    fn openai_constraint() {
        let c = constraint(WireApi::OpenAi, &scorecard());
        assert_eq!(
            c["required"],
            json!(["kind", "note", "tasks", "totalScore"])
        );
        assert_eq!(c["properties"]["totalScore"]["maximum"], json!(25));
        assert_eq!(c["properties"]["tasks"]["minItems"], json!(3));
        assert_eq!(c["properties"]["tasks"]["items"]["required"], json!(["id"]));
    }

    #[test]
    fn an_answer_meeting_the_constraint_is_judged_by_the_full_schema() {
        // The reduction never makes a valid answer invalid: an answer
        // with all declared fields is checked against the original.
        let contract =
            OutputContract::compile(&stage(scorecard(), vec![], vec![])).expect("compiles");
        let full = json!({"totalScore": 3, "note": "n", "kind": "a", "tasks": [{"id": "1"}, {"id": "2"}, {"id": "3"}]});
        assert!(contract.validate(&full).is_ok());
        // What the looser Anthropic constraint lets through is caught.
        let loose = json!({"totalScore": 99, "note": "", "kind": "a", "tasks": [{"id": "1"}]});
        let issues = contract
            .validate(&loose)
            .expect_err("caught after the call");
        let keywords: Vec<&str> = issues.items.iter().map(|i| i.keyword.as_str()).collect();
        assert!(
            keywords.contains(&"maximum")
                && keywords.contains(&"minItems")
                && keywords.contains(&"minLength")
        );
    }
}
