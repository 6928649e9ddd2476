//! What agents reach besides Agency's own tools: the extra MCP servers
//! (the launchers' `/launch`, the guarded `/mcp-proxy`, the stdio servers
//! the daemon runs), the organisation's tools (HTTP, command and MCP
//! implementations behind `agency_mcp::OrgTools`), and the tool-call
//! gates (`/agent/tool-check`, the user's approvals and MCP pins).
//!
//! Invariant: no secret of a server or tool reaches an agent. Every call
//! is admitted by the service for the caller's handler before it runs, and
//! what a server answers is checked against its manifest before the agent
//! sees it.

use std::net::SocketAddr;
use std::sync::Arc;

use agency_config::mcp_servers::McpServers;
use agency_service::System;
use axum::Router;

pub mod launch;
pub mod mcp_guard;
mod mcp_proxy;
pub mod mcp_stdio;
pub mod org_tools;
pub mod tool_check;

pub use launch::LaunchNonces;
pub use mcp_stdio::StdioServers;

/// The state of the tools' routes.
#[derive(Debug)]
pub struct Tools {
    pub svc: Arc<System>,
    /// The agents' listener (the answer of `/launch`).
    pub addr: SocketAddr,
    /// Single-use launch nonces of live agents' launchers.
    pub nonces: Arc<LaunchNonces>,
    /// The extra MCP servers and the secrets read at start.
    pub servers: Arc<McpServers>,
    /// Rate-limit windows of the extra servers' tools.
    pub guard: mcp_guard::Guard,
    /// Forwards `/mcp-proxy` requests to HTTP MCP servers.
    pub proxy_client: reqwest::Client,
    /// The stdio MCP servers the daemon runs for agents.
    pub stdio: Arc<StdioServers>,
}

impl Tools {
    /// The client `/mcp-proxy` forwards with.
    pub fn proxy_client() -> Result<reqwest::Client, agency_config::ConfigError> {
        mcp_proxy::client()
    }
}

/// The agents' routes (behind the agent-token guard): `/launch/{name}`,
/// `/mcp-proxy/{name}`, `/agent/tool-check`.
pub fn agent_routes<S: Clone + Send + Sync + 'static>(tools: Arc<Tools>) -> Router<S> {
    launch::routes()
        .merge(mcp_proxy::routes())
        .merge(tool_check::agent_routes())
        .with_state(tools)
}

/// The user's routes (behind the admin-token guard): approvals and the
/// extra servers' pins.
pub fn admin_routes<S: Clone + Send + Sync + 'static>(tools: Arc<Tools>) -> Router<S> {
    tool_check::rest_routes()
        .merge(mcp_guard::admin_routes())
        .with_state(tools)
}
