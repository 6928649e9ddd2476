//! The agent's side of MCP: one rmcp streamable-HTTP client session to
//! Agency's `/mcp` endpoint, authenticated with the agent's bearer token,
//! plus one stdio session per extra MCP server of the configuration (each a
//! child process: Agency's launcher, which becomes the server). An extra
//! server's tools are offered as `NAME__tool`; Agency's keep their names.
//!
//! A tool call never fails the run: protocol errors, timeouts and `isError`
//! results all come back as a [`ToolOutcome`] with `is_error` set, so the
//! model reads what went wrong and can react.

use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;

use crate::config::StdioServer;
use crate::error::{AgentError, McpError};
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
    /// Start an extra server (a child process speaking MCP on stdio; its
    /// stderr goes to ours), initialize it and list its tools.
    pub async fn spawn_stdio(
        server: &StdioServer,
        timeout: Duration,
    ) -> Result<(Mcp, Vec<ToolSpec>), McpError> {
        let mut cmd = tokio::process::Command::new(&server.command);
        cmd.args(&server.args).envs(&server.env);
        let transport = TokioChildProcess::new(cmd).map_err(|cause| McpError::Start {
            command: server.command.clone(),
            cause,
        })?;
        let client = tokio::time::timeout(timeout, ().serve(transport))
            .await
            .map_err(|_| McpError::NoAnswer(timeout))??;
        Mcp::list(client, timeout).await
    }

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
            Err(_) => Err(McpError::NoAnswer(timeout)),
            Ok(started) => started.map_err(McpError::from),
        }
        .map_err(|cause| AgentError::McpConnect {
            url: url.to_owned(),
            cause,
        })?;
        Mcp::list(client, timeout)
            .await
            .map_err(|cause| AgentError::McpListTools {
                url: url.to_owned(),
                cause,
            })
    }

    /// List a new session's tools; the session is ended on failure.
    async fn list(
        client: RunningService<RoleClient, ()>,
        timeout: Duration,
    ) -> Result<(Mcp, Vec<ToolSpec>), McpError> {
        let tools = match tokio::time::timeout(timeout, client.list_all_tools()).await {
            Err(_) => Err(McpError::NoAnswer(timeout)),
            Ok(listed) => listed.map_err(McpError::from),
        };
        let tools = match tools {
            Ok(t) => t,
            Err(e) => {
                let _ = client.cancel().await;
                return Err(e);
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

/// Agency's session and the extra servers', routing each call by name.
#[derive(Debug)]
pub(crate) struct Sessions {
    agency: Mcp,
    /// Each extra server with the prefix of its tools (`NAME__`).
    extra: Vec<(String, Mcp)>,
}

impl Sessions {
    pub fn new(agency: Mcp) -> Sessions {
        Sessions {
            agency,
            extra: Vec::new(),
        }
    }

    /// Add an extra server's session; returns its tools, renamed.
    pub fn add(&mut self, name: &str, mcp: Mcp, tools: Vec<ToolSpec>) -> Vec<ToolSpec> {
        let prefix = format!("{name}__");
        self.extra.push((prefix.clone(), mcp));
        tools
            .into_iter()
            .map(|t| ToolSpec {
                name: format!("{prefix}{}", t.name),
                ..t
            })
            .collect()
    }

    pub async fn call(&self, name: &str, input: &Value) -> ToolOutcome {
        for (prefix, mcp) in &self.extra {
            if let Some(tool) = name.strip_prefix(prefix.as_str()) {
                return mcp.call(tool, input).await;
            }
        }
        self.agency.call(name, input).await
    }

    pub async fn close(self) {
        for (_, mcp) in self.extra {
            mcp.close().await;
        }
        self.agency.close().await;
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
