//! JSON Schemas: the Agency Model's (derived with schemars) and the
//! sources' frontmatter (`agency schema --sources`), which is also what an
//! `--assist` answer must satisfy. The key lists the readers accept are the
//! schema's properties (a test keeps the two equal).

use serde_json::{Value, json};

use crate::model::AgencyModel;

/// The Agency Model's JSON Schema.
pub fn model_schema() -> Value {
    serde_json::to_value(schemars::schema_for!(AgencyModel)).unwrap_or(Value::Null)
}

fn strings() -> Value {
    json!({ "oneOf": [ { "type": "array", "items": { "type": "string" } }, { "type": "string", "description": "comma-separated" } ] })
}

fn lines() -> Value {
    json!({ "oneOf": [ { "type": "array", "items": { "type": "string" } }, { "type": "string" } ] })
}

fn budget() -> Value {
    let n = json!({ "type": "integer", "minimum": 0 });
    json!({
        "type": "object", "additionalProperties": false,
        "properties": {
            "usd": { "type": "number", "minimum": 0 }, "tokens": n, "calls": n, "tool_calls": n,
            "spawns": n, "live_agents": n, "handlers": n, "depth": n,
            "wall_clock": { "type": "string", "description": "a duration such as 1h30m" }
        }
    })
}

/// Agency's keys of an agent (under `agency:` in an `.agent` file).
pub fn agent_fields() -> Value {
    json!({
        "type": "object", "additionalProperties": false,
        "properties": {
            "title": { "type": "string" },
            "inherits": strings(),
            "runtime": { "enum": ["builtin", "claude-code", "command"] },
            "model": { "type": "string", "description": "a [models.NAME] of agency.toml" },
            "capabilities": strings(),
            "budget": budget(),
            "connections": strings(),
            "memory": { "type": "object", "additionalProperties": false, "properties": {
                "guidance": lines(), "keep_warm": { "type": "string" } } },
            "tools": strings(),
            "tools_add": strings(),
            "replace": { "type": "array", "items": { "enum": crate::agent::REPLACEABLE } },
            "static_memory": lines(),
            "behavior": lines(),
            "verbs": { "type": "array", "items": { "type": "object", "additionalProperties": false,
                "required": ["name", "input", "output"],
                "properties": {
                    "name": { "type": "string", "pattern": "^[a-z][a-z0-9_]*$", "maxLength": 64 },
                    "description": { "type": "string" },
                    "input": { "type": ["object", "boolean"], "description": "JSON Schema 2020-12 of the call's input" },
                    "output": { "type": ["object", "boolean"], "description": "JSON Schema 2020-12 of the answer" } } } }
        }
    })
}

/// The frontmatter keys of an `.agency` file.
pub fn agency_fields() -> Value {
    json!({
        "type": "object", "additionalProperties": false,
        "properties": {
            "name": { "type": "string" }, "description": { "type": "string" },
            "executive": { "type": "string" }, "budget": budget(),
            "static_memory": strings(), "agents": strings(), "tools": strings(),
            "sub_agencies": strings(),
            "connections": { "type": "array", "items": { "type": "string", "description": "A -> B" } }
        }
    })
}

/// The frontmatter keys of a `.tool` file.
pub fn tool_fields() -> Value {
    let format = json!({ "type": "object", "additionalProperties": { "type": "string",
        "description": "string, number, integer, boolean, object or array; a trailing ? marks it optional" } });
    json!({
        "type": "object", "additionalProperties": false,
        "properties": {
            "name": { "type": "string" }, "description": { "type": "string" },
            "type": { "enum": ["http", "command", "mcp"] },
            "base_url": { "type": "string" }, "endpoint": { "type": "string" },
            "method": { "enum": ["GET", "POST"] },
            "query": strings(), "body": strings(),
            "output_map": { "type": "object", "additionalProperties": { "type": "string", "description": "a JSON pointer into the response" } },
            "timeout_ms": { "type": "integer", "minimum": 1, "maximum": 600000 },
            "command": { "oneOf": [ { "type": "string" }, { "type": "array", "items": { "type": "string" } } ] },
            "url": { "type": "string" },
            "tool": { "type": "string", "description": "type mcp: the server's tool to call (default: this tool's name)" },
            "input": format, "output": format,
            "headers": { "type": "object", "additionalProperties": { "type": "string", "description": "type http: a request header's value; ${secret:NAME} is a [secrets] value of agency.toml" } },
            "env": { "type": "object", "additionalProperties": { "type": "string", "description": "type command: an environment variable's value; ${secret:NAME} is a [secrets] value of agency.toml" } },
            "egress": { "type": "array", "items": { "type": "string", "description": "HOST[:PORT] the tool reaches; agency up grants egress:HOST[:PORT] to every agent holding the tool" } }
        }
    })
}

/// `agency schema --sources`: every kind of source's frontmatter.
pub fn sources_schema() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Agency organisation sources: frontmatter",
        "$defs": {
            "agent": {
                "description": "An .agent file's frontmatter: Claude Code subagent fields (kept verbatim; unknown ones too) plus Agency's under `agency`.",
                "type": "object",
                "properties": {
                    "name": { "type": "string" }, "description": { "type": "string" },
                    "tools": { "type": "string", "description": "Claude Code's tools (kept for the claude-code runtime)" },
                    "model": { "type": "string", "description": "Claude Code's model alias" },
                    "agency": agent_fields()
                },
                "additionalProperties": true
            },
            "agency": agency_fields(),
            "tool": tool_fields(),
            "agents.json": {
                "type": "object", "additionalProperties": false, "required": ["agents"],
                "properties": { "agents": { "type": "object", "additionalProperties": {
                    "type": "object", "additionalProperties": false,
                    "properties": {
                        "name": { "type": "string" }, "description": { "type": "string" },
                        "tools": { "type": "array", "items": { "type": "string" } },
                        "connections": { "type": "array", "items": { "type": "string" } },
                        "agency": agent_fields()
                    } } } }
            }
        }
    })
}

#[cfg(test)]
mod tests {
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
    fn schemas_name_exactly_the_keys_the_readers_accept() {
        assert_eq!(keys(&agent_fields()), sorted(crate::agent::AGENT_KEYS));
        assert_eq!(keys(&agency_fields()), sorted(crate::agency::AGENCY_KEYS));
        assert_eq!(keys(&tool_fields()), sorted(crate::tool::TOOL_KEYS));
    }
}
