//! Argument parsing shared by the tools: UUIDs with errors that name the
//! argument, the "inline content or workspace path" choice, and the small
//! enums the schemas expose.
//!
//! Arguments arrive as untrusted JSON from an LLM; every error here says
//! which argument was wrong and what a right one looks like.

use std::str::FromStr;

use agency_core::{Level, Resource};
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::reply::ToolError;
use crate::tools::Call;
use crate::workspace::read_in_workspace;

/// Parse the JSON arguments of `tool` into its argument struct.
pub(crate) fn parse<A: DeserializeOwned>(
    tool: &str,
    arguments: Option<serde_json::Map<String, serde_json::Value>>,
) -> Result<A, ToolError> {
    let value = serde_json::Value::Object(arguments.unwrap_or_default());
    serde_json::from_value(value).map_err(|e| {
        ToolError::invalid(format!(
            "failed to parse the arguments of {tool}: {e}; see the tool's input schema"
        ))
    })
}

/// Parse a UUID argument into its typed id. A `kb://` prefix is accepted
/// everywhere (agents copy links out of KB files, where UUIDs are written
/// as `kb://UUID`).
pub(crate) fn id<T: FromStr>(arg: &str, value: &str) -> Result<T, ToolError> {
    strip_kb_scheme(value).parse().map_err(|_| {
        ToolError::invalid(format!(
            "failed to parse argument `{arg}` {value:?}: expected a UUID such as 123e4567-e89b-12d3-a456-426614174000 (or kb://UUID)"
        ))
    })
}

/// `value` trimmed, without a leading `kb://` (any case).
pub(crate) fn strip_kb_scheme(value: &str) -> &str {
    let v = value.trim();
    match v.get(..5) {
        Some(p) if p.eq_ignore_ascii_case("kb://") => &v[5..],
        _ => v,
    }
}

/// Parse an optional UUID argument.
pub(crate) fn opt_id<T: FromStr>(arg: &str, value: Option<&str>) -> Result<Option<T>, ToolError> {
    value.map(|v| id(arg, v)).transpose()
}

/// Parse a list of UUIDs, naming the position of a bad one.
pub(crate) fn ids<T: FromStr>(arg: &str, values: &[String]) -> Result<Vec<T>, ToolError> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| id(&format!("{arg}[{i}]"), v))
        .collect()
}

/// A page size from an optional count.
pub(crate) fn limit(value: Option<u32>) -> Option<usize> {
    value.map(|v| v as usize)
}

/// The content of a KB write: exactly one of inline `content` or a `path`
/// inside the calling agent's workspace.
pub(crate) fn content(
    call: &Call,
    content: Option<String>,
    path: Option<&str>,
) -> Result<Vec<u8>, ToolError> {
    match (content, path) {
        (Some(text), None) => Ok(text.into_bytes()),
        (None, Some(path)) => {
            let Some(ws) = call.identity.workspace.as_deref() else {
                return Err(ToolError::invalid(format!(
                    "failed to use path {path:?}: this agent has no workspace; pass content inline"
                )));
            };
            Ok(read_in_workspace(
                ws,
                path,
                call.svc.limits().max_file_bytes,
            )?)
        }
        (Some(_), Some(_)) => Err(ToolError::invalid(
            "failed to accept the content: give either `content` (inline text) or `path` (a file in your workspace), not both",
        )),
        (None, None) => Err(ToolError::invalid(
            "failed to accept the content: give `content` (inline text) or `path` (a file in your workspace)",
        )),
    }
}

/// An access level.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(crate) enum LevelArg {
    None,
    Read,
    Write,
}

impl From<LevelArg> for Level {
    fn from(l: LevelArg) -> Level {
        match l {
            LevelArg::None => Level::None,
            LevelArg::Read => Level::Read,
            LevelArg::Write => Level::Write,
        }
    }
}

/// The kinds of resource a handler may grant (mail permissions follow the
/// handler tree and are never granted).
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ResourceKindArg {
    Kb,
    McpServer,
    Repo,
    Egress,
    Tool,
}

impl ResourceKindArg {
    fn as_str(self) -> &'static str {
        match self {
            ResourceKindArg::Kb => "kb",
            ResourceKindArg::McpServer => "mcp_server",
            ResourceKindArg::Repo => "repo",
            ResourceKindArg::Egress => "egress",
            ResourceKindArg::Tool => "tool",
        }
    }

    /// The resource named by this kind and `resource_id`.
    pub fn resource(self, resource_id: &str) -> Result<Resource, ToolError> {
        let key = match self {
            ResourceKindArg::Kb => strip_kb_scheme(resource_id),
            _ => resource_id.trim(),
        };
        Resource::from_parts(self.as_str(), key)
            .map_err(|e| ToolError::invalid(format!("failed to parse argument `resource_id`: {e}")))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use agency_core::FileId;

    use super::*;

    #[test]
    fn uuid_errors_name_the_argument() {
        let e = id::<FileId>("file", "nope").unwrap_err();
        assert_eq!(e.kind, "invalid_input");
        assert!(e.message.contains("`file`"), "{}", e.message);
        let e = ids::<FileId>("messages", &["x".into()]).unwrap_err();
        assert!(e.message.contains("`messages[0]`"), "{}", e.message);
        assert!(id::<FileId>("file", " 123e4567-e89b-12d3-a456-426614174000 ").is_ok());
    }

    #[test]
    fn issue9_item12_kb_links_are_accepted_wherever_a_uuid_is() {
        let want: FileId = "123e4567-e89b-12d3-a456-426614174000".parse().unwrap();
        for v in [
            "kb://123e4567-e89b-12d3-a456-426614174000",
            " KB://123e4567-e89b-12d3-a456-426614174000 ",
        ] {
            assert_eq!(id::<FileId>("file", v).unwrap(), want);
            assert_eq!(ids::<FileId>("files", &[v.to_owned()]).unwrap(), vec![want]);
        }
        assert!(
            ResourceKindArg::Kb
                .resource("kb://123e4567-e89b-12d3-a456-426614174000")
                .is_ok()
        );
        assert!(id::<FileId>("file", "kb://").is_err());
        assert!(id::<FileId>("file", "kb:/123e4567-e89b-12d3-a456-426614174000").is_err());
    }

    #[test]
    fn resource_ids_are_validated() {
        assert!(ResourceKindArg::Kb.resource("not-a-uuid").is_err());
        assert!(ResourceKindArg::Repo.resource("agency").is_ok());
        assert!(ResourceKindArg::McpServer.resource("bad name!").is_err());
        assert_eq!(
            ResourceKindArg::Egress.resource(" *.GitHub.com ").unwrap(),
            Resource::Egress("*.github.com".into())
        );
        assert!(
            ResourceKindArg::Egress
                .resource("https://github.com")
                .is_err()
        );
        assert_eq!(
            ResourceKindArg::Tool.resource(" WeatherTool ").unwrap(),
            Resource::Tool("WeatherTool".into())
        );
        assert!(ResourceKindArg::Tool.resource("bad tool").is_err());
    }
}
