//! A real Agency (SQLite store, blob store, service, bootstrapped root
//! handler with a live agent) behind the MCP router on a loopback port,
//! and an rmcp streamable-HTTP client talking to it.

use std::path::PathBuf;
use std::sync::Arc;

use agency_core::{AgentId, HandlerId, Limits};
use agency_mcp::{AgentIdentity, CancellationToken, router};
use agency_service::{Service, ServiceConfig, System, SystemClock};
use agency_store::{FsBlobStore, SqliteStore};
use axum::serve::ListenerExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};
use serde_json::Value;

pub type Client = RunningService<RoleClient, ()>;

pub struct Agency {
    pub _dir: tempfile::TempDir,
    /// What the MCP router is given: the caller-checked service.
    pub svc: Arc<Service>,
    /// The daemon's side: starting agents and the like.
    pub sys: System,
    pub root: HandlerId,
    pub agent: AgentId,
    /// The agent's workspace: `notes.md`, a symlink `pw` to /etc/passwd and
    /// a symlinked directory `etc` to /etc.
    pub ws: PathBuf,
}

impl Agency {
    pub fn new() -> Agency {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = SqliteStore::open(&dir.path().join("agency.db")).expect("open store");
        let blobs = FsBlobStore::open(dir.path().join("blobs")).expect("open blobs");
        let sys = Service::builder(Arc::new(store), Arc::new(blobs), Arc::new(SystemClock))
            .config(ServiceConfig {
                limits: Limits::default(),
                ..ServiceConfig::default()
            })
            .build();
        let svc = sys.service().clone();
        let root = sys.bootstrap().expect("bootstrap");
        let agent = sys.agent_start(root).expect("start agent");
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).expect("workspace");
        std::fs::write(ws.join("notes.md"), "# Notes\nfrom the workspace\n").expect("notes");
        std::os::unix::fs::symlink("/etc/passwd", ws.join("pw")).expect("symlink");
        std::os::unix::fs::symlink("/etc", ws.join("etc")).expect("symlink dir");
        Agency {
            _dir: dir,
            svc,
            sys,
            root,
            agent,
            ws,
        }
    }

    /// The identity of the root handler's live agent.
    pub fn identity(&self) -> AgentIdentity {
        AgentIdentity {
            handler: self.root,
            agent: self.agent,
            workspace: Some(self.ws.clone()),
        }
    }
}

/// A running MCP endpoint; stops when dropped.
pub struct Server {
    pub url: String,
    stop: CancellationToken,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Serve `router(svc)` on 127.0.0.1:0. `identity`, when given, is put in
/// every request's extensions, as the daemon's token middleware would.
pub async fn serve(svc: Arc<Service>, identity: Option<AgentIdentity>) -> Server {
    serve_as(svc, move |_| identity.clone()).await
}

/// Serve with the identity chosen per request by `pick` (a stand-in for
/// the daemon's token lookup).
pub async fn serve_as(
    svc: Arc<Service>,
    pick: impl Fn(&axum::extract::Request) -> Option<AgentIdentity> + Clone + Send + Sync + 'static,
) -> Server {
    serve_with(router(svc), pick).await
}

/// Serve a given MCP router with a fixed identity.
pub async fn serve_router(app: axum::Router, identity: AgentIdentity) -> Server {
    serve_with(app, move |_| Some(identity.clone())).await
}

async fn serve_with(
    app: axum::Router,
    pick: impl Fn(&axum::extract::Request) -> Option<AgentIdentity> + Clone + Send + Sync + 'static,
) -> Server {
    let app = app.layer(axum::middleware::from_fn(
        move |mut req: axum::extract::Request, next: axum::middleware::Next| {
            if let Some(identity) = pick(&req) {
                req.extensions_mut().insert(identity);
            }
            next.run(req)
        },
    ));
    // TCP_NODELAY: without it every SSE reply waits on Nagle + delayed ACK
    // (DESIGN §4: 44 ms per call).
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("local addr");
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    let stop = CancellationToken::new();
    let stopped = stop.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move { stopped.cancelled_owned().await })
            .await;
    });
    Server {
        url: format!("http://{addr}/mcp"),
        stop,
    }
}

/// Connect and initialize an rmcp client.
pub async fn connect(url: &str) -> Result<Client, rmcp::service::ClientInitializeError> {
    ().serve(StreamableHttpClientTransport::from_uri(url.to_owned()))
        .await
}

/// Call a tool with JSON arguments; a protocol error fails the test.
pub async fn call(client: &Client, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else {
        panic!("arguments must be a JSON object");
    };
    client
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .unwrap_or_else(|e| panic!("{tool}: protocol error {e}"))
}

/// The single text block of a result.
pub fn text(r: &CallToolResult) -> &str {
    &r.content
        .first()
        .and_then(|c| c.as_text())
        .expect("a text block")
        .text
}

/// A successful result's JSON.
#[track_caller]
pub fn ok(r: &CallToolResult) -> Value {
    assert_eq!(r.is_error, Some(false), "tool failed: {}", text(r));
    let v: Value = serde_json::from_str(text(r)).expect("JSON text");
    if let Some(s) = &r.structured_content {
        assert_eq!(s, &v, "structured content differs from the text");
    }
    v
}

/// A failed result's text, which must contain `needle`.
#[track_caller]
pub fn err(r: &CallToolResult, needle: &str) -> String {
    assert_eq!(r.is_error, Some(true), "tool succeeded: {}", text(r));
    let t = text(r).to_owned();
    assert!(t.contains(needle), "{t:?} does not contain {needle:?}");
    t
}

/// One raw HTTP/1.1 POST to the endpoint (for what the rmcp client will
/// not do, like switching identity inside a session); returns the whole
/// response as text.
pub async fn raw_post(url: &str, headers: &[(&str, &str)], body: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let addr = url.trim_start_matches("http://").trim_end_matches("/mcp");
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).await.expect("write");
    let mut resp = String::new();
    tokio::time::timeout(
        std::time::Duration::from_secs(10),
        s.read_to_string(&mut resp),
    )
    .await
    .expect("response within 10 s")
    .expect("read");
    resp
}
