//! `POST /launch/{name}`: where an agent's launcher (`agency mcp-launch
//! NAME`) learns how to reach extra MCP server `name`. The caller brings
//! the agent's token *and* the single-use launch nonce its spawn
//! registered for that server (`LaunchNonces`); the service decides
//! whether the agent's handler holds a capability on `mcp_server:NAME`
//! now. The answer is always the daemon's `/mcp-proxy/NAME`
//! (`crate::mcp_proxy`), never a secret: a stdio server is run by the
//! daemon itself (`mcp_stdio.rs`), an HTTP server's URL and headers stay
//! in the daemon (issue 27: an agent presenting its own nonce got a stdio
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

use crate::http_auth::error;
use crate::rest::service_error;
use crate::server::AppState;
use agency_config::mcp_servers::LaunchSpec;

/// The header that carries the launch nonce.
pub const NONCE_HEADER: &str = "x-agency-launch-nonce";

/// Launch nonces issued at spawns and not yet used, in memory only (a
/// restart reaps every agent, so none survives one). Keyed by the nonce's
/// hash; each is bound to one agent and one server.
#[derive(Debug, Default)]
pub(crate) struct LaunchNonces {
    pending: Mutex<HashMap<blake3::Hash, (AgentId, String)>>,
    /// Egress keys given to the stdio servers the daemon runs whose
    /// manifest declares `egress` (`mcp_stdio.rs`, `egress.rs`), keyed by
    /// hash, bound to the agent (with its handler) and server.
    egress: Mutex<HashMap<blake3::Hash, (Principal, String)>>,
    /// Egress keys of running organisation command tools
    /// (`org_tools/command.rs`), keyed by hash, bound to the calling agent:
    /// the tool reaches what the agent's handler may reach, for as long as
    /// the call runs.
    tool_egress: Mutex<HashMap<blake3::Hash, Principal>>,
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

    /// The agent ended: its unused nonces and its keys die with it.
    pub fn forget_agent(&self, agent: AgentId) {
        self.lock().retain(|_, (a, _)| *a != agent);
        self.egress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|_, (who, _)| !matches!(who, Principal::Agent { agent: a, .. } if *a == agent));
        self.tool_egress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|_, who| !matches!(who, Principal::Agent { agent: a, .. } if *a == agent));
    }

    /// An egress key for the server the daemon starts for `who`: the
    /// proxy password (user `mcp`) that lets the server reach its
    /// manifest's `egress` hosts and nothing else.
    pub fn issue_egress(&self, who: Principal, server: &str) -> String {
        let key = format!(
            "age_{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        self.egress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(blake3::hash(key.as_bytes()), (who, server.to_owned()));
        key
    }

    /// An egress key for one run of an organisation command tool called by
    /// `who` (proxy user [`crate::egress::TOOL_PROXY_USER`]); dropped with
    /// [`LaunchNonces::drop_tool_egress`] when the run ends.
    pub fn issue_tool_egress(&self, who: Principal) -> String {
        let key = format!(
            "agt_{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        );
        self.tool_egress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(blake3::hash(key.as_bytes()), who);
        key
    }

    /// The agent a tool's egress key was issued for, while its run lasts.
    pub fn tool_egress_of(&self, key: &str) -> Option<Principal> {
        self.tool_egress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&blake3::hash(key.as_bytes()))
            .copied()
    }

    pub fn drop_tool_egress(&self, key: &str) {
        self.tool_egress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&blake3::hash(key.as_bytes()));
    }

    /// The agent and server an egress key was issued for, if it is live.
    pub fn egress_of(&self, key: &str) -> Option<(Principal, String)> {
        self.egress
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&blake3::hash(key.as_bytes()))
            .cloned()
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
    st: &AppState,
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

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/launch/{name}", post(launch))
        .merge(crate::mcp_proxy::routes())
}

async fn launch(
    State(st): State<Arc<AppState>>,
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

    #[test]
    fn an_egress_key_names_its_agent_and_server_until_the_agent_ends() {
        let n = LaunchNonces::default();
        let h = agency_core::HandlerId(uuid::Uuid::new_v4());
        let (a, b) = (AgentId(uuid::Uuid::new_v4()), AgentId(uuid::Uuid::new_v4()));
        let ka = n.issue_egress(Principal::agent(h, a), "web");
        let kb = n.issue_egress(Principal::agent(h, b), "web");
        assert_eq!(
            n.egress_of(&ka),
            Some((Principal::agent(h, a), "web".to_owned()))
        );
        assert_eq!(n.egress_of("age_made_up"), None);
        n.forget_agent(a);
        assert_eq!(n.egress_of(&ka), None, "the agent ended");
        assert!(n.egress_of(&kb).is_some(), "another agent's key stays");
    }
}
