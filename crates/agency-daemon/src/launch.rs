//! `POST /launch/{name}`: the one place a secret leaves the daemon. The
//! caller is an agent's launcher (`agency mcp-launch NAME`) with the
//! agent's token; the service decides whether the agent's handler holds a
//! capability on `mcp_server:NAME` now; the answer is the server's
//! [`LaunchSpec`](crate::mcp_servers::LaunchSpec) with its secrets filled
//! in. Nothing here logs the answer.

use std::sync::Arc;

use agency_core::Principal;
use agency_mcp::AgentIdentity;
use axum::Extension;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;

use crate::http_auth::error;
use crate::rest::service_error;
use crate::server::AppState;

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new().route("/launch/{name}", post(launch))
}

async fn launch(
    State(st): State<Arc<AppState>>,
    Extension(id): Extension<AgentIdentity>,
    Path(name): Path<String>,
) -> Response {
    let svc = st.svc.clone();
    let who = Principal::agent(id.handler, id.agent);
    let n = name.clone();
    let checked = tokio::task::spawn_blocking(move || svc.mcp_server_check(who, &n)).await;
    match checked {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return service_error(&e),
        Err(_) => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "failed to check the capability: the check was cancelled",
            );
        }
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
        Some(Ok(spec)) => match serde_json::to_vec(&spec) {
            Ok(body) => (
                StatusCode::OK,
                [
                    (header::CONTENT_TYPE, "application/json"),
                    // Secrets inside: no cache anywhere may keep this.
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
        },
    }
}
