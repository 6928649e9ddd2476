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
use std::path::{Path, PathBuf};

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

/// Why a manifest is refused. Each names where it is (`at`: the server,
/// the file, the tool and the field) and what to change.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("{at}: {file:?} must end in .json or .toml")]
    FileKind { at: String, file: String },
    #[error("{at}: failed to read {}: {cause}; give a path relative to the home, or an inline table", path.display())]
    Read {
        at: String,
        path: PathBuf,
        cause: std::io::Error,
    },
    /// The file is not the JSON or TOML its name says.
    #[error("{at}: {} is not {format}: {reason}", path.display())]
    Syntax {
        at: String,
        path: PathBuf,
        format: &'static str,
        reason: String,
    },
    #[error("{at}: give a table, or the path of a .json or .toml file")]
    NotTableOrPath { at: String },
    #[error("{at}: the manifest must be a table (object)")]
    NotTable { at: String },
    #[error("{at}: tools must be a table of tool names")]
    ToolsNotTable { at: String },
    #[error("{at}: a tool name is empty")]
    EmptyToolName { at: String },
    /// A field of the manifest or of a tool is unknown or of the wrong type.
    #[error("{at}: {cause}")]
    Field {
        at: String,
        cause: serde_json::Error,
    },
    #[error(
        "{at}: read_only = true and destructive = true contradict each other; a tool that only reads destroys nothing"
    )]
    Contradiction { at: String },
    #[error("{at} rate_limit: {problem}")]
    RateLimit { at: String, problem: &'static str },
    #[error("{at} egress {host:?}: {cause}")]
    Egress {
        at: String,
        host: String,
        cause: agency_core::InvalidInput,
    },
    /// `at` ends with the field, `input_schema` or `output_schema`.
    #[error("{at}: {cause}")]
    Schema { at: String, cause: SchemaError },
}

/// Why a JSON Schema does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    #[error("a JSON Schema is an object (or true/false)")]
    NotASchema,
    #[error("not a valid JSON Schema: {0}")]
    Invalid(String),
}

/// Read the `manifest` value of `[mcp_servers.NAME]`: a path (resolved
/// against `home`, JSON or TOML by its extension) or an inline table.
/// Errors name the server, the file, the tool and the field.
pub fn load(server: &str, value: &Value, home: &Path) -> Result<Manifest, ManifestError> {
    let at = format!("[mcp_servers.{server}] manifest");
    let (value, at) = match value {
        Value::String(file) => {
            let format = if file.ends_with(".toml") {
                "TOML"
            } else if file.ends_with(".json") {
                "JSON"
            } else {
                return Err(ManifestError::FileKind {
                    at,
                    file: file.clone(),
                });
            };
            let path = home.join(file);
            let text = match std::fs::read_to_string(&path) {
                Ok(t) => t,
                Err(cause) => return Err(ManifestError::Read { at, path, cause }),
            };
            let parsed: Result<Value, String> = if format == "TOML" {
                toml::from_str(&text).map_err(|e| e.to_string())
            } else {
                serde_json::from_str(&text).map_err(|e| e.to_string())
            };
            match parsed {
                Ok(v) => {
                    let at = format!("{at} ({})", path.display());
                    (v, at)
                }
                Err(reason) => {
                    return Err(ManifestError::Syntax {
                        at,
                        path,
                        format,
                        reason,
                    });
                }
            }
        }
        Value::Object(_) => (value.clone(), at),
        _ => return Err(ManifestError::NotTableOrPath { at }),
    };
    parse(&value, &at)
}

/// Parse and check a manifest given as JSON; `at` says where it is.
pub fn parse(value: &Value, at: &str) -> Result<Manifest, ManifestError> {
    let at_ = || at.to_owned();
    let Value::Object(top) = value else {
        return Err(ManifestError::NotTable { at: at_() });
    };
    // Tools one by one, so that an error names its tool.
    let mut rest = top.clone();
    let tools = rest
        .remove("tools")
        .unwrap_or(Value::Object(Default::default()));
    let mut manifest: Manifest = serde_json::from_value(Value::Object(rest))
        .map_err(|cause| ManifestError::Field { at: at_(), cause })?;
    let Value::Object(tools) = tools else {
        return Err(ManifestError::ToolsNotTable { at: at_() });
    };
    for (name, t) in tools {
        let tat = format!("{at} tool {name:?}");
        if name.trim().is_empty() {
            return Err(ManifestError::EmptyToolName { at: at_() });
        }
        let tool: ToolManifest =
            serde_json::from_value(t).map_err(|cause| ManifestError::Field {
                at: tat.clone(),
                cause,
            })?;
        for (field, schema) in [
            ("input_schema", &tool.input_schema),
            ("output_schema", &tool.output_schema),
        ] {
            if let Some(s) = schema {
                compile(s).map_err(|cause| ManifestError::Schema {
                    at: format!("{tat} {field}"),
                    cause,
                })?;
            }
        }
        if tool.read_only == Some(true) && tool.destructive == Some(true) {
            return Err(ManifestError::Contradiction { at: tat });
        }
        if let Some(r) = &tool.rate_limit {
            check_rate(r).map_err(|problem| ManifestError::RateLimit {
                at: tat.clone(),
                problem,
            })?;
        }
        manifest.tools.insert(name, tool);
    }
    if let Some(r) = &manifest.rate_limit {
        check_rate(r).map_err(|problem| ManifestError::RateLimit { at: at_(), problem })?;
    }
    for host in &manifest.egress {
        agency_core::egress::EgressPattern::parse(host).map_err(|cause| ManifestError::Egress {
            at: at_(),
            host: host.clone(),
            cause,
        })?;
    }
    Ok(manifest)
}

/// What is wrong with a rate limit, if anything.
fn check_rate(r: &RateLimit) -> Result<(), &'static str> {
    if r.per_handler.is_none() && r.per_server.is_none() {
        return Err("give per_handler or per_server (calls per minute)");
    }
    if r.per_handler == Some(0) || r.per_server == Some(0) {
        return Err(
            "a limit of 0 calls would make the tool useless; remove the tool from the manifest (and leave allow_unlisted off) instead",
        );
    }
    Ok(())
}

/// Compile a JSON Schema (drafts 4 to 2020-12, by `$schema`; 2020-12 by
/// default). No remote references are fetched.
pub fn compile(schema: &Value) -> Result<jsonschema::Validator, SchemaError> {
    if !(schema.is_object() || schema.is_boolean()) {
        return Err(SchemaError::NotASchema);
    }
    jsonschema::validator_for(schema).map_err(|e| SchemaError::Invalid(e.to_string()))
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
    pub fn new(manifest: Manifest) -> Result<Compiled, ManifestError> {
        let mut tools = BTreeMap::new();
        for (name, t) in &manifest.tools {
            let c = |s: &Option<Value>, field: &str| {
                s.as_ref()
                    .map(compile)
                    .transpose()
                    .map_err(|cause| ManifestError::Schema {
                        at: format!("tool {name} {field}"),
                        cause,
                    })
            };
            tools.insert(
                name.clone(),
                CompiledTool {
                    input: c(&t.input_schema, "input_schema")?,
                    output: c(&t.output_schema, "output_schema")?,
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
            let e = parse(&v, "m").unwrap_err().to_string();
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
        let e = load("s", &json!("m.json"), dir.path())
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("[mcp_servers.s] manifest (")
                && e.contains("tool \"y\": unknown field `bogus`"),
            "{e}"
        );
        let e = load("s", &json!("missing.json"), dir.path())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("failed to read") && e.contains("missing.json"),
            "{e}"
        );
        let e = load("s", &json!("m.yaml"), dir.path())
            .unwrap_err()
            .to_string();
        assert!(e.contains(".json or .toml"), "{e}");
    }
}
