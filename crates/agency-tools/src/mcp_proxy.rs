//! `/mcp-proxy/{name}`: how an agent reaches an extra MCP server. The
//! agent's launcher bridges its stdio to this route with the agent's own
//! token, and every request is checked — the token, then the service's
//! `mcp_server_check` (the capability may be revoked between two
//! requests) — before it goes on. A stdio server is run by the daemon
//! (`mcp_stdio.rs`), outside the agent's sandbox, and each message handed
//! to it; an HTTP server's URL and headers (API keys, `${secret:…}`
//! filled in) stay in the daemon, which forwards with the headers added.
//! The agent's token is not forwarded.
//!
//! The proxy is also the guard (`mcp_guard.rs`): the JSON-RPC body is
//! parsed (and forwarded as parsed, so the server reads what was
//! checked); a `tools/call` is admitted or answered with the refusal as a
//! tool error result without reaching the server; the answer to a
//! `tools/list` or `tools/call` (JSON or SSE) is read whole, bounded, and
//! its response rewritten: the listing pinned and filtered, the result
//! checked against the output schema. Other answers of an HTTP server are
//! streamed back unbuffered.

use std::sync::Arc;
use std::time::Duration;

use agency_mcp::AgentIdentity;
use agency_sse::{SseError, SseEvent, SseParser};
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::response::Response;
use axum::routing::any;
use axum::{Extension, Router};
use serde_json::{Value, json};

use crate::Tools;
use crate::mcp_guard::{Refusal, admit_call, check_result, filter_tools, refusal_result};
use crate::mcp_stdio::StdioSpec;
use agency_config::ConfigError;
use agency_config::mcp_servers::LaunchSpec;
use agency_config::secrets::ExposeSecret;
use agency_http::error;

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

pub(crate) fn routes() -> Router<Arc<Tools>> {
    Router::new().route("/mcp-proxy/{name}", any(proxy))
}

/// The client the proxy forwards with: no redirects (a redirect would carry
/// the secret headers to wherever the server points), a connect timeout,
/// no overall timeout (SSE streams last).
pub(crate) fn client() -> Result<reqwest::Client, ConfigError> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| {
            ConfigError::io(
                "build the HTTP client of",
                "/mcp-proxy",
                std::io::Error::other(e),
            )
        })
}

async fn proxy(
    State(st): State<Arc<Tools>>,
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
        Some(Ok(LaunchSpec::Stdio { command, args, env })) => {
            let egress = matches!(st.servers.manifest(&name).as_deref(), Some(Ok(m)) if !m.manifest.egress.is_empty());
            let spec = StdioSpec {
                command,
                args,
                env,
                egress,
            };
            return stdio(&st, &id, &name, &spec, req).await;
        }
        Some(Ok(LaunchSpec::Proxy { .. })) => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                &format!("failed to reach MCP server {name}: it resolved to a proxy"),
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
        let (Ok(key), Ok(mut value)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v.expose_secret()),
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
        // Kept out of the HTTP client's debug output and HPACK tables.
        value.set_sensitive(true);
        headers.insert(key, value);
    }
    let method = req.method().clone();
    let mut body = match request_body(req, &name).await {
        Ok(b) => b,
        Err(refused) => return refused,
    };
    let inspect = if method == Method::POST {
        match guard_request(&st, &id, &name, &body).await {
            Ok((inspect, parsed)) => {
                // Re-encoded from what was parsed and checked.
                body = parsed.to_string().into();
                inspect
            }
            Err(answer) => return answer,
        }
    } else {
        Inspect::Nothing
    };
    let sent = st
        .proxy_client
        .request(method, url.expose_secret())
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
    let body = match inspect {
        Inspect::Nothing => Body::from_stream(upstream.bytes_stream()),
        inspect => {
            let sse = upstream
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("text/event-stream"));
            let bytes = match read_bounded(upstream).await {
                Ok(b) => b,
                Err(why) => {
                    return error(
                        StatusCode::BAD_GATEWAY,
                        "unavailable",
                        &format!("failed to read the answer of MCP server {name}: {why}"),
                    );
                }
            };
            Body::from(rewrite(&st, &id, &name, &inspect, &bytes, sse).await)
        }
    };
    out.body(body).unwrap_or_else(|e| {
        error(
            StatusCode::BAD_GATEWAY,
            "unavailable",
            &format!("failed to relay the answer of MCP server {name}: {e}"),
        )
    })
}

/// A stdio server's side of the proxy: the daemon runs the server
/// (`mcp_stdio.rs`) and talks JSON-RPC to it; one POSTed message is one
/// line to the server, and a request's answer comes back as JSON, checked
/// by the guard on its way. There is no stream for the server's own
/// messages (GET) and no session to end (DELETE).
async fn stdio(
    st: &Tools,
    id: &AgentIdentity,
    name: &str,
    spec: &StdioSpec,
    req: Request,
) -> Response {
    if req.method() != Method::POST {
        return Response::builder()
            .status(StatusCode::METHOD_NOT_ALLOWED)
            .header("allow", "POST")
            .body(Body::empty())
            .unwrap_or_else(|_| error(StatusCode::METHOD_NOT_ALLOWED, "invalid", "POST only"));
    }
    let body = match request_body(req, name).await {
        Ok(b) => b,
        Err(refused) => return refused,
    };
    let (inspect, msg) = match guard_request(st, id, name, &body).await {
        Ok(checked) => checked,
        Err(answer) => return answer,
    };
    let rpc_id = msg.get("method").and(msg.get("id")).cloned();
    match st.stdio.send(id, name, spec, msg).await {
        Ok(Some(answer)) => rpc_answer(&guard_response(st, id, name, &inspect, answer).await),
        Ok(None) => Response::builder()
            .status(StatusCode::ACCEPTED)
            .body(Body::empty())
            .unwrap_or_else(|_| error(StatusCode::ACCEPTED, "ok", "accepted")),
        Err(why) => match rpc_id {
            // A request is always answered, with the failure as its error.
            Some(rpc_id) => rpc_answer(&json!({"jsonrpc": "2.0", "id": rpc_id, "error": {
                "code": -32603, "message": why.to_string()
            }})),
            None => error(StatusCode::BAD_GATEWAY, "unavailable", &why.to_string()),
        },
    }
}

/// The request's body, at most [`MAX_REQUEST_BYTES`], or the refusal.
async fn request_body(req: Request, name: &str) -> Result<axum::body::Bytes, Response> {
    axum::body::to_bytes(req.into_body(), MAX_REQUEST_BYTES)
        .await
        .map_err(|_| {
            error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "invalid",
                &format!(
                    "failed to forward to MCP server {name}: the request body is over {MAX_REQUEST_BYTES} bytes or was cut off"
                ),
            )
        })
}

/// What the proxy must do with the answer to a request.
enum Inspect {
    Nothing,
    /// Pin and filter the listing answering request `id`.
    List(Value),
    /// Check the result of tool `.1` answering request `.0`.
    Call(Value, String),
}

/// The guard's look at a POSTed JSON-RPC message: the message to forward
/// (as parsed, so that the server cannot read anything else than what was
/// checked) and what to check in the answer; or the answer itself when the
/// request goes no further.
async fn guard_request(
    st: &Tools,
    id: &AgentIdentity,
    name: &str,
    body: &[u8],
) -> Result<(Inspect, Value), Response> {
    let msg: Value = serde_json::from_slice(body).map_err(|e| {
        error(
            StatusCode::BAD_REQUEST,
            "invalid",
            &format!("failed to forward to MCP server {name}: the body is not JSON ({e})"),
        )
    })?;
    if msg.is_array() {
        return Err(rpc_answer(&json!({"jsonrpc": "2.0", "id": null, "error": {
            "code": -32600,
            "message": "failed to forward a JSON-RPC batch: Agency's MCP guard takes one message per request"
        }})));
    }
    let method = msg.get("method").and_then(Value::as_str);
    let rpc_id = msg.get("id").cloned().filter(|_| method.is_some());
    let inspect = match (method, rpc_id) {
        (Some("tools/call"), Some(rpc_id)) => {
            let params = msg.get("params").cloned().unwrap_or(Value::Null);
            let tool = params
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            let args = params.get("arguments").cloned().unwrap_or(json!({}));
            match admit_call(st, id, name, &tool, &args).await {
                Ok(()) => Inspect::Call(rpc_id, tool),
                Err(Refusal::Agent(message)) => {
                    return Err(rpc_answer(&json!({
                        "jsonrpc": "2.0", "id": rpc_id, "result": refusal_result(&message)
                    })));
                }
                Err(Refusal::Http(r)) => return Err(r),
            }
        }
        (Some("tools/list"), Some(rpc_id)) => Inspect::List(rpc_id),
        _ => Inspect::Nothing,
    };
    Ok((inspect, msg))
}

fn rpc_answer(msg: &Value) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .body(Body::from(msg.to_string()))
        .unwrap_or_else(|_| {
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "failed to build an answer",
            )
        })
}

/// The whole answer, at most [`MAX_REQUEST_BYTES`].
async fn read_bounded(mut upstream: reqwest::Response) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    while let Some(chunk) = upstream
        .chunk()
        .await
        .map_err(|e| e.without_url().to_string())?
    {
        if out.len() + chunk.len() > MAX_REQUEST_BYTES {
            return Err(format!("it is over {MAX_REQUEST_BYTES} bytes"));
        }
        out.extend_from_slice(&chunk);
    }
    Ok(out)
}

/// The answer with the response to the inspected request rewritten by the
/// guard; every other message passes as it came. An SSE body is read by
/// Agency's SSE parser (`agency-sse`) and rebuilt event by event (an
/// event's `data` lines become one). Fail closed: what
/// does not parse as JSON is dropped, and if no response to the request
/// was seen, a JSON-RPC error answers it (the agent never gets an
/// unchecked listing or result, nor waits forever).
async fn rewrite(
    st: &Tools,
    id: &AgentIdentity,
    name: &str,
    inspect: &Inspect,
    body: &[u8],
    sse: bool,
) -> Vec<u8> {
    let want = match inspect {
        Inspect::Nothing => return body.to_vec(),
        Inspect::List(want) | Inspect::Call(want, _) => want.clone(),
    };
    let unanswered = || {
        json!({"jsonrpc": "2.0", "id": want, "error": {"code": -32603, "message": format!(
            "failed to get an answer from MCP server {name} that Agency could check"
        )}})
    };
    if !sse {
        let text = String::from_utf8_lossy(body);
        let msg = match serde_json::from_str::<Value>(&text) {
            Ok(msg) if msg.get("id") == Some(&want) => {
                guard_response(st, id, name, inspect, msg).await
            }
            _ => unanswered(),
        };
        return msg.to_string().into_bytes();
    }
    let mut out = String::new();
    let mut answered = false;
    // It fails only on a line over the cap, which a body bounded to the
    // same size cannot hold; were it to, nothing unchecked is forwarded
    // and the request is answered with the error below.
    for ev in sse_events(body).unwrap_or_default() {
        let payload = match serde_json::from_str::<Value>(&ev.data) {
            Ok(msg) => {
                answered |= msg.get("method").is_none() && msg.get("id") == Some(&want);
                Some(guard_response(st, id, name, inspect, msg).await.to_string())
            }
            Err(_) => None,
        };
        write_event(&mut out, &ev, payload.as_deref());
    }
    if !answered {
        out.push_str(&format!("event: message\ndata: {}\n\n", unanswered()));
    }
    out.into_bytes()
}

/// The events of a whole SSE answer. The last one counts without its
/// closing blank line (the server closed after writing it).
fn sse_events(body: &[u8]) -> Result<Vec<SseEvent>, SseError> {
    let mut parser = SseParser::new().with_max_line(MAX_REQUEST_BYTES);
    let mut events = parser.push(body)?;
    events.extend(parser.finish_with_unterminated_line());
    Ok(events)
}

/// One event as it is forwarded: its `event`, `id` and `retry` fields as
/// they came, its data replaced by `payload` (the checked message, on one
/// line; none when the data was not JSON). Comments are not forwarded.
fn write_event(out: &mut String, ev: &SseEvent, payload: Option<&str>) {
    use std::fmt::Write as _;
    // Each field value is one line: the parser split the text at every
    // line end, so none holds a CR or LF.
    if !ev.event.is_empty() {
        let _ = writeln!(out, "event: {}", ev.event);
    }
    if let Some(i) = &ev.id {
        let _ = writeln!(out, "id: {i}");
    }
    if let Some(r) = ev.retry {
        let _ = writeln!(out, "retry: {r}");
    }
    if let Some(p) = payload {
        let _ = writeln!(out, "data: {p}");
    }
    out.push('\n');
}

/// One JSON-RPC message of the answer, through the guard if it is the
/// response to the inspected request.
async fn guard_response(
    st: &Tools,
    id: &AgentIdentity,
    name: &str,
    inspect: &Inspect,
    mut msg: Value,
) -> Value {
    let (want, tool) = match inspect {
        Inspect::Nothing => return msg,
        Inspect::List(want) => (want, None),
        Inspect::Call(want, tool) => (want, Some(tool)),
    };
    if msg.get("method").is_some() || msg.get("id") != Some(want) {
        return msg;
    }
    let Some(result) = msg.get_mut("result").map(Value::take) else {
        return msg;
    };
    msg["result"] = match tool {
        Some(tool) => check_result(st, name, tool, result),
        None => match filter_tools(st, id, name, result).await {
            Ok(listing) => listing,
            Err(_) => {
                // No listing rather than an unchecked one.
                if let Value::Object(m) = &mut msg {
                    m.remove("result");
                    m.insert("error".to_owned(), json!({"code": -32603, "message": format!(
                        "failed to list the tools of MCP server {name}: Agency could not check them"
                    )}));
                }
                return msg;
            }
        },
    };
    msg
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// An SSE answer as the proxy forwards it, with every data field's
    /// message passed as it is.
    fn forwarded(body: &str) -> String {
        let mut out = String::new();
        for ev in sse_events(body.as_bytes()).unwrap() {
            let payload = serde_json::from_str::<Value>(&ev.data)
                .ok()
                .map(|m| m.to_string());
            write_event(&mut out, &ev, payload.as_deref());
        }
        out
    }

    #[test]
    fn events_are_rebuilt_with_their_fields_and_one_data_line() {
        let body = "event: message\nid: 3\ndata: {\"id\":\ndata:  1}\n\n: ping\n\nid: 0\nretry: 500\ndata:\n\n";
        assert_eq!(
            forwarded(body),
            "event: message\nid: 3\ndata: {\"id\":1}\n\nid: 0\nretry: 500\n\n"
        );
    }

    #[test]
    fn every_line_end_a_bom_and_a_last_event_without_its_blank_line() {
        let lf = "event: message\ndata: {\"id\":1}\n\ndata: {\"id\":2}\n";
        let want = "event: message\ndata: {\"id\":1}\n\ndata: {\"id\":2}\n\n";
        assert_eq!(forwarded(lf), want);
        assert_eq!(forwarded(&lf.replace('\n', "\r\n")), want);
        assert_eq!(
            forwarded(&format!("\u{feff}{}", lf.replace('\n', "\r"))),
            want
        );
        // The server closed right after its last write, mid-line.
        assert_eq!(forwarded(lf.trim_end()), want);
    }

    #[test]
    fn data_that_is_not_json_is_dropped_and_its_fields_kept() {
        assert_eq!(
            forwarded("event: message\ndata: {not json\n\n"),
            "event: message\n\n"
        );
    }
}
