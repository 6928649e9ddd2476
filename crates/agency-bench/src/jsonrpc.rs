//! A plain MCP client for items 1 and 2: reqwest speaking MCP's JSON-RPC
//! over streamable HTTP with the headers the transport asks for, and
//! nothing else (no session worker, no channels between tasks).
//!
//! It shows what a tool call costs the *server*: rmcp's own client adds a
//! few hundred microseconds per call on its side, which the server cannot
//! remove, so the items report both clients. It speaks the whole protocol
//! the servers need: `initialize` (keeping the session id if the server
//! assigns one, and the negotiated version for the `MCP-Protocol-Version`
//! header), `notifications/initialized`, then `tools/call`, and reads an
//! answer given either as JSON or as an SSE stream.

use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result, bail};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use serde_json::{Value, json};

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
/// The version this client asks for (the newest one with `initialize`).
const PROTOCOL: &str = "2025-11-25";

/// One initialized client.
pub struct Plain {
    http: reqwest::Client,
    url: String,
    headers: HeaderMap,
    next_id: AtomicU64,
}

impl Plain {
    pub async fn connect(url: &str, token: Option<&str>) -> Result<Plain> {
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(1)
            .tcp_nodelay(true)
            .build()
            .context("failed to build the HTTP client")?;
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        if let Some(t) = token {
            headers.insert(
                AUTHORIZATION,
                HeaderValue::from_str(&format!("Bearer {t}"))
                    .context("failed to put the token in a header")?,
            );
        }
        let mut client = Plain {
            http,
            url: url.to_owned(),
            headers,
            next_id: AtomicU64::new(1),
        };
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL,
            "capabilities": {},
            "clientInfo": {"name": "agency-bench-plain", "version": "1"},
        }});
        let resp = client.post(&init).await?;
        let session = resp.headers().get(SESSION_HEADER).cloned();
        let answer = read_answer(resp).await?;
        let version = answer["result"]["protocolVersion"]
            .as_str()
            .with_context(|| format!("failed to initialize with {url}: {answer}"))?
            .to_owned();
        if let Some(s) = session {
            client.headers.insert(SESSION_HEADER, s);
        }
        client.headers.insert(
            VERSION_HEADER,
            HeaderValue::from_str(&version).context("failed to use the negotiated version")?,
        );
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let resp = client.post(&note).await?;
        if !resp.status().is_success() {
            bail!("{url} refused notifications/initialized: {}", resp.status());
        }
        Ok(client)
    }

    async fn post(&self, body: &Value) -> Result<reqwest::Response> {
        let resp = self
            .http
            .post(&self.url)
            .headers(self.headers.clone())
            .body(serde_json::to_vec(body).context("failed to encode a request")?)
            .send()
            .await
            .with_context(|| format!("failed to POST to {}", self.url))?;
        Ok(resp)
    }

    /// Call `kb_read` and check the reply carries the whole file.
    pub async fn kb_read(&self, file: &str) -> Result<()> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "kb_read", "arguments": {"file": file}}});
        let resp = self.post(&call).await?;
        let answer = read_answer(resp).await?;
        let result = &answer["result"];
        let text: usize = result["content"]
            .as_array()
            .map(|c| {
                c.iter()
                    .filter_map(|b| b["text"].as_str().map(str::len))
                    .sum()
            })
            .unwrap_or(0);
        if answer["id"] != json!(id) || result["isError"] == json!(true) || text < 4096 {
            bail!("kb_read answered an error or a short reply: {answer}");
        }
        Ok(())
    }
}

/// The one JSON-RPC message of an answer, from a JSON body or from the
/// first event of an SSE stream whose data is a response (read by
/// Agency's SSE parser, as every event stream Agency reads).
async fn read_answer(resp: reqwest::Response) -> Result<Value> {
    let status = resp.status();
    let sse = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let body = resp.bytes().await.context("failed to read an answer")?;
    if !status.is_success() {
        bail!(
            "the server answered {status}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    if !sse {
        return serde_json::from_slice(&body).context("failed to parse a JSON answer");
    }
    let mut parser = agency_sse::SseParser::new();
    let mut events = parser.push(&body).context("failed to read an SSE answer")?;
    events.extend(parser.finish_with_unterminated_line());
    for ev in events {
        let Ok(msg) = serde_json::from_str::<Value>(&ev.data) else {
            continue;
        };
        if msg.get("result").is_some() || msg.get("error").is_some() {
            return Ok(msg);
        }
    }
    bail!(
        "the SSE answer carried no JSON-RPC response: {}",
        String::from_utf8_lossy(&body)
    )
}
