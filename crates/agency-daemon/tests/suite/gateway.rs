//! Issue 11 items 1, 2 and 7, against a real daemon (port 0) and a loopback
//! upstream that stands for the provider: it records every request's
//! headers and body and answers fixed bytes, so forwarding can be checked
//! byte for byte. The provider key is a secret read from a file outside
//! the home: it reaches the upstream, never the agent (the answer, the
//! headers sent back) nor any file under the home. A missing or wrong
//! agent token gets 401 and nothing reaches the upstream. Usage rows of
//! both APIs, streamed and not, and the cost tree are checked exactly.

#![allow(clippy::unwrap_used)]

use crate::fixture;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use agency_core::Principal;
use agency_service::TokenUsage;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post as route_post;
use fixture::{delegate_new, home_with_config, start, wait_for};

const KEY: &str = "sk-provider-SECRET-0123456789abcdef";

const ANTHROPIC_JSON: &str = r#"{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"hi"}],"model":"claude-sonnet-4-5","stop_reason":"end_turn","usage":{"input_tokens":100,"output_tokens":20,"cache_creation_input_tokens":1000,"cache_read_input_tokens":2000}}"#;
const ANTHROPIC_SSE: &[&str] = &[
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_2\",\"model\":\"claude-sonnet-4-5\",\"usage\":{\"input_tokens\":7,\"cache_creation_input_tokens\":3,\"cache_read_input_tokens\":5,\"output_tokens\":1}}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hel",
    "lo\"}}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":9}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
];
const OPENAI_JSON: &str = r#"{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":50,"completion_tokens":6,"prompt_tokens_details":{"cached_tokens":10}}}"#;
const OPENAI_SSE: &[&str] = &[
    "data: {\"id\":\"c2\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"}}],\"usage\":null}\n\n",
    "data: {\"id\":\"c2\",\"choices\":[],\"usage\":{\"prompt_tokens\":30,\"completion_tokens\":4}}\n\n",
    "data: [DONE]\n\n",
];

#[derive(Clone, Default)]
struct Upstream {
    seen: Arc<Mutex<Vec<(String, HeaderMap, Bytes)>>>,
}

impl Upstream {
    async fn start() -> (Upstream, SocketAddr) {
        let up = Upstream::default();
        let record = |path: &'static str, up: Upstream| {
            move |headers: HeaderMap, body: Bytes| {
                let up = up.clone();
                async move {
                    let stream = serde_json::from_slice::<serde_json::Value>(&body)
                        .map(|v| v["stream"] == true)
                        .unwrap_or(false);
                    up.seen
                        .lock()
                        .unwrap()
                        .push((path.to_owned(), headers, body));
                    answer(path, stream)
                }
            }
        };
        let app = axum::Router::new()
            .route("/v1/messages", route_post(record("messages", up.clone())))
            .route(
                "/v1/messages/count_tokens",
                route_post(record("count_tokens", up.clone())),
            )
            .route(
                "/v1/chat/completions",
                route_post(record("chat", up.clone())),
            );
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(l, app).await });
        (up, addr)
    }

    fn seen(&self) -> Vec<(String, HeaderMap, Bytes)> {
        self.seen.lock().unwrap().clone()
    }
}

fn sse(parts: &'static [&'static str]) -> Response {
    let chunks = futures_util::stream::iter(
        parts
            .iter()
            .map(|p| Ok::<_, std::convert::Infallible>(Bytes::from_static(p.as_bytes()))),
    );
    (
        [("content-type", "text/event-stream"), ("x-upstream", "yes")],
        Body::from_stream(chunks),
    )
        .into_response()
}

fn answer(path: &str, stream: bool) -> Response {
    let json = |s: &'static str| {
        (
            [("content-type", "application/json"), ("x-upstream", "yes")],
            s,
        )
            .into_response()
    };
    match (path, stream) {
        ("messages", false) => json(ANTHROPIC_JSON),
        ("messages", true) => sse(ANTHROPIC_SSE),
        ("count_tokens", _) => json(r#"{"input_tokens":17}"#),
        ("chat", false) => json(OPENAI_JSON),
        _ => sse(OPENAI_SSE),
    }
}

fn config(upstream: SocketAddr, key_file: &std::path::Path) -> String {
    format!(
        "[secrets]\nprov = {{ file = {:?} }}\n\n[models.anth]\napi = \"anthropic\"\nbase_url = \"http://{upstream}\"\napi_key = \"${{secret:prov}}\"\n\n[models.oai]\napi = \"openai\"\nbase_url = \"http://{upstream}/v1\"\napi_key = \"${{secret:prov}}\"\n",
        key_file.display().to_string()
    )
}

async fn post(url: &str, auth: Option<(&str, &str)>, body: &str) -> (StatusCode, HeaderMap, Bytes) {
    let mut rq = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("anthropic-version", "2023-06-01")
        .body(body.to_owned());
    if let Some((k, v)) = auth {
        rq = rq.header(k, v);
    }
    let r = rq.send().await.unwrap();
    let status = r.status();
    let headers = r.headers().clone();
    (status, headers, r.bytes().await.unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn both_apis_forward_byte_for_byte_with_the_key_and_every_call_is_metered() {
    let (up, up_addr) = Upstream::start().await;
    let keys = tempfile::tempdir().unwrap();
    let key_file = keys.path().join("provider_key");
    std::fs::write(&key_file, format!("{KEY}\n")).unwrap();
    let (_dir, home) = home_with_config(&config(up_addr, &key_file));
    let (daemon, svc, root) = start(&home).await;
    let minted = svc.token_mint(Principal::User, root, None).unwrap();
    let token = minted.token.clone();
    let base = format!("http://{}/model", daemon.addr());
    let bearer = format!("Bearer {token}");

    // Anthropic, unstreamed, the token as `x-api-key` (as the SDKs send it).
    let (s, h, b) = post(
        &format!("{base}/anth/v1/messages"),
        Some(("x-api-key", &token)),
        r#"{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[]}"#,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(b, ANTHROPIC_JSON.as_bytes());
    assert_eq!(h["x-upstream"], "yes");
    // Anthropic, streamed, the token as a bearer (Claude Code's
    // ANTHROPIC_AUTH_TOKEN): the events arrive as the upstream sent them.
    let (s, h, b) = post(
        &format!("{base}/anth/v1/messages"),
        Some(("authorization", &bearer)),
        r#"{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[]}"#,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(h["content-type"], "text/event-stream");
    assert_eq!(b, ANTHROPIC_SSE.concat().as_bytes());
    // count_tokens: forwarded, not metered.
    let (s, _, b) = post(
        &format!("{base}/anth/v1/messages/count_tokens"),
        Some(("x-api-key", &token)),
        r#"{"model":"claude-sonnet-4-5","messages":[]}"#,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(b, r#"{"input_tokens":17}"#.as_bytes());
    // OpenAI, unstreamed and streamed (asking for usage: body unchanged).
    let (s, _, b) = post(
        &format!("{base}/oai/v1/chat/completions"),
        Some(("authorization", &bearer)),
        r#"{"model":"gpt-4o-mini","messages":[]}"#,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(b, OPENAI_JSON.as_bytes());
    let asked = r#"{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[]}"#;
    let (s, _, b) = post(
        &format!("{base}/oai/v1/chat/completions"),
        Some(("authorization", &bearer)),
        asked,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(b, OPENAI_SSE.concat().as_bytes());
    // A stream that did not ask for usage is made to.
    let (s, _, _) = post(
        &format!("{base}/oai/v1/chat/completions"),
        Some(("authorization", &bearer)),
        r#"{"model":"gpt-4o-mini","stream":true,"messages":[]}"#,
    )
    .await;
    assert_eq!(s, StatusCode::OK);

    let seen = up.seen();
    assert_eq!(seen.len(), 6);
    for (i, (path, headers, _)) in seen.iter().enumerate() {
        // The provider key, in the header its API reads; the agent's
        // token nowhere in what the upstream got.
        let key = if path == "chat" {
            headers["authorization"].to_str().unwrap().to_owned()
        } else {
            headers["x-api-key"].to_str().unwrap().to_owned()
        };
        let want = if path == "chat" {
            format!("Bearer {KEY}")
        } else {
            KEY.to_owned()
        };
        assert_eq!(key, want, "request {i} ({path})");
        for (k, v) in headers {
            assert!(
                !v.to_str().unwrap_or("").contains(&token),
                "the agent's token reached the upstream in {k}"
            );
        }
        assert!(!headers.contains_key("x-api-key") || path != "chat");
        assert_eq!(headers["anthropic-version"], "2023-06-01");
    }
    assert_eq!(seen[4].2, asked.as_bytes(), "a body is forwarded unchanged");
    let injected: serde_json::Value = serde_json::from_slice(&seen[5].2).unwrap();
    assert_eq!(injected["stream_options"]["include_usage"], true);

    // Five metered calls, each with the usage its answer told.
    let tree = wait_for("five model calls recorded", || {
        let t = svc.cost_tree(Principal::User, None).unwrap();
        (t.own.calls == 5).then_some(t)
    })
    .await;
    let u = tree.own.usage;
    let want = TokenUsage {
        // 100 + 7 (Anthropic) + (50 - 10) + 30 + 30 (OpenAI, cached apart)
        input_tokens: 100 + 7 + 40 + 30 + 30,
        output_tokens: 20 + 9 + 6 + 4 + 4,
        cache_read_tokens: 2000 + 5 + 10,
        cache_write_tokens: 1000 + 3,
    };
    assert_eq!(u, want);
    // claude-sonnet-4-5: 3 / 15 / 0.3 / 3.75 $ per MTok; gpt-4o-mini:
    // 0.15 / 0.6 / 0.075 (micro-dollars per token).
    let sonnet = 107.0 * 3.0 + 29.0 * 15.0 + 2005.0 * 0.3 + 1003.0 * 3.75;
    let mini = [(40.0, 6.0, 10.0), (30.0, 4.0, 0.0), (30.0, 4.0, 0.0)]
        .iter()
        .map(|(i, o, c)| (i * 0.15 + o * 0.6 + c * 0.075_f64).round())
        .sum::<f64>();
    let sonnet_calls = (100.0 * 3.0 + 20.0 * 15.0 + 2000.0 * 0.3 + 1000.0 * 3.75_f64).round()
        + (7.0 * 3.0 + 9.0 * 15.0 + 5.0 * 0.3 + 3.0 * 3.75_f64).round();
    assert!((sonnet - sonnet_calls).abs() < 2.0);
    assert_eq!(tree.own.cost_micro_usd, (sonnet_calls + mini) as i64);
    let calls = svc.model_calls_of(Principal::User, minted.agent).unwrap();
    assert_eq!(calls.len(), 5);
    assert!(calls.iter().all(|c| c.handler == root && c.status == 200));
    assert_eq!(
        calls.iter().filter(|c| c.stream).count(),
        3,
        "streamed calls are marked"
    );

    // The cost tree: an underling's call counts in its own node and in
    // its boss's subtree, not in the boss's own.
    let me = Principal::agent(root, minted.agent);
    let child = delegate_new(&svc, me, root, "child");
    let child_token = svc.token_mint(Principal::User, child, None).unwrap();
    let (s, _, _) = post(
        &format!("{base}/anth/v1/messages"),
        Some(("x-api-key", &child_token.token)),
        r#"{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[]}"#,
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let tree = wait_for("the child's call recorded", || {
        let t = svc.cost_tree(Principal::User, None).unwrap();
        (t.subtree.calls == 6).then_some(t)
    })
    .await;
    assert_eq!(tree.own.calls, 5);
    assert_eq!(tree.children.len(), 1);
    assert_eq!(tree.children[0].handler, child);
    assert_eq!(tree.children[0].own.calls, 1);
    assert_eq!(tree.children[0].own.usage.input_tokens, 100);
    assert_eq!(
        tree.subtree.cost_micro_usd,
        tree.own.cost_micro_usd + tree.children[0].own.cost_micro_usd
    );
    let sub = svc.cost_tree(Principal::User, Some(child)).unwrap();
    assert_eq!(sub.subtree.calls, 1);
    // Only the user reads costs.
    assert!(svc.cost_tree(me, None).is_err());

    daemon.stop().await.unwrap();
    // The key is nowhere under the home: config, database, logs, blobs.
    let hits = files_containing(home.dir(), KEY.as_bytes());
    assert!(hits.is_empty(), "the provider key is in {hits:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_or_wrong_token_is_refused_and_reaches_nothing() {
    let (up, up_addr) = Upstream::start().await;
    let keys = tempfile::tempdir().unwrap();
    let key_file = keys.path().join("provider_key");
    std::fs::write(&key_file, KEY).unwrap();
    let (_dir, home) = home_with_config(&config(up_addr, &key_file));
    let (daemon, svc, root) = start(&home).await;
    let url = format!("http://{}/model/anth/v1/messages", daemon.addr());
    let body = r#"{"model":"m","max_tokens":1,"messages":[]}"#;
    let admin = std::fs::read_to_string(home.dir().join("admin.token")).unwrap();
    let admin = admin.trim().to_owned();
    for auth in [
        None,
        Some(("x-api-key", "agency-not-a-token")),
        Some(("authorization", "Bearer agency-not-a-token")),
        // The provider key itself is no credential here.
        Some(("x-api-key", KEY)),
        // Nor is the admin token: the gateway is for agents.
        Some(("authorization", &*format!("Bearer {admin}"))),
    ] {
        let (s, _, b) = post(&url, auth, body).await;
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{auth:?}: {b:?}");
        assert!(!String::from_utf8_lossy(&b).contains(KEY));
    }
    // A revoked token (the agent ended) is refused too.
    let minted = svc.token_mint(Principal::User, root, None).unwrap();
    svc.token_revoke(Principal::User, minted.agent).unwrap();
    let (s, _, _) = post(&url, Some(("x-api-key", &minted.token)), body).await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    assert!(up.seen().is_empty(), "a refused call reached the upstream");
    // A valid token still cannot use a path the upstream's API lacks, nor
    // an upstream that is not declared.
    let ok = svc.token_mint(Principal::User, root, None).unwrap();
    for path in [
        "model/anth/v1/chat/completions",
        "model/nope/v1/messages",
        "model/anth/v1/files",
    ] {
        let (s, _, _) = post(
            &format!("http://{}/{path}", daemon.addr()),
            Some(("x-api-key", &ok.token)),
            body,
        )
        .await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{path}");
    }
    assert!(up.seen().is_empty());
    assert_eq!(
        svc.cost_tree(Principal::User, None).unwrap().subtree.calls,
        0
    );
    daemon.stop().await.unwrap();
}

/// Every file under `dir` whose bytes contain `needle`.
fn files_containing(dir: &std::path::Path, needle: &[u8]) -> Vec<std::path::PathBuf> {
    let mut hits = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file()
                && let Ok(bytes) = std::fs::read(&p)
                && bytes.windows(needle.len()).any(|w| w == needle)
            {
                hits.push(p);
            }
        }
    }
    hits
}
