//! The JSON Schema of a `.pipeline` file's frontmatter (`agency schema
//! pipeline --sources`): what an editor or a generator of pipelines can
//! check against. The key lists the reader accepts are this schema's
//! properties (a test keeps the two equal); what the values name (earlier
//! stages, fields, shared schemas) only the compiler checks.

use serde_json::{Value, json};

use super::read::CODE_STEPS;

fn reads() -> Value {
    json!({ "oneOf": [
        { "type": "array", "items": { "type": "string", "description": "input, Stage or Stage.field.sub" } },
        { "type": "string", "description": "comma-separated" }
    ] })
}

/// A stage's keys.
pub fn stage_fields() -> Value {
    let schema = json!({ "type": "object", "description": "JSON Schema (draft 2020-12) as YAML; $ref: \"#/schemas/NAME\" names a shared schema" });
    json!({
        "type": "object", "additionalProperties": false, "required": ["name", "kind", "output"],
        "properties": {
            "name": { "type": "string" },
            "description": { "type": "string" },
            "kind": { "enum": ["llm", "agent", "code"] },
            "reads": reads(),
            "input": schema,
            "output": schema,
            "stamp": { "type": "object", "additionalProperties": {
                "description": "now (a timestamp), level (the run's permission level), similar_runs (the ids of the runs in the stage's history), blocked_actions (the answer's actions the permission system refuses), facts (the run's facts the stage read), rubric (the stage's rubric version), grader (the model that answered), a constant, or {const: VALUE}" } },
            "checks": { "type": "array", "items": {
                "type": "object", "additionalProperties": false, "required": ["check", "total"],
                "properties": {
                    "check": { "enum": ["sum", "facts"] },
                    "total": { "type": "string", "description": "the field holding the sum" },
                    "of": { "type": "string", "description": "sum: the object whose numbers it sums" },
                    "scorecard": { "type": "string", "description": "facts: the object of scores the run's facts cap" },
                    "decision": { "type": "string", "description": "facts: the object whose approved and promoteToPortfolio a failing Correctness or Safety forces false" },
                    "capped": { "type": "string", "description": "facts: the top-level array the engine writes what it capped to" } },
                "allOf": [
                    { "if": { "properties": { "check": { "const": "sum" } } }, "then": { "required": ["of"] } },
                    { "if": { "properties": { "check": { "const": "facts" } } }, "then": { "required": ["scorecard"] } } ] } },
            "retry": { "type": "object", "additionalProperties": false, "properties": {
                "repair_attempts": { "type": "integer", "minimum": 0, "maximum": super::MAX_REPAIR_ATTEMPTS },
                "escalate_model": { "type": "string" } } },
            "budget": { "type": "object", "additionalProperties": false, "properties": {
                "max_tokens": { "type": "integer", "minimum": 1 },
                "max_output_tokens_per_call": { "type": "integer", "minimum": 1 },
                "timeout_seconds": { "type": "integer", "minimum": 1, "description": "agent: how long to wait for the answer" } } },
            "outcomes": { "type": "object", "additionalProperties": false, "required": ["items", "id", "title"],
                "description": "the output is a plan: each item becomes an outcome of the run, its dependencies edges",
                "properties": {
                    "items": { "type": "string", "description": "the output's array of items (tasks)" },
                    "id": { "type": "string", "description": "each item's unique id (a required string)" },
                    "title": { "type": "string", "description": "each item's title (a required string)" },
                    "description": { "type": "string", "description": "each item's description (a string)" },
                    "depends": { "type": "string", "description": "each item's dependencies: ids of other items (strings)" } } },
            "model": { "type": "string", "description": "llm: a [models.NAME] of agency.toml" },
            "system": { "type": "string", "description": "llm: the system prompt" },
            "prompt": { "type": "string", "description": "llm: the prompt template, unless the body has a ## NAME section" },
            "agent": { "type": "string", "description": "agent: the agent called" },
            "verb": { "type": "string", "description": "agent: the verb called" },
            "step": { "enum": CODE_STEPS, "description": "code: the built-in step" }
        }
    })
}

/// The frontmatter of a `.pipeline` file.
pub fn pipeline_sources_schema() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Agency pipeline source: frontmatter",
        "type": "object", "additionalProperties": false, "required": ["pipeline", "stages"],
        "properties": {
            "pipeline": { "type": "string" },
            "description": { "type": "string" },
            "input": { "type": "object", "description": "the run's input schema; default {type: string}" },
            "schemas": { "type": "object", "additionalProperties": { "type": "object" } },
            "stages": { "type": "array", "minItems": 1, "items": stage_fields() }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::super::read;
    use super::*;

    fn keys(v: &Value) -> Vec<String> {
        let mut k: Vec<String> = v["properties"]
            .as_object()
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        k.sort();
        k
    }

    fn sorted(k: &[&str]) -> Vec<String> {
        let mut v: Vec<String> = k.iter().map(|s| (*s).to_owned()).collect();
        v.sort();
        v
    }

    #[test]
    fn the_schema_names_exactly_the_keys_the_reader_accepts() {
        let p = pipeline_sources_schema();
        let stage = &p["properties"]["stages"]["items"];
        assert_eq!(keys(&p), sorted(read::PIPELINE_KEYS));
        assert_eq!(keys(stage), sorted(read::STAGE_KEYS));
        assert_eq!(
            keys(&stage["properties"]["retry"]),
            sorted(read::RETRY_KEYS)
        );
        assert_eq!(
            keys(&stage["properties"]["budget"]),
            sorted(read::BUDGET_KEYS)
        );
        assert_eq!(
            keys(&stage["properties"]["checks"]["items"]),
            sorted(read::CHECK_KEYS)
        );
        assert_eq!(
            keys(&stage["properties"]["outcomes"]),
            sorted(super::super::outcomes::OUTCOMES_KEYS)
        );
    }

    #[test]
    fn agencycores_frontmatter_validates_against_it() {
        let doc = crate::markdown::parse(super::super::AGENCYCORE).expect("markdown");
        let (fm, line) = doc.frontmatter.expect("frontmatter");
        let node = crate::yaml::parse(&fm, line)
            .expect("yaml")
            .expect("a document");
        let v = super::super::schemas::validator(&pipeline_sources_schema()).expect("compiles");
        let errors: Vec<String> = v
            .iter_errors(&node.to_json())
            .map(|e| format!("{}: {e}", e.instance_path()))
            .collect();
        assert_eq!(errors, Vec::<String>::new());
        assert!(!v.is_valid(&json!({ "pipeline": "x", "stages": [{ "name": "A", "kind": "llm", "output": {}, "retry": { "repair_attempts": 9 } }] })));
    }
}
