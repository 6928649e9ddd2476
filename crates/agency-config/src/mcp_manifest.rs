//! Capability manifests of extra MCP servers (seed 003's
//! "agent manifest"): what the user declares a server's tools may take,
//! return and do, checked by the daemon on every call.
//!
//! `[mcp_servers.NAME] manifest` is an inline table or the path of a JSON
//! or TOML file (relative to the home). Shape, in TOML:
//!
//! ```toml
//! [mcp_servers.notes.manifest]
//! allow_unlisted = false        # tools not declared below are withheld
//! egress = ["api.example.com"]  # the only hosts the server may reach (egress proxy)
//! rate_limit = { per_handler = 60, per_server = 600 }  # calls/minute, all tools
//! [mcp_servers.notes.manifest.tools.add_note]
//! read_only = false
//! destructive = false
//! rate_limit = { per_handler = 5 }
//! input_schema = { type = "object", required = ["text"], properties = { text = { type = "string" } } }
//! output_schema = { type = "object" }
//! ```
//!
//! Everything is validated when the configuration is read (every schema
//! compiled with the `jsonschema` crate), and each problem is named by
//! server, tool and field, so a manifest that is wrong stops the daemon
//! from starting instead of letting calls through unchecked.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Calls per minute (a sliding window of 60 s), counted per calling
/// handler and/or over all handlers together.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimit {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_handler: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_server: Option<u32>,
}

/// One tool's part of a manifest.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolManifest {
    /// JSON Schema every call's `arguments` must match.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_schema: Option<Value>,
    /// JSON Schema the result's `structuredContent` (or its JSON text)
    /// must match.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// The user's word (not the server's hint) that the tool only reads:
    /// what the tool-call policy is told.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_only: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub destructive: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
}

/// A server's manifest.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Manifest {
    pub tools: BTreeMap<String, ToolManifest>,
    /// Whether tools the manifest does not declare are offered at all
    /// (default: no — the manifest is the list of what may be used).
    pub allow_unlisted: bool,
    /// A limit over all the server's tools together.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_limit: Option<RateLimit>,
    /// The only hosts the server may reach, through the egress proxy
    /// (`HOST`, `*.DOMAIN`, `:PORT`; `egress.rs`): enforced, not advisory.
    pub egress: Vec<String>,
}

/// Read the `manifest` value of `[mcp_servers.NAME]`: a path (resolved
/// against `home`, JSON or TOML by its extension) or an inline table.
/// Errors name the server, the file, the tool and the field.
pub fn load(server: &str, value: &Value, home: &Path) -> Result<Manifest, String> {
    let at = format!("[mcp_servers.{server}] manifest");
    let (value, at) = match value {
        Value::String(file) => {
            if !(file.ends_with(".json") || file.ends_with(".toml")) {
                return Err(format!("{at}: {file:?} must end in .json or .toml"));
            }
            let path = home.join(file);
            let text = std::fs::read_to_string(&path).map_err(|e| {
                format!(
                    "{at}: failed to read {}: {e}; give a path relative to the home, or an inline table",
                    path.display()
                )
            })?;
            let parsed: Value = if file.ends_with(".toml") {
                toml::from_str(&text)
                    .map_err(|e| format!("{at}: {} is not TOML: {e}", path.display()))?
            } else if file.ends_with(".json") {
                serde_json::from_str(&text)
                    .map_err(|e| format!("{at}: {} is not JSON: {e}", path.display()))?
            } else {
                return Err(format!("{at}: {file:?} must end in .json or .toml"));
            };
            (parsed, format!("{at} ({})", path.display()))
        }
        Value::Object(_) => (value.clone(), at),
        _ => {
            return Err(format!(
                "{at}: give a table, or the path of a .json or .toml file"
            ));
        }
    };
    parse(&value, &at)
}

/// Parse and check a manifest given as JSON; `at` says where it is.
pub fn parse(value: &Value, at: &str) -> Result<Manifest, String> {
    let Value::Object(top) = value else {
        return Err(format!("{at}: the manifest must be a table (object)"));
    };
    // Tools one by one, so that an error names its tool.
    let mut rest = top.clone();
    let tools = rest
        .remove("tools")
        .unwrap_or(Value::Object(Default::default()));
    let mut manifest: Manifest =
        serde_json::from_value(Value::Object(rest)).map_err(|e| format!("{at}: {e}"))?;
    let Value::Object(tools) = tools else {
        return Err(format!("{at}: tools must be a table of tool names"));
    };
    for (name, t) in tools {
        let tat = format!("{at} tool {name:?}");
        if name.trim().is_empty() {
            return Err(format!("{at}: a tool name is empty"));
        }
        let tool: ToolManifest = serde_json::from_value(t).map_err(|e| format!("{tat}: {e}"))?;
        for (field, schema) in [
            ("input_schema", &tool.input_schema),
            ("output_schema", &tool.output_schema),
        ] {
            if let Some(s) = schema {
                compile(s).map_err(|e| format!("{tat} {field}: {e}"))?;
            }
        }
        if tool.read_only == Some(true) && tool.destructive == Some(true) {
            return Err(format!(
                "{tat}: read_only = true and destructive = true contradict each other; a tool that only reads destroys nothing"
            ));
        }
        if let Some(r) = &tool.rate_limit {
            check_rate(r).map_err(|e| format!("{tat} rate_limit: {e}"))?;
        }
        manifest.tools.insert(name, tool);
    }
    if let Some(r) = &manifest.rate_limit {
        check_rate(r).map_err(|e| format!("{at} rate_limit: {e}"))?;
    }
    for host in &manifest.egress {
        agency_core::egress::EgressPattern::parse(host)
            .map_err(|e| format!("{at} egress {host:?}: {e}"))?;
    }
    Ok(manifest)
}

fn check_rate(r: &RateLimit) -> Result<(), String> {
    if r.per_handler.is_none() && r.per_server.is_none() {
        return Err("give per_handler or per_server (calls per minute)".to_owned());
    }
    if r.per_handler == Some(0) || r.per_server == Some(0) {
        return Err("a limit of 0 calls would make the tool useless; remove the tool from the manifest (and leave allow_unlisted off) instead".to_owned());
    }
    Ok(())
}

/// Compile a JSON Schema (drafts 4 to 2020-12, by `$schema`; 2020-12 by
/// default). No remote references are fetched.
pub fn compile(schema: &Value) -> Result<jsonschema::Validator, String> {
    if !(schema.is_object() || schema.is_boolean()) {
        return Err("a JSON Schema is an object (or true/false)".to_owned());
    }
    jsonschema::validator_for(schema).map_err(|e| format!("not a valid JSON Schema: {e}"))
}

/// The first few ways `instance` breaks `schema`, as one sentence
/// (`/path: message; …`).
pub fn violations(schema: &jsonschema::Validator, instance: &Value) -> Option<String> {
    let errors: Vec<String> = schema
        .iter_errors(instance)
        .take(3)
        .map(|e| {
            let path = e.instance_path().to_string();
            let path = if path.is_empty() {
                "/".to_owned()
            } else {
                path
            };
            format!("at {path}: {e}")
        })
        .collect();
    (!errors.is_empty()).then(|| errors.join("; "))
}

/// Where `instance` breaks `schema`, without quoting the instance: the
/// instance path and the schema rule broken (`/n` breaks
/// `/properties/n/type`). For output a server sent, whose text must not
/// reach the agent through the error that withholds it.
pub fn violation_places(schema: &jsonschema::Validator, instance: &Value) -> Option<String> {
    let errors: Vec<String> = schema
        .iter_errors(instance)
        .take(3)
        .map(|e| {
            let path = e.instance_path().to_string();
            let path = if path.is_empty() {
                "/".to_owned()
            } else {
                path
            };
            let rule = e.schema_path().to_string();
            // A missing property's message names only the property (from
            // the schema), never the instance's text.
            if rule.ends_with("/required") {
                format!("at {path}: {e}")
            } else {
                format!("{path} breaks the schema's {rule}")
            }
        })
        .collect();
    (!errors.is_empty()).then(|| errors.join("; "))
}

/// A manifest with its schemas compiled, as the guard uses it.
#[derive(Debug)]
pub struct Compiled {
    pub manifest: Manifest,
    pub tools: BTreeMap<String, CompiledTool>,
}

#[derive(Debug)]
pub struct CompiledTool {
    pub input: Option<jsonschema::Validator>,
    pub output: Option<jsonschema::Validator>,
}

impl Compiled {
    pub fn new(manifest: Manifest) -> Result<Compiled, String> {
        let mut tools = BTreeMap::new();
        for (name, t) in &manifest.tools {
            let c = |s: &Option<Value>| s.as_ref().map(compile).transpose();
            tools.insert(
                name.clone(),
                CompiledTool {
                    input: c(&t.input_schema)
                        .map_err(|e| format!("tool {name} input_schema: {e}"))?,
                    output: c(&t.output_schema)
                        .map_err(|e| format!("tool {name} output_schema: {e}"))?,
                },
            );
        }
        Ok(Compiled { manifest, tools })
    }

    /// Whether agents may see and call `tool` at all.
    pub fn offers(&self, tool: &str) -> bool {
        self.manifest.allow_unlisted || self.manifest.tools.contains_key(tool)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_valid_manifest_parses_and_its_schemas_check() {
        let m = parse(
            &json!({
                "rate_limit": {"per_server": 100},
                "egress": ["api.example.com", "*.example.org:8443"],
                "tools": {"add": {
                    "read_only": false,
                    "input_schema": {"type": "object", "required": ["text"],
                                     "properties": {"text": {"type": "string", "maxLength": 5}}},
                    "rate_limit": {"per_handler": 2}
                }}
            }),
            "m",
        )
        .unwrap();
        let c = Compiled::new(m).unwrap();
        assert!(c.offers("add") && !c.offers("other"));
        let input = c.tools["add"].input.as_ref().unwrap();
        assert!(violations(input, &json!({"text": "abc"})).is_none());
        let why = violations(input, &json!({"text": "toolong"})).unwrap();
        assert!(why.contains("/text"), "{why}");
        assert!(violations(input, &json!({})).unwrap().contains("text"));
        let places = violation_places(input, &json!({"text": "secret-ish"})).unwrap();
        assert_eq!(
            places,
            "/text breaks the schema's /properties/text/maxLength"
        );
    }

    #[test]
    fn errors_name_the_tool_and_the_field() {
        let cases = [
            (
                json!({"tools": {"a": {"input_schema": {"type": "nonsense"}}}}),
                "m tool \"a\" input_schema: not a valid JSON Schema",
            ),
            (
                json!({"tools": {"a": {"input_schema": 3}}}),
                "tool \"a\" input_schema: a JSON Schema is an object",
            ),
            (
                json!({"tools": {"a": {"readonly": true}}}),
                "m tool \"a\": unknown field `readonly`",
            ),
            (
                json!({"tools": {"a": {"read_only": true, "destructive": true}}}),
                "contradict",
            ),
            (
                json!({"tools": {"a": {"rate_limit": {}}}}),
                "tool \"a\" rate_limit: give per_handler",
            ),
            (
                json!({"tools": {"a": {"rate_limit": {"per_server": 0}}}}),
                "a limit of 0",
            ),
            (
                json!({"rate_limit": {"per_minute": 3}}),
                "unknown field `per_minute`",
            ),
            (
                json!({"egress": ["not a host!"]}),
                "m egress \"not a host!\"",
            ),
            (json!({"tools": []}), "tools must be a table"),
            (json!({"extra": 1}), "unknown field `extra`"),
            (json!([1]), "must be a table"),
        ];
        for (v, want) in cases {
            let e = parse(&v, "m").unwrap_err();
            assert!(e.contains(want), "{v}: {e}");
        }
    }

    #[test]
    fn a_manifest_file_is_read_relative_to_the_home() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("m.toml"),
            "[tools.x]\nread_only = true\ninput_schema = { type = \"object\" }\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("m.json"),
            r#"{"tools": {"y": {"bogus": 1}}}"#,
        )
        .unwrap();
        let m = load("s", &json!("m.toml"), dir.path()).unwrap();
        assert_eq!(m.tools["x"].read_only, Some(true));
        let e = load("s", &json!("m.json"), dir.path()).unwrap_err();
        assert!(
            e.starts_with("[mcp_servers.s] manifest (")
                && e.contains("tool \"y\": unknown field `bogus`"),
            "{e}"
        );
        let e = load("s", &json!("missing.json"), dir.path()).unwrap_err();
        assert!(
            e.contains("failed to read") && e.contains("missing.json"),
            "{e}"
        );
        let e = load("s", &json!("m.yaml"), dir.path()).unwrap_err();
        assert!(e.contains(".json or .toml"), "{e}");
    }
}
