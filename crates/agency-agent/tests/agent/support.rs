//! Fixtures for running the real agent loop end to end: a real Agency
//! daemon in-process (its `/mcp` with real token auth), an agent token
//! minted for the root handler, the testkit's scripted model server, and
//! an [`AgentConfig`] pointing at both.

use std::path::PathBuf;
use std::sync::Arc;

use agency_agent::{AgentConfig, Api, RetryConfig, RunSummary, Secrets};
use agency_config::Home;
use agency_core::{AgentId, HandlerId, Principal};
use agency_daemon::Daemon;
use agency_testkit::{ModelServer, Script};
use serde_json::Value;

/// The API key every test run uses; never to be found in what a run writes.
pub const API_KEY: &str = "sk-test-DO-NOT-LEAK-4f1c9a7e2b";

pub struct Agency {
    pub dir: tempfile::TempDir,
    pub daemon: Daemon,
    pub root: HandlerId,
    pub agent: AgentId,
    pub token: String,
}

impl Agency {
    /// A fresh home, its daemon on 127.0.0.1:0, and a live agent of the root
    /// handler with a token and a workspace.
    pub async fn start() -> Agency {
        let dir = tempfile::tempdir().expect("tempdir");
        let home = Home::new(dir.path().join("home"));
        home.init().expect("init home");
        let daemon = Daemon::start(&home).await.expect("start daemon");
        let svc = daemon.service().clone();
        let root = svc.bootstrap().expect("root handler");
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).expect("workspace");
        let minted = svc
            .agent_start_with_token(root, Some(&ws))
            .expect("mint token");
        Agency {
            dir,
            daemon,
            root,
            agent: minted.agent,
            token: minted.token,
        }
    }

    pub fn mcp_url(&self) -> String {
        format!("http://{}/mcp", self.daemon.addr())
    }

    pub fn svc(&self) -> &Arc<agency_service::System> {
        self.daemon.service()
    }

    /// The root handler's live agent, as the service knows it.
    pub fn me(&self) -> Principal {
        Principal::agent(self.root, self.agent)
    }

    /// A configuration for `api` against `base_url`, writing into the temp
    /// dir, with fast retries.
    pub fn config(&self, api: Api, base_url: &str, system_prompt: &str) -> AgentConfig {
        AgentConfig {
            api,
            base_url: base_url.to_owned(),
            model: "scripted".into(),
            api_key_env: Some("AGENCY_TEST_UNUSED_KEY".into()),
            max_turns: 20,
            max_total_tokens: 1_000_000,
            max_output_tokens: 1024,
            mcp_url: self.mcp_url(),
            mcp_token_env: "AGENCY_TEST_UNUSED_TOKEN".into(),
            system_prompt: system_prompt.to_owned(),
            initial_message: "You have mail. Work on your outcomes.".into(),
            transcript_path: Some(self.dir.path().join("run/transcript.jsonl")),
            result_path: Some(self.dir.path().join("run/result.json")),
            retry: RetryConfig {
                max_attempts: 4,
                initial_backoff_ms: 10,
                max_backoff_ms: 200,
            },
            request_timeout_secs: 20,
            mcp_servers: Vec::new(),
            workspace_tools: agency_agent::WORKSPACE_TOOLS
                .iter()
                .map(|t| (*t).to_owned())
                .collect(),
            workspace: Some(self.dir.path().join("ws")),
            keep_warm_ms: 0,
        }
    }

    pub fn secrets(&self) -> Secrets {
        Secrets {
            api_key: Some(API_KEY.into()),
            mcp_token: self.token.clone(),
        }
    }

    pub async fn stop(self) {
        self.daemon.stop().await.expect("stop daemon");
    }
}

/// Start the scripted model server.
pub async fn model_server(script: &str) -> ModelServer {
    let script = Script::from_json(script).expect("script");
    ModelServer::start(script).await.expect("model server")
}

/// The transcript's events, parsed.
pub fn transcript(cfg: &AgentConfig) -> Vec<Value> {
    let path = cfg.transcript_path.as_ref().expect("transcript path");
    std::fs::read_to_string(path)
        .expect("read transcript")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// The events of one kind.
pub fn events<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines.iter().filter(|l| l["event"] == kind).collect()
}

/// The summary as written to `result_path`.
pub fn result_file(cfg: &AgentConfig) -> RunSummary {
    let path: &PathBuf = cfg.result_path.as_ref().expect("result path");
    serde_json::from_slice(&std::fs::read(path).expect("read result")).expect("result JSON")
}

/// One request a [`capture_server`] received.
#[derive(Debug, Clone)]
pub struct Captured {
    pub path: String,
    pub headers: axum::http::HeaderMap,
    pub body: Value,
}

/// A hand-written model server: records every request and answers with
/// `answer(n, body)` = (status, content type, body), `n` counting from 0.
/// For what the scripted server cannot do (show request bodies and
/// headers, echo secrets back in errors).
pub struct CaptureServer {
    pub base_url: String,
    pub requests: Arc<std::sync::Mutex<Vec<Captured>>>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

impl CaptureServer {
    pub fn requests(&self) -> Vec<Captured> {
        self.requests.lock().expect("lock").clone()
    }
}

pub async fn capture_server(
    answer: impl Fn(usize, &Value) -> (u16, &'static str, String) + Send + Sync + 'static,
) -> CaptureServer {
    let requests = Arc::new(std::sync::Mutex::new(Vec::new()));
    let answer = Arc::new(answer);
    let recorded = requests.clone();
    let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
        let recorded = recorded.clone();
        let answer = answer.clone();
        async move {
            let (parts, body) = req.into_parts();
            let bytes = axum::body::to_bytes(body, 1 << 24)
                .await
                .unwrap_or_default();
            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            let n = {
                let mut r = recorded.lock().expect("lock");
                r.push(Captured {
                    path: parts.uri.path().to_owned(),
                    headers: parts.headers.clone(),
                    body: body.clone(),
                });
                r.len() - 1
            };
            let (status, content_type, text) = answer(n, &body);
            axum::response::Response::builder()
                .status(status)
                .header("content-type", content_type)
                .body(axum::body::Body::from(text))
                .expect("response")
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = rx.await;
            })
            .await;
    });
    CaptureServer {
        base_url: format!("http://{addr}"),
        requests,
        _stop: tx,
    }
}

/// An Anthropic SSE answer: optional text, then tool calls (name, input),
/// each input split in two `partial_json` pieces.
pub fn anthropic_sse(text: &str, calls: &[(&str, Value)]) -> String {
    let mut out = String::new();
    let mut ev = |name: &str, data: Value| {
        out.push_str(&format!("event: {name}\r\ndata: {data}\r\n\r\n"));
    };
    ev(
        "message_start",
        serde_json::json!({"type": "message_start", "message": {"usage": {"input_tokens": 11, "output_tokens": 1}}}),
    );
    let mut index = 0;
    if !text.is_empty() {
        ev(
            "content_block_start",
            serde_json::json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        );
        ev(
            "content_block_delta",
            serde_json::json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
        );
        ev(
            "content_block_stop",
            serde_json::json!({"type": "content_block_stop", "index": 0}),
        );
        index += 1;
    }
    for (i, (name, input)) in calls.iter().enumerate() {
        let json = input.to_string();
        let (a, b) = json.split_at(json.len() / 2);
        ev(
            "content_block_start",
            serde_json::json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": format!("toolu_{i}"), "name": name, "input": {}}}),
        );
        for piece in [a, b] {
            ev(
                "content_block_delta",
                serde_json::json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": piece}}),
            );
        }
        ev(
            "content_block_stop",
            serde_json::json!({"type": "content_block_stop", "index": index}),
        );
        index += 1;
    }
    let stop = if calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    ev(
        "message_delta",
        serde_json::json!({"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {"output_tokens": 7}}),
    );
    ev("message_stop", serde_json::json!({"type": "message_stop"}));
    out
}
