//! `POST /launch/{name}`: where an agent's launcher (`agency mcp-launch
//! NAME`) learns how to reach extra MCP server `name`. The caller brings
//! the agent's token *and* the single-use launch nonce its spawn
//! registered for that server (`LaunchNonces`); the service decides
//! whether the agent's handler holds a capability on `mcp_server:NAME`
//! now. The answer is always the daemon's `/mcp-proxy/NAME`
//! (`crate::mcp_proxy`), never a secret: a stdio server is run by the
//! daemon itself (`mcp_stdio.rs`), an HTTP server's URL and headers stay
//! in the daemon (an agent presenting its own nonce got a stdio
//! server's secrets).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agency_core::{AgentId, Principal};
use agency_mcp::AgentIdentity;
use axum::Extension;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;

use crate::Tools;
use agency_config::mcp_servers::LaunchSpec;
use agency_http::error;
use agency_http::service_error;

/// The header that carries the launch nonce.
pub const NONCE_HEADER: &str = "x-agency-launch-nonce";

/// Launch nonces issued at spawns and not yet used, in memory only (a
/// restart reaps every agent, so none survives one). Keyed by the nonce's
/// hash; each is bound to one agent and one server.
#[derive(Debug, Default)]
pub struct LaunchNonces {
    pending: Mutex<HashMap<blake3::Hash, (AgentId, String)>>,
}

impl LaunchNonces {
    /// A fresh nonce for `agent`'s launcher of `server`.
    pub fn issue(&self, agent: AgentId, server: &str) -> String {
        let nonce = format!(
            "agl_{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        self.lock()
            .insert(blake3::hash(nonce.as_bytes()), (agent, server.to_owned()));
        nonce
    }

    /// Spend `nonce`: Ok only for the agent and server it was issued for.
    /// A nonce is gone after its first presentation, whoever presents it,
    /// so a stolen one is worth nothing to the thief nor after the theft.
    pub fn consume(&self, nonce: &str, agent: AgentId, server: &str) -> Result<(), &'static str> {
        match self.lock().remove(&blake3::hash(nonce.as_bytes())) {
            None => Err("the launch nonce is unknown or already used"),
            Some((a, s)) if a == agent && s == server => Ok(()),
            Some(_) => Err("the launch nonce was issued to another agent or server"),
        }
    }

    /// The agent ended: its unused nonces die with it.
    pub fn forget_agent(&self, agent: AgentId) {
        self.lock().retain(|_, (a, _)| *a != agent);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<blake3::Hash, (AgentId, String)>> {
        // A panic while holding the map leaves it consistent (one insert
        // or remove): keep using it.
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The service's decision whether the calling agent's handler may use MCP
/// server `name` now (a live capability), as the answer to send when not.
/// Shared by `/launch` and `/mcp-proxy`: the daemon asks, never decides.
pub(crate) async fn check_server(
    st: &Tools,
    id: &AgentIdentity,
    name: &str,
) -> Result<(), Response> {
    let svc = st.svc.clone();
    let who = Principal::agent(id.handler, id.agent);
    let n = name.to_owned();
    match tokio::task::spawn_blocking(move || svc.mcp_server_check(who, &n)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(service_error(&e)),
        Err(_) => Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "failed to check the capability: the check was cancelled",
        )),
    }
}

pub(crate) fn routes() -> Router<Arc<Tools>> {
    Router::new().route("/launch/{name}", post(launch))
}

async fn launch(
    State(st): State<Arc<Tools>>,
    Extension(id): Extension<AgentIdentity>,
    Path(name): Path<String>,
    headers: HeaderMap,
) -> Response {
    let nonce = headers
        .get(NONCE_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if let Err(why) = st.nonces.consume(nonce.trim(), id.agent, &name) {
        // An agent reaching for secrets without its launcher's nonce is
        // worth a line in the daemon's log.
        tracing::warn!(
            server = %name,
            agent = %id.agent,
            handler = %id.handler,
            "refused to launch an MCP server: {why}"
        );
        return error(
            StatusCode::FORBIDDEN,
            "denied",
            &format!(
                "failed to launch MCP server {name}: {why}; only the launcher Agency configured for this agent's spawn may launch it, once"
            ),
        );
    }
    if let Err(refused) = check_server(&st, &id, &name).await {
        return refused;
    }
    match st.servers.resolve(&name) {
        None => error(
            StatusCode::NOT_FOUND,
            "not_found",
            &format!(
                "failed to launch MCP server {name}: agency.toml declares no [mcp_servers.{name}]"
            ),
        ),
        Some(Err(e)) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            &format!("failed to launch MCP server {name}: {e}"),
        ),
        Some(Ok(_)) => {
            // Whatever the server, the launcher bridges to the daemon's
            // proxy, which runs or reaches it and guards every message.
            let spec = LaunchSpec::Proxy {
                url: format!("http://{}/mcp-proxy/{name}", st.addr),
            };
            match serde_json::to_vec(&spec) {
                Ok(body) => (
                    StatusCode::OK,
                    [
                        (header::CONTENT_TYPE, "application/json"),
                        (header::CACHE_CONTROL, "no-store"),
                    ],
                    body,
                )
                    .into_response(),
                Err(e) => error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    &format!("failed to encode the launch of MCP server {name}: {e}"),
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nonce_is_single_use_and_bound_to_its_agent_and_server() {
        let n = LaunchNonces::default();
        let (a, b) = (AgentId(uuid::Uuid::new_v4()), AgentId(uuid::Uuid::new_v4()));
        let x = n.issue(a, "gh");
        assert_eq!(n.consume(&x, a, "gh"), Ok(()));
        assert!(n.consume(&x, a, "gh").is_err(), "replay");
        let y = n.issue(a, "gh");
        assert!(n.consume(&y, b, "gh").is_err(), "another agent");
        assert!(n.consume(&y, a, "gh").is_err(), "burnt by the theft");
        let z = n.issue(a, "gh");
        assert!(n.consume(&z, a, "files").is_err(), "another server");
        let w = n.issue(a, "gh");
        n.forget_agent(a);
        assert!(n.consume(&w, a, "gh").is_err(), "the agent ended");
        assert!(n.consume("", a, "gh").is_err());
    }
}
