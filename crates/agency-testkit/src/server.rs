//! The HTTP server: routes for both APIs, the request log, and the
//! [`ModelServer`] handle tests hold.
//!
//! Every model request (Messages or chat completions, answered or refused)
//! is recorded so a test can assert on what the client asked and what it was
//! told; probes (`HEAD /`), token counting and the log itself are not, to
//! keep that record about conversations.

use crate::anthropic;
use crate::engine::{Engine, Failure, Outcome, Reply, tokens};
use crate::openai;
use crate::script::Script;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Which API a request came in by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Api {
    /// `POST /v1/messages`.
    #[serde(rename = "anthropic")]
    Anthropic,
    /// `POST /v1/chat/completions`.
    #[serde(rename = "openai")]
    OpenAi,
}

/// One model request the server received and what it answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedRequest {
    pub api: Api,
    /// The `model` the client asked for (empty when absent).
    pub model: String,
    pub stream: bool,
    /// The scenario that answered; None for the fallback, for an unmatched
    /// conversation, and for a request that could not be read.
    pub scenario: Option<String>,
    /// The conversation position: assistant messages already present
    /// (0-based; the first request of a conversation is turn 0).
    pub turn: usize,
    /// The 0-based index in the scenario's `turns` that was played (an
    /// error turn included); None for the fallback, `after_last` or the
    /// end-of-script text.
    pub script_turn: Option<usize>,
    /// The HTTP status answered.
    pub status: u16,
    /// The names of the tools the client offered, as it spelled them.
    pub tools: Vec<String>,
    /// The tool calls answered, with the names as sent (mapped to the
    /// offered `mcp__…__NAME` spelling when that is what the client offered).
    pub tool_calls: Vec<RecordedToolCall>,
    /// The text answered, if any.
    pub text: Option<String>,
    /// The error message answered, for statuses other than 200.
    pub error: Option<String>,
    /// The credential the client sent (`x-api-key`, else the bearer of
    /// `Authorization`), so that a test can tell which key reached the
    /// model (e.g. the provider key a gateway added).
    #[serde(default)]
    pub credential: Option<String>,
    /// The request body as sent (lossy UTF-8), so that a test can tell
    /// what reached the model's context.
    #[serde(default)]
    pub body: String,
}

/// A tool call the server answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedToolCall {
    pub name: String,
    pub input: Value,
}

#[derive(Debug)]
struct Shared {
    engine: Engine,
    records: Mutex<Vec<RecordedRequest>>,
}

impl Shared {
    fn records(&self) -> std::sync::MutexGuard<'_, Vec<RecordedRequest>> {
        // Pushing a record cannot be interrupted half-way, so a poisoned
        // lock still holds a consistent list.
        self.records
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A running scripted model server on 127.0.0.1. Dropping it stops the
/// server too; [`ModelServer::shutdown`] also waits until it has stopped.
#[derive(Debug)]
pub struct ModelServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<io::Result<()>>>,
}

impl ModelServer {
    /// Starts serving `script` on 127.0.0.1 at a free port.
    pub async fn start(script: Script) -> io::Result<ModelServer> {
        ModelServer::start_on(script, 0).await
    }

    /// Starts serving `script` on 127.0.0.1:`port` (0 = any free port).
    pub async fn start_on(script: Script, port: u16) -> io::Result<ModelServer> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port))
            .await
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("failed to bind the model server to 127.0.0.1:{port}: {e}"),
                )
            })?;
        ModelServer::serve_on(script, listener)
    }

    /// Starts serving `script` on a listener the caller bound, for a script
    /// that must name the server's own port: bind port 0, read the port,
    /// write the script, then serve (re-binding a port once freed can find
    /// it taken).
    pub fn start_on_listener(
        script: Script,
        listener: std::net::TcpListener,
    ) -> io::Result<ModelServer> {
        listener.set_nonblocking(true)?;
        ModelServer::serve_on(script, TcpListener::from_std(listener)?)
    }

    fn serve_on(script: Script, listener: TcpListener) -> io::Result<ModelServer> {
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            engine: Engine::new(script),
            records: Mutex::new(Vec::new()),
        });
        let (stop, stopped) = oneshot::channel::<()>();
        let app = router(shared.clone());
        // Without TCP_NODELAY a small streamed reply can wait ~40 ms for
        // Nagle and delayed ACK (measured; see DESIGN.md §4).
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let task = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    // A dropped sender (the handle dropped) stops it too.
                    let _ = stopped.await;
                })
                .await
        });
        Ok(ModelServer {
            addr,
            shared,
            stop: Some(stop),
            task: Some(task),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash: use it as
    /// `ANTHROPIC_BASE_URL`, or append `/v1` for OpenAI-style clients.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every model request received so far, in the order answered.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.records().clone()
    }

    /// Stops accepting, lets requests in flight finish, and waits.
    pub async fn shutdown(mut self) {
        let _ = self.stop_and_wait().await;
    }

    async fn stop_and_wait(&mut self) -> io::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.task.take() {
            Some(task) => task
                .await
                .map_err(|e| io::Error::other(format!("failed to run the model server: {e}")))?,
            None => Ok(()),
        }
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Serves `script` on 127.0.0.1:`port` until `shutdown` completes (e.g.
/// ctrl-c), then stops gracefully. Returns early with the error if the
/// server itself fails.
pub async fn serve(
    script: Script,
    port: u16,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let mut server = ModelServer::start_on(script, port).await?;
    let Some(mut task) = server.task.take() else {
        return Ok(());
    };
    tokio::select! {
        () = shutdown => {
            server.task = Some(task);
            server.stop_and_wait().await
        }
        finished = &mut task => finished
            .map_err(|e| io::Error::other(format!("failed to run the model server: {e}")))?,
    }
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        // Some Claude Code releases probe the base URL first; `get` also
        // answers HEAD.
        .route("/", get(root))
        .route("/v1/messages", post(messages))
        .route("/v1/messages/count_tokens", post(count_tokens))
        .route("/v1/chat/completions", post(chat_completions))
        // For OpenAI clients configured with a base URL lacking `/v1`.
        .route("/chat/completions", post(chat_completions))
        .route("/v1/models", get(models))
        // Deterministic embeddings, for both base-URL styles.
        .route("/v1/embeddings", post(crate::embeddings::embeddings))
        .route("/embeddings", post(crate::embeddings::embeddings))
        .route("/_agency/requests", get(recorded))
        .fallback(not_found)
        // Long agent conversations exceed axum's 2 MB default.
        .layer(DefaultBodyLimit::max(256 << 20))
        .with_state(shared)
}

async fn root() -> &'static str {
    "agency-testkit scripted model server\n"
}

async fn messages(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    answer(&shared, Api::Anthropic, &body, credential(&headers))
}

async fn chat_completions(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    answer(&shared, Api::OpenAi, &body, credential(&headers))
}

/// `x-api-key`, else the token of `Authorization: Bearer`.
fn credential(h: &HeaderMap) -> Option<String> {
    if let Some(k) = h.get("x-api-key").and_then(|v| v.to_str().ok()) {
        return Some(k.to_owned());
    }
    h.get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.strip_prefix("Bearer ").unwrap_or(v).to_owned())
}

async fn count_tokens(body: Bytes) -> Response {
    match read_body(&body).and_then(|request| anthropic::conversation(&request)) {
        Ok(conv) => Json(json!({"input_tokens": tokens(conv.input_chars)})).into_response(),
        Err(message) => error_response(Api::Anthropic, &Failure::bad_request(message)),
    }
}

async fn models() -> Json<Value> {
    // One body that reads as a model list in both APIs' shapes.
    let model = json!({
        "id": "scripted",
        "object": "model",
        "type": "model",
        "display_name": "Scripted model",
        "created": 0,
        "created_at": "1970-01-01T00:00:00Z",
        "owned_by": "agency-testkit",
    });
    Json(json!({
        "object": "list",
        "data": [model],
        "has_more": false,
        "first_id": "scripted",
        "last_id": "scripted",
    }))
}

async fn recorded(State(shared): State<Arc<Shared>>) -> Json<Vec<RecordedRequest>> {
    Json(shared.records().clone())
}

async fn not_found(method: Method, uri: Uri) -> Response {
    let message = format!(
        "failed to route {method} {}: the scripted model server answers POST /v1/messages \
         and POST /v1/chat/completions",
        uri.path()
    );
    (
        StatusCode::NOT_FOUND,
        Json(json!({"type": "error", "error": {"type": "not_found_error", "message": message}})),
    )
        .into_response()
}

fn read_body(body: &[u8]) -> Result<Value, String> {
    match serde_json::from_slice::<Value>(body) {
        Ok(value) if value.is_object() => Ok(value),
        Ok(_) => Err("failed to read the request: the body must be a JSON object".to_owned()),
        Err(e) => Err(format!(
            "failed to read the request: the body is not JSON: {e}"
        )),
    }
}

/// Reads, decides, records and renders one model request.
fn answer(shared: &Shared, api: Api, body: &[u8], credential: Option<String>) -> Response {
    let mut record = RecordedRequest {
        body: String::from_utf8_lossy(body).into_owned(),
        credential,
        api,
        model: String::new(),
        stream: false,
        scenario: None,
        turn: 0,
        script_turn: None,
        status: 200,
        tools: Vec::new(),
        tool_calls: Vec::new(),
        text: None,
        error: None,
    };
    let request = match read_body(body) {
        Ok(request) => request,
        Err(message) => return refuse(shared, record, Failure::bad_request(message)),
    };
    record.model = request["model"].as_str().unwrap_or_default().to_owned();
    record.stream = request["stream"].as_bool().unwrap_or(false);
    let conv = match api {
        Api::Anthropic => anthropic::conversation(&request),
        Api::OpenAi => openai::conversation(&request),
    };
    let conv = match conv {
        Ok(conv) => conv,
        Err(message) => return refuse(shared, record, Failure::bad_request(message)),
    };
    record.tools.clone_from(&conv.tools);
    let decision = shared.engine.decide(&conv);
    record.turn = decision.turn;
    record.scenario = decision.scenario;
    record.script_turn = decision.script_turn;
    let reply = match decision.outcome {
        Outcome::Fail(failure) => return refuse(shared, record, failure),
        Outcome::Reply(reply) => reply,
    };
    record.text.clone_from(&reply.text);
    record.tool_calls = reply
        .tool_calls
        .iter()
        .map(|c| RecordedToolCall {
            name: c.name.clone(),
            input: c.input.clone(),
        })
        .collect();
    let model = if record.model.is_empty() {
        "scripted"
    } else {
        record.model.as_str()
    };
    let response = render(api, &reply, model, record.stream, &request);
    shared.records().push(record);
    response
}

fn render(api: Api, reply: &Reply, model: &str, stream: bool, request: &Value) -> Response {
    match (api, stream) {
        (Api::Anthropic, false) => Json(anthropic::message(reply, model)).into_response(),
        (Api::Anthropic, true) => sse(anthropic::events(reply, model)),
        (Api::OpenAi, false) => Json(openai::completion(reply, model)).into_response(),
        (Api::OpenAi, true) => {
            let include_usage = request["stream_options"]["include_usage"]
                .as_bool()
                .unwrap_or(false);
            sse(openai::chunks(reply, model, include_usage))
        }
    }
}

/// An event stream whose events go out as separate chunks, so a client's
/// parser meets real chunk boundaries.
fn sse(events: Vec<String>) -> Response {
    let chunks = futures_util::stream::iter(
        events
            .into_iter()
            .map(|event| Ok::<_, Infallible>(Bytes::from(event))),
    );
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(chunks),
    )
        .into_response()
}

fn refuse(shared: &Shared, mut record: RecordedRequest, failure: Failure) -> Response {
    let api = record.api;
    record.status = failure.status;
    record.error = Some(failure.message.clone());
    shared.records().push(record);
    error_response(api, &failure)
}

fn error_response(api: Api, failure: &Failure) -> Response {
    let body = match api {
        Api::Anthropic => anthropic::error_body(failure),
        Api::OpenAi => openai::error_body(failure),
    };
    let status = StatusCode::from_u16(failure.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut headers = HeaderMap::new();
    if let Some(seconds) = failure.retry_after_seconds {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    (status, headers, Json(body)).into_response()
}
