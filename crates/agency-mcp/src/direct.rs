//! The endpoint's direct path: a plain `tools/call` of one of
//! Agency's own tools is answered here, on the connection's task, without
//! rmcp's per-request machinery; everything else goes to rmcp unchanged.
//!
//! Why: in stateless mode rmcp serves each POST by building a server
//! object, spawning a task that runs a one-message transport, and passing
//! the answer back through a channel — two task hand-offs and several
//! allocations around a `kb_read` whose work is tens of microseconds. The
//! direct path parses the JSON-RPC request, runs the same tool function
//! (`tools::execute`, with the same identity, charging and span) and writes
//! the same JSON answer rmcp would.
//!
//! It takes only requests it is sure of and hands rmcp the rest, so every
//! protocol rule stays rmcp's: any method but POST, any JSON-RPC method but
//! `tools/call`, organisation tools and `mail_wait`, batches, an `Origin`
//! header, a `Host` it cannot match to the allowed list exactly, a missing
//! or unknown `MCP-Protocol-Version`, `_meta` beyond a progress token (the
//! 2026-07-28 per-request metadata among it),
//! SEP-2243 `Mcp-Method`/`Mcp-Param-*` headers, a body without a length or
//! over the limit, and anything it cannot parse. A request it passes on
//! loses nothing: its body is read once and given to rmcp whole.

use std::collections::HashMap;
use std::sync::Arc;

use agency_service::Service;
use axum::body::{Body, Bytes};
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, Method, Request, StatusCode, header};
use rmcp::transport::streamable_http_server::StreamableHttpService;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::Value;

use crate::AgentIdentity;
use crate::server::AgencyMcp;
use crate::tools::{DirectFn, Invocation};

/// The protocol versions whose `tools/call` the direct path answers: the
/// ones without per-request protocol metadata. A newer version goes to
/// rmcp, which knows its rules.
const DIRECT_VERSIONS: &[&str] = &["2025-03-26", "2025-06-18", "2025-11-25"];

/// What the direct path shares with every request.
pub(crate) struct Endpoint {
    pub svc: Arc<Service>,
    pub repos: Option<Arc<dyn crate::RepoCache>>,
    pub direct: Arc<HashMap<&'static str, DirectFn>>,
    pub allowed_hosts: Arc<Vec<String>>,
    pub max_body: usize,
    pub rmcp: StreamableHttpService<AgencyMcp, LocalSessionManager>,
}

/// The handler of the MCP path: direct when it can, rmcp otherwise.
pub(crate) async fn serve(endpoint: Arc<Endpoint>, request: Request<Body>) -> Response {
    if !takes(&endpoint, &request) {
        return endpoint.rmcp.handle(request).await.into_response();
    }
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, endpoint.max_body).await {
        Ok(b) => b,
        // The client went away or sent more than it announced: nothing to
        // pass on either.
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("failed to read the request body: {e}"),
            )
                .into_response();
        }
    };
    let identity = parts.extensions.get::<AgentIdentity>().cloned();
    match (identity, plan(&endpoint, &bytes)) {
        (Some(identity), Some((id, tool, arguments))) => {
            let call = Invocation {
                svc: endpoint.svc.clone(),
                identity,
                repos: endpoint.repos.clone(),
                arguments,
            };
            let result = tool(call).await;
            answer(id, result)
        }
        _ => {
            let request = Request::from_parts(parts, Body::from(bytes));
            endpoint.rmcp.handle(request).await.into_response()
        }
    }
}

/// Whether the request's line and headers allow the direct path (the body
/// is checked by [`plan`]).
fn takes(endpoint: &Endpoint, request: &Request<Body>) -> bool {
    let h = request.headers();
    request.method() == Method::POST
        && !h.contains_key(header::ORIGIN)
        && host_allowed(h, &endpoint.allowed_hosts)
        && content_length(h).is_some_and(|n| n <= endpoint.max_body)
        && is_json(h)
        && accepts_json_and_sse(h)
        && h.get("mcp-protocol-version")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| DIRECT_VERSIONS.contains(&v))
        // Any other MCP header (SEP-2243's Mcp-Method, Mcp-Param-*) has
        // rules of its own: rmcp checks them.
        && h.keys().all(|k| {
            let k = k.as_str();
            !k.starts_with("mcp-") || k == "mcp-protocol-version" || k == "mcp-session-id"
        })
}

/// A call the direct path answers: the request's id, the tool, its
/// arguments.
type Planned = (Value, DirectFn, Option<serde_json::Map<String, Value>>);

/// The request's id, tool and arguments, when the body is one plain
/// `tools/call` of a tool on the direct path; `None` passes it to rmcp.
fn plan(endpoint: &Endpoint, bytes: &Bytes) -> Option<Planned> {
    let Value::Object(mut message) = serde_json::from_slice::<Value>(bytes).ok()? else {
        return None;
    };
    if message.len() != 4
        || message.get("jsonrpc")? != "2.0"
        || message.get("method")? != "tools/call"
    {
        return None;
    }
    let id = message.remove("id")?;
    if !(id.is_string() || id.is_i64() || id.is_u64()) {
        return None;
    }
    let Value::Object(mut params) = message.remove("params")? else {
        return None;
    };
    if params
        .keys()
        .any(|k| k != "name" && k != "arguments" && k != "_meta")
    {
        return None;
    }
    // rmcp's client puts a progress token on every request. Agency sends
    // no progress notifications (they are optional), so a `_meta` holding
    // only that is taken; any other metadata (the 2026-07-28 protocol's
    // per-request version, client info) is rmcp's to judge.
    match params.remove("_meta") {
        None => {}
        Some(Value::Object(meta)) if meta.keys().all(|k| k == "progressToken") => {}
        Some(_) => return None,
    }
    let Value::String(name) = params.remove("name")? else {
        return None;
    };
    let tool = endpoint.direct.get(name.as_str())?.clone();
    let arguments = match params.remove("arguments") {
        None | Some(Value::Null) => None,
        Some(Value::Object(a)) => Some(a),
        Some(_) => return None,
    };
    Some((id, tool, arguments))
}

/// The JSON-RPC answer, as rmcp writes it in JSON-response mode.
fn answer(id: Value, mut result: rmcp::model::CallToolResult) -> Response {
    // The versions served here predate `resultType`: rmcp leaves it out for
    // them, and so do we.
    result.result_type = None;
    let body = serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result});
    match serde_json::to_vec(&body) {
        Ok(bytes) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            bytes,
        )
            .into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("failed to serialize the tool result: {e}"),
        )
            .into_response(),
    }
}

fn content_length(h: &HeaderMap) -> Option<usize> {
    h.get(header::CONTENT_LENGTH)?.to_str().ok()?.parse().ok()
}

fn is_json(h: &HeaderMap) -> bool {
    h.get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            let essence = v.split_once(';').map_or(v, |(e, _)| e);
            essence.trim().eq_ignore_ascii_case("application/json")
        })
}

/// Both media types listed, without parameters or weights (anything
/// fancier is rmcp's to judge).
fn accepts_json_and_sse(h: &HeaderMap) -> bool {
    let (mut json, mut sse) = (false, false);
    for v in h.get_all(header::ACCEPT) {
        let Ok(v) = v.to_str() else { return false };
        for item in v.split(',') {
            let item = item.trim();
            if item.contains(';') {
                return false;
            }
            json |= item.eq_ignore_ascii_case("application/json");
            sse |= item.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json && sse
}

/// The `Host` header names an allowed host exactly: an entry without a port
/// matches the host on any port, an entry with one matches host and port.
/// Anything unusual (no header, IPv6 spelling, user info) is left to rmcp.
fn host_allowed(h: &HeaderMap, allowed: &[String]) -> bool {
    let Some(host) = h.get(header::HOST).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let name = match host.rsplit_once(':') {
        Some((name, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => name,
        Some(_) => return false,
        None => host,
    };
    if name.is_empty() || name.contains(['[', ']', '@', ':']) {
        return false;
    }
    allowed
        .iter()
        .any(|a| a.eq_ignore_ascii_case(name) || a.eq_ignore_ascii_case(host))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn host_matching_is_exact_and_conservative() {
        let allowed = vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "::1".to_owned(),
        ];
        let cases = [
            ("127.0.0.1:4242", true),
            ("localhost", true),
            ("LOCALHOST:1", true),
            ("evil.example:4242", false),
            ("127.0.0.1.evil.example", false),
            ("[::1]:4242", false), // rmcp judges IPv6 spellings
            ("user@127.0.0.1:1", false),
            ("127.0.0.1:", false),
            ("127.0.0.1:x", false),
        ];
        for (host, want) in cases {
            assert_eq!(
                host_allowed(&headers(&[("host", host)]), &allowed),
                want,
                "{host}"
            );
        }
        assert!(!host_allowed(&HeaderMap::new(), &allowed));
        let with_port = vec!["127.0.0.1:80".to_owned()];
        assert!(host_allowed(
            &headers(&[("host", "127.0.0.1:80")]),
            &with_port
        ));
        assert!(!host_allowed(
            &headers(&[("host", "127.0.0.1:81")]),
            &with_port
        ));
    }

    #[test]
    fn accept_must_list_both_types_plainly() {
        let cases = [
            ("application/json, text/event-stream", true),
            ("text/event-stream,application/json", true),
            ("application/json", false),
            ("application/json;q=0, text/event-stream", false),
            ("*/*", false),
        ];
        for (accept, want) in cases {
            assert_eq!(
                accepts_json_and_sse(&headers(&[("accept", accept)])),
                want,
                "{accept}"
            );
        }
    }

    #[test]
    fn content_type_essence_is_json() {
        assert!(is_json(&headers(&[(
            "content-type",
            "application/json; charset=utf-8"
        )])));
        assert!(!is_json(&headers(&[("content-type", "text/plain")])));
        assert!(!is_json(&HeaderMap::new()));
    }
}
