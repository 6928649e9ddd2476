//! `/mcp-proxy/{name}`: how an agent reaches an extra MCP server that
//! speaks HTTP. The server's headers (API keys, `${secret:…}` filled in)
//! and its URL stay in the daemon: the agent's launcher bridges stdio to
//! this route with the agent's own token, and every request is checked —
//! the token, then the service's `mcp_server_check` (the capability may be
//! revoked between two requests) — before it is forwarded with the
//! configured headers added. The agent's token is not forwarded. Responses
//! (JSON or an SSE stream) are streamed back unbuffered.

use std::sync::Arc;
use std::time::Duration;

use agency_mcp::AgentIdentity;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::Response;
use axum::routing::any;
use axum::{Extension, Router};

use crate::error::DaemonError;
use crate::http_auth::error;
use crate::mcp_servers::LaunchSpec;
use crate::server::AppState;

/// Request headers an MCP client needs the server to see (streamable HTTP).
const FORWARDED_REQUEST: &[&str] = &[
    "content-type",
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];
/// Response headers the client needs back.
const FORWARDED_RESPONSE: &[&str] = &["content-type", "mcp-session-id", "cache-control"];
/// JSON-RPC requests are small; this only bounds a hostile one.
const MAX_REQUEST_BYTES: usize = 16 << 20;

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new().route("/mcp-proxy/{name}", any(proxy))
}

/// The client the proxy forwards with: no redirects (a redirect would carry
/// the secret headers to wherever the server points), a connect timeout,
/// no overall timeout (SSE streams last).
pub(crate) fn client() -> Result<reqwest::Client, DaemonError> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| {
            DaemonError::io(
                "build the HTTP client of",
                "/mcp-proxy",
                std::io::Error::other(e),
            )
        })
}

async fn proxy(
    State(st): State<Arc<AppState>>,
    Extension(id): Extension<AgentIdentity>,
    Path(name): Path<String>,
    req: Request,
) -> Response {
    if let Err(refused) = crate::launch::check_server(&st, &id, &name).await {
        return refused;
    }
    let (url, configured) = match st.servers.resolve(&name) {
        None => {
            return error(
                StatusCode::NOT_FOUND,
                "not_found",
                &format!(
                    "failed to reach MCP server {name}: agency.toml declares no [mcp_servers.{name}]"
                ),
            );
        }
        Some(Ok(LaunchSpec::Http { url, headers })) => (url, headers),
        Some(Ok(_)) => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid",
                &format!(
                    "failed to reach MCP server {name}: it is a stdio server (command), started by its launcher, not an HTTP one"
                ),
            );
        }
        Some(Err(e)) => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                &format!("failed to reach MCP server {name}: {e}"),
            );
        }
    };
    let mut headers = HeaderMap::new();
    for k in FORWARDED_REQUEST {
        if let Some(v) = req.headers().get(*k) {
            headers.insert(*k, v.clone());
        }
    }
    for (k, v) in &configured {
        let (Ok(key), Ok(value)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) else {
            // The value may be a secret: not in the message.
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                &format!(
                    "failed to reach MCP server {name}: header {k:?} in agency.toml is not a valid HTTP header"
                ),
            );
        };
        headers.insert(key, value);
    }
    let method = req.method().clone();
    let body = match axum::body::to_bytes(req.into_body(), MAX_REQUEST_BYTES).await {
        Ok(b) => b,
        Err(_) => {
            return error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid",
                &format!(
                    "failed to forward to MCP server {name}: the request body is over {MAX_REQUEST_BYTES} bytes or was cut off"
                ),
            );
        }
    };
    let sent = st
        .proxy_client
        .request(method, &url)
        .headers(headers)
        .body(body)
        .send()
        .await;
    let upstream = match sent {
        Ok(r) => r,
        Err(e) => {
            // The URL may hold a secret: left out of the message.
            return error(
                StatusCode::BAD_GATEWAY,
                "unavailable",
                &format!(
                    "failed to reach MCP server {name} at its configured URL: {}",
                    e.without_url()
                ),
            );
        }
    };
    let mut out = Response::builder().status(upstream.status());
    for k in FORWARDED_RESPONSE {
        if let Some(v) = upstream.headers().get(*k) {
            out = out.header(*k, v.clone());
        }
    }
    out.body(Body::from_stream(upstream.bytes_stream()))
        .unwrap_or_else(|e| {
            error(
                StatusCode::BAD_GATEWAY,
                "unavailable",
                &format!("failed to relay the answer of MCP server {name}: {e}"),
            )
        })
}
