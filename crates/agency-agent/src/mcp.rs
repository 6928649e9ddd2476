//! The agent's side of MCP: one rmcp streamable-HTTP client session to
//! Agency's `/mcp` endpoint, authenticated with the agent's bearer token.
//!
//! A tool call never fails the run: protocol errors, timeouts and `isError`
//! results all come back as a [`ToolOutcome`] with `is_error` set, so the
//! model reads what went wrong and can react.

use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;

use crate::error::AgentError;
use crate::model::ToolSpec;

/// What a tool call produced, as text for the model.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolOutcome {
    pub content: String,
    pub is_error: bool,
}

/// A connected MCP session.
#[derive(Debug)]
pub(crate) struct Mcp {
    client: RunningService<RoleClient, ()>,
    timeout: Duration,
}

impl Mcp {
    /// Connect, initialize and list every tool (following pagination).
    pub async fn connect(
        url: &str,
        token: &str,
        timeout: Duration,
    ) -> Result<(Mcp, Vec<ToolSpec>), AgentError> {
        let config = StreamableHttpClientTransportConfig::with_uri(url.to_owned())
            .auth_header(token.to_owned())
            // A session the server dropped (idle timeout, daemon restart)
            // is re-initialized instead of failing every later call.
            .reinit_on_expired_session(true);
        let transport = StreamableHttpClientTransport::from_config(config);
        let client = match tokio::time::timeout(timeout, ().serve(transport)).await {
            Err(_) => {
                return Err(AgentError::McpConnect {
                    url: url.to_owned(),
                    message: format!("no answer within {} s", timeout.as_secs()),
                });
            }
            Ok(Err(e)) => {
                return Err(AgentError::McpConnect {
                    url: url.to_owned(),
                    message: e.to_string(),
                });
            }
            Ok(Ok(c)) => c,
        };
        let tools = match tokio::time::timeout(timeout, client.list_all_tools()).await {
            Err(_) => Err(format!("no answer within {} s", timeout.as_secs())),
            Ok(Err(e)) => Err(e.to_string()),
            Ok(Ok(t)) => Ok(t),
        };
        let tools = match tools {
            Ok(t) => t,
            Err(message) => {
                let _ = client.cancel().await;
                return Err(AgentError::McpListTools {
                    url: url.to_owned(),
                    message,
                });
            }
        };
        let specs = tools
            .into_iter()
            .map(|t| ToolSpec {
                name: t.name.into_owned(),
                description: t.description.map(|d| d.into_owned()).unwrap_or_default(),
                input_schema: Value::Object((*t.input_schema).clone()),
            })
            .collect();
        Ok((Mcp { client, timeout }, specs))
    }

    /// Call one tool. `input` must be a JSON object (the caller checked).
    pub async fn call(&self, name: &str, input: &Value) -> ToolOutcome {
        let mut params = CallToolRequestParams::new(name.to_owned());
        if let Value::Object(args) = input {
            params = params.with_arguments(args.clone());
        }
        match tokio::time::timeout(self.timeout, self.client.call_tool(params)).await {
            Err(_) => ToolOutcome {
                content: format!(
                    "[unavailable] failed to call tool {name}: no answer within {} s",
                    self.timeout.as_secs()
                ),
                is_error: true,
            },
            Ok(Err(e)) => ToolOutcome {
                content: format!("[unavailable] failed to call tool {name}: {e}"),
                is_error: true,
            },
            Ok(Ok(r)) => outcome(&r),
        }
    }

    /// End the session (DELETE on the server), best effort.
    pub async fn close(self) {
        let _ = tokio::time::timeout(Duration::from_secs(5), self.client.cancel()).await;
    }
}

/// The text of a result: its text blocks joined; other blocks (images,
/// resources) as their JSON; the structured content when there is no
/// block at all.
fn outcome(r: &CallToolResult) -> ToolOutcome {
    let parts: Vec<String> = r
        .content
        .iter()
        .map(|c| match c.as_text() {
            Some(t) => t.text.clone(),
            None => serde_json::to_string(c).unwrap_or_default(),
        })
        .collect();
    let content = if parts.is_empty() {
        r.structured_content
            .as_ref()
            .map(Value::to_string)
            .unwrap_or_default()
    } else {
        parts.join("\n")
    };
    ToolOutcome {
        content,
        is_error: r.is_error.unwrap_or(false),
    }
}
