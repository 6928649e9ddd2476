//! How tool outcomes become MCP results: a success is the JSON of an
//! `agency-api` type (the service's view, or a tool's own result type in
//! `agency_api`'s `mcp` module); a failure is a result with `isError: true` whose text
//! is `[kind] message`, so an agent can both branch on the kind and act on
//! the message.

use agency_service::ServiceError;
use rmcp::model::{CallToolResult, ContentBlock};
use serde::Serialize;
use serde_json::Value;

use crate::workspace::PathError;

/// Results at most this large also go out as `structuredContent`; larger
/// ones (whole files, full inboxes) are sent once, as text, rather than
/// doubling the payload.
const STRUCTURED_MAX_BYTES: usize = 16 * 1024;

/// A failed tool call, as the agent will read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ToolError {
    /// Machine-readable kind: the service's (`not_found`,
    /// `permission_denied`, `conflict`, `quota`, `invalid_input`,
    /// `internal`, …) or
    /// `invalid_path` for workspace paths.
    pub kind: &'static str,
    pub message: String,
}

impl ToolError {
    pub fn invalid(message: impl Into<String>) -> Self {
        ToolError {
            kind: "invalid_input",
            message: message.into(),
        }
    }

    pub fn internal(message: impl Into<String>) -> Self {
        ToolError {
            kind: "internal",
            message: message.into(),
        }
    }

    /// The text the agent sees.
    pub fn text(&self) -> String {
        format!("[{}] {}", self.kind, self.message)
    }
}

impl From<ServiceError> for ToolError {
    fn from(e: ServiceError) -> Self {
        let mut message = e.to_string();
        // The service's conflict text already says what to do; keep the
        // advice if that wording ever changes.
        if matches!(e, ServiceError::Conflict { .. }) && !message.contains("re-read") {
            message.push_str("; re-read the file and retry");
        }
        ToolError {
            kind: e.kind(),
            message,
        }
    }
}

impl From<PathError> for ToolError {
    fn from(e: PathError) -> Self {
        ToolError {
            kind: "invalid_path",
            message: e.to_string(),
        }
    }
}

/// What a tool body returns.
pub(crate) type ToolResult = Result<Value, ToolError>;

/// Serialize a service view or another `agency-api` type for the agent:
/// every successful tool result is made here.
pub(crate) fn json<T: Serialize>(value: &T) -> ToolResult {
    serde_json::to_value(value)
        .map_err(|e| ToolError::internal(format!("failed to serialize the result: {e}")))
}

/// Turn a tool body's outcome into the MCP result.
pub(crate) fn into_call_result(outcome: ToolResult) -> CallToolResult {
    match outcome {
        Ok(value) => {
            let text = value.to_string();
            let mut result = CallToolResult::success(vec![ContentBlock::text(text.clone())]);
            if value.is_object() && text.len() <= STRUCTURED_MAX_BYTES {
                result.structured_content = Some(value);
            }
            result
        }
        Err(e) => CallToolResult::error(vec![ContentBlock::text(e.text())]),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn conflict_keeps_the_retry_advice() {
        let e = ServiceError::Conflict {
            file: "f".into(),
            current_version: 3,
            current_hash: agency_service::BlobId::of(b"x"),
        };
        let t = ToolError::from(e).text();
        assert!(t.starts_with("[conflict] failed to write KB file f"), "{t}");
        assert!(t.contains("current version is 3"), "{t}");
        assert!(t.contains("re-read"), "{t}");
    }

    #[test]
    fn errors_are_flagged() {
        let r = into_call_result(Err(ToolError::invalid("failed to x")));
        assert_eq!(r.is_error, Some(true));
        let r = into_call_result(Ok(serde_json::json!({"a": 1})));
        assert_eq!(r.is_error, Some(false));
        assert_eq!(r.structured_content, Some(serde_json::json!({"a": 1})));
        let big = "x".repeat(STRUCTURED_MAX_BYTES);
        let r = into_call_result(Ok(serde_json::json!({ "content": big })));
        assert!(r.structured_content.is_none());
    }
}
