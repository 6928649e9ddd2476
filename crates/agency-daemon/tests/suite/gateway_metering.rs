//! Issue 27 item 3, "every metered call is charged for what the provider
//! bills", against a real daemon and loopback upstreams that stand for the
//! provider: a stream cut before its last event, an unstreamed answer past
//! 8 MiB, a model without a price, calls without `max_tokens`, `n`
//! answers, stalled uploads and `count_tokens` under a pause. Each test
//! reproduces an attack that passed before its fix.

#![allow(clippy::unwrap_used)]

use crate::fixture;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agency_core::{AgentId, HandlerId, Principal};
use agency_service::{BudgetLimits, System};
use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::post as route_post;
use fixture::{home_with_config, start, wait_for};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Serve `app` on a loopback port.
async fn serve(app: axum::Router) -> SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await });
    addr
}

fn json(v: serde_json::Value) -> axum::response::Response {
    ([("content-type", "application/json")], v.to_string()).into_response()
}

fn tokens(n: i64) -> BudgetLimits {
    BudgetLimits {
        tokens: Some(n),
        ..BudgetLimits::default()
    }
}

/// The root handler's agent: its token and id.
fn root_agent(svc: &System, root: HandlerId) -> (String, AgentId) {
    let m = svc.token_mint(Principal::User, root, None).unwrap();
    (m.token, m.agent)
}

async fn post(url: &str, token: &str, body: String) -> (StatusCode, String) {
    let r = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("x-api-key", token)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = r.status();
    (status, r.text().await.unwrap_or_default())
}

/// The agent's settled calls, once there are `n`.
async fn calls_of(svc: &System, agent: AgentId, n: usize) -> Vec<agency_service::ModelCallRow> {
    wait_for("the calls settled", || {
        let c = svc.model_calls_of(Principal::User, agent).unwrap();
        (c.len() == n).then_some(c)
    })
    .await
}

/// The attack: a streamed answer cut after 95 of its 100 text events,
/// before the `message_delta` that carries the final usage. Only
/// `message_start`'s counts were seen (1 output token), so the call was
/// charged next to nothing while the provider billed ~95% of the cap. It
/// now settles at its reservation (the output cap in full, the input as
/// `message_start` reported it), and the budget that this reaches pauses.
#[tokio::test(flavor = "multi_thread")]
async fn issue27_a_stream_cut_after_95_percent_settles_at_reservation_and_pauses() {
    const BODY: &str = r#"{"model":"m","max_tokens":1000,"stream":true,"messages":[]}"#;
    let input = (BODY.len() / 4) as i64;
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    let app = axum::Router::new().route(
        "/v1/messages",
        route_post(move || {
            h.fetch_add(1, Ordering::SeqCst);
            async move {
                let start = format!(
                    "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"usage\":{{\"input_tokens\":{input},\"output_tokens\":1}}}}}}\n\n"
                );
                let mut parts: Vec<Result<Bytes, std::io::Error>> = vec![Ok(start.into())];
                for _ in 0..95 {
                    parts.push(Ok(Bytes::from_static(
                        b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ten tokens of text, more or less, here\"}}\n\n",
                    )));
                }
                // The upstream goes away before the last five and the
                // message_delta.
                parts.push(Err(std::io::Error::other("cut")));
                (
                    [("content-type", "text/event-stream")],
                    Body::from_stream(futures_util::stream::iter(parts)),
                )
            }
        }),
    );
    let up = serve(app).await;
    let toml = format!("[models.anth]\napi = \"anthropic\"\nbase_url = \"http://{up}\"\n");
    let (_dir, home) = home_with_config(&toml);
    let (daemon, svc, root) = start(&home).await;
    let reservation = input + 1000;
    // Exactly one call's worst case: admitted, and reached once settled.
    svc.budget_set(Principal::User, root, tokens(reservation))
        .unwrap();
    let (token, agent) = root_agent(&svc, root);
    let url = format!("http://{}/model/anth/v1/messages", daemon.addr());

    let r = reqwest::Client::new()
        .post(&url)
        .header("x-api-key", &token)
        .body(BODY)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(r.bytes().await.is_err(), "the answer was cut off");

    let calls = calls_of(&svc, agent, 1).await;
    let c = &calls[0];
    assert!(c.estimated, "{c:?}");
    assert_eq!(
        (c.usage.input_tokens, c.usage.output_tokens),
        (input, 1000),
        "charged at the reservation, not at message_start's 1 token"
    );
    let shown = svc.budget_show(Principal::User, None).unwrap();
    assert_eq!(shown.spent.tokens, reservation);
    assert_eq!(shown.spent.reserved_tokens, 0);
    let pause = shown.paused.expect("the budget reached pauses the subtree");
    assert!(pause.reason.contains("tokens limit"), "{}", pause.reason);
    // Paused: the next call never reaches the upstream.
    let (status, text) = post(&url, &token, BODY.to_owned()).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{text}");
    assert!(text.contains("paused"), "{text}");
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    daemon.stop().await.unwrap();
}

/// The attack: models missing from the price table cost $0, so a dollar
/// budget never paused. Now such a model is unpriced: refused under a cost
/// budget before the upstream, shown as unpriced in the cost tree (what
/// `agency cost` and its JSON render), and charged at the upstream's
/// `default_price` when one is configured.
#[tokio::test(flavor = "multi_thread")]
async fn issue27_an_unpriced_model_is_refused_under_a_cost_budget_and_shown_unpriced() {
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    let app = axum::Router::new().route(
        "/v1/messages",
        route_post(move || {
            h.fetch_add(1, Ordering::SeqCst);
            async {
                json(serde_json::json!({
                    "type": "message", "content": [],
                    "usage": {"input_tokens": 1000, "output_tokens": 1000},
                }))
            }
        }),
    );
    let up = serve(app).await;
    let toml = format!(
        "[models.anth]\napi = \"anthropic\"\nbase_url = \"http://{up}\"\n\n[models.local]\napi = \"anthropic\"\nbase_url = \"http://{up}\"\ndefault_price = {{ input = 2.0, output = 3.0 }}\n"
    );
    let (_dir, home) = home_with_config(&toml);
    let (daemon, svc, root) = start(&home).await;
    let (token, agent) = root_agent(&svc, root);
    let base = format!("http://{}/model", daemon.addr());
    let unpriced = r#"{"model":"house-model-7b","max_tokens":10,"messages":[]}"#;

    // No cost budget: the call passes, and is counted as unpriced.
    let (status, text) = post(&format!("{base}/anth/v1/messages"), &token, unpriced.into()).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let calls = calls_of(&svc, agent, 1).await;
    assert!(calls[0].unpriced && calls[0].cost_micro_usd == 0);
    let tree = svc.cost_tree(Principal::User, None).unwrap();
    assert_eq!((tree.own.calls, tree.own.unpriced_calls), (1, 1));
    let shown = serde_json::to_value(&tree).unwrap();
    assert_eq!(shown["self"]["unpriced_calls"], 1, "{shown}");

    // Under a cost budget: refused (403, naming the way out), never sent.
    svc.budget_set(
        Principal::User,
        root,
        BudgetLimits {
            micro_usd: Some(1_000_000),
            ..BudgetLimits::default()
        },
    )
    .unwrap();
    let (status, text) = post(&format!("{base}/anth/v1/messages"), &token, unpriced.into()).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{text}");
    assert!(text.contains("has no price"), "{text}");
    assert!(text.contains("[prices."), "{text}");
    assert_eq!(hits.load(Ordering::SeqCst), 1);

    // A priced model passes, and costs what the table says.
    let sonnet = r#"{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[]}"#;
    let (status, text) = post(&format!("{base}/anth/v1/messages"), &token, sonnet.into()).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    // An upstream with a default price charges it for the unlisted model.
    let (status, text) = post(
        &format!("{base}/local/v1/messages"),
        &token,
        unpriced.into(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let calls = calls_of(&svc, agent, 3).await;
    assert!(!calls[0].unpriced);
    assert_eq!(calls[0].cost_micro_usd, 1000 * 2 + 1000 * 3);
    assert_eq!(calls[1].cost_micro_usd, 1000 * 3 + 1000 * 15);
    assert_eq!(hits.load(Ordering::SeqCst), 3);
    daemon.stop().await.unwrap();
}

/// The attack: chat completions without `max_tokens` reserved only their
/// input, so ten parallel calls all passed a cap and spent far past it.
/// Now each reserves its upstream's `reserve_output_tokens`: the calls
/// past the cap are refused (429) and the spend stays within it.
#[tokio::test(flavor = "multi_thread")]
async fn issue27_ten_parallel_calls_without_max_tokens_stay_within_a_token_cap() {
    const BODY: &str = r#"{"model":"gpt-4o-mini","messages":[]}"#;
    const RESERVE: i64 = 1000;
    let worst = (BODY.len() / 4) as i64 + RESERVE;
    let cap = 3 * worst + worst / 2;
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        route_post(move |body: Bytes| {
            h.fetch_add(1, Ordering::SeqCst);
            async move {
                // Held, so that all ten are admitted or refused before
                // any settles; then an uncapped answer's worth of tokens.
                tokio::time::sleep(Duration::from_millis(500)).await;
                json(serde_json::json!({
                    "choices": [],
                    "usage": {"prompt_tokens": body.len() / 4, "completion_tokens": RESERVE},
                }))
            }
        }),
    );
    let up = serve(app).await;
    let toml = format!(
        "[models.oai]\napi = \"openai\"\nbase_url = \"http://{up}/v1\"\nreserve_output_tokens = {RESERVE}\n"
    );
    let (_dir, home) = home_with_config(&toml);
    let (daemon, svc, root) = start(&home).await;
    svc.budget_set(Principal::User, root, tokens(cap)).unwrap();
    let (token, agent) = root_agent(&svc, root);
    let url = format!("http://{}/model/oai/v1/chat/completions", daemon.addr());

    let calls: Vec<_> = (0..10)
        .map(|_| tokio::spawn(post_owned(url.clone(), token.clone(), BODY)))
        .collect();
    let mut passed = 0;
    for c in calls {
        let (status, text) = c.await.unwrap();
        match status {
            StatusCode::OK => passed += 1,
            StatusCode::TOO_MANY_REQUESTS => assert!(text.contains("budget"), "{text}"),
            other => panic!("{other}: {text}"),
        }
    }
    assert_eq!(passed, 3, "only the calls whose worst case fits the cap");
    assert_eq!(hits.load(Ordering::SeqCst), passed);
    calls_of(&svc, agent, passed).await;
    let spent = svc.budget_show(Principal::User, None).unwrap().spent;
    assert!(
        spent.tokens <= cap,
        "spent {} over the cap {cap}",
        spent.tokens
    );
    daemon.stop().await.unwrap();
}

async fn post_owned(url: String, token: String, body: &'static str) -> (StatusCode, String) {
    post(&url, &token, body.to_owned()).await
}

/// The attack: `n` answers were reserved as one. Now the output reserved
/// is the cap times `n`, and an `n` that is not a whole number of answers
/// (1 or more) is refused (400) before the upstream.
#[tokio::test(flavor = "multi_thread")]
async fn issue27_n_multiplies_the_reservation_and_must_be_a_positive_whole_number() {
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        route_post(move || {
            h.fetch_add(1, Ordering::SeqCst);
            async {
                json(serde_json::json!({
                    "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1},
                }))
            }
        }),
    );
    let up = serve(app).await;
    let toml = format!("[models.oai]\napi = \"openai\"\nbase_url = \"http://{up}/v1\"\n");
    let (_dir, home) = home_with_config(&toml);
    let (daemon, svc, root) = start(&home).await;
    // 64 tokens of output fit; 20 answers of 64 (1,280) do not.
    svc.budget_set(Principal::User, root, tokens(1000)).unwrap();
    let (token, _) = root_agent(&svc, root);
    let url = format!("http://{}/model/oai/v1/chat/completions", daemon.addr());
    let body =
        |n: &str| format!(r#"{{"model":"gpt-4o-mini","max_tokens":64,"n":{n},"messages":[]}}"#);
    for (n, want) in [
        ("20", StatusCode::TOO_MANY_REQUESTS),
        ("0", StatusCode::BAD_REQUEST),
        ("-1", StatusCode::BAD_REQUEST),
        ("1.5", StatusCode::BAD_REQUEST),
        ("\"2\"", StatusCode::BAD_REQUEST),
    ] {
        let (status, text) = post(&url, &token, body(n)).await;
        assert_eq!(status, want, "n = {n}: {text}");
        if want == StatusCode::BAD_REQUEST {
            assert!(text.contains("n must be a whole number"), "{text}");
        }
    }
    assert_eq!(hits.load(Ordering::SeqCst), 0);
    let (status, text) = post(&url, &token, body("2")).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    daemon.stop().await.unwrap();
}

/// The attack: an unstreamed answer over 8 MiB was not read for its usage
/// and was recorded as 0 tokens. Now the usage is found however large the
/// answer.
#[tokio::test(flavor = "multi_thread")]
async fn issue27_an_unstreamed_answer_over_8_mib_is_metered() {
    let app = axum::Router::new().route(
        "/v1/messages",
        route_post(|| async {
            let text = "x".repeat(9 << 20);
            json(serde_json::json!({
                "type": "message",
                "content": [{"type": "text", "text": text}],
                "usage": {"input_tokens": 12, "output_tokens": 2_400_000},
            }))
        }),
    );
    let up = serve(app).await;
    let toml = format!("[models.anth]\napi = \"anthropic\"\nbase_url = \"http://{up}\"\n");
    let (_dir, home) = home_with_config(&toml);
    let (daemon, svc, root) = start(&home).await;
    let (token, agent) = root_agent(&svc, root);
    let url = format!("http://{}/model/anth/v1/messages", daemon.addr());
    let body = r#"{"model":"claude-sonnet-4-5","max_tokens":3000000,"messages":[]}"#;
    let (status, text) = post(&url, &token, body.into()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(text.len() > 9 << 20);
    let calls = calls_of(&svc, agent, 1).await;
    let c = &calls[0];
    assert_eq!(
        (c.usage.input_tokens, c.usage.output_tokens),
        (12, 2_400_000)
    );
    assert!(!c.estimated);
    assert_eq!(c.cost_micro_usd, 12 * 3 + 2_400_000 * 15);
    daemon.stop().await.unwrap();
}

/// Send a request head with `Content-Length: declared` and `sent` bytes of
/// its body, then stall; the connection, to read the answer from.
async fn stalled_upload(
    addr: SocketAddr,
    token: &str,
    declared: usize,
    sent: usize,
) -> tokio::net::TcpStream {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /model/anth/v1/messages HTTP/1.1\r\nhost: {addr}\r\nx-api-key: {token}\r\ncontent-type: application/json\r\ncontent-length: {declared}\r\n\r\n"
    );
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(&vec![b' '; sent]).await.unwrap();
    s.flush().await.unwrap();
    s
}

/// The attack: request bodies were read with no deadline and no cap per
/// agent, so one agent's stalled uploads held ~1.8 GiB of the daemon's
/// memory. Now a body must arrive within `request_timeout_secs` (408,
/// naming it), and an agent's bodies in flight stay within
/// `agent_request_bytes` (413, naming it); bytes are given back when a
/// request ends.
#[tokio::test(flavor = "multi_thread")]
async fn issue27_a_stalled_upload_times_out_and_the_per_agent_cap_refuses() {
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    let app = axum::Router::new().route(
        "/v1/messages",
        route_post(move || {
            h.fetch_add(1, Ordering::SeqCst);
            async {
                json(serde_json::json!({
                    "type": "message", "content": [],
                    "usage": {"input_tokens": 1, "output_tokens": 1},
                }))
            }
        }),
    );
    let up = serve(app).await;
    let toml = format!(
        "[models.anth]\napi = \"anthropic\"\nbase_url = \"http://{up}\"\nrequest_timeout_secs = 2\nagent_request_bytes = 100000\n"
    );
    let (_dir, home) = home_with_config(&toml);
    let (daemon, svc, root) = start(&home).await;
    let (token, me) = root_agent(&svc, root);
    let url = format!("http://{}/model/anth/v1/messages", daemon.addr());
    // 30 kB of conversation: a request that fits on its own.
    let padded = format!(
        r#"{{"model":"m","max_tokens":1,"system":"{}","messages":[]}}"#,
        "p".repeat(30_000)
    );

    let started = std::time::Instant::now();
    let mut stalled = stalled_upload(daemon.addr(), &token, 80_000, 1000).await;
    // The stalled upload holds 80 kB of the agent's 100 kB in flight.
    let (status, text, passed) = wait_until_refused(&url, &token, &padded).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{text}");
    assert!(text.contains("agent_request_bytes = 100000"), "{text}");
    // Another agent is not held back by this one's uploads.
    let child = fixture::delegate_new(&svc, Principal::agent(root, me), root, "other");
    let other = svc.token_mint(Principal::User, child, None).unwrap().token;
    let (status, text) = post(&url, &other, padded.clone()).await;
    assert_eq!(status, StatusCode::OK, "{text}");

    // The stalled upload is refused at its deadline.
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), stalled.read_to_end(&mut answer))
        .await
        .expect("the stalled upload was never answered")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("request_timeout_secs = 2"), "{answer}");
    assert!(started.elapsed() >= Duration::from_secs(2));
    // Its bytes are given back: the same request now passes.
    let (status, text) = post(&url, &token, padded.clone()).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    // The upstream saw the other agent's request, this last one, and the
    // tries that passed before the stalled upload was counted.
    assert_eq!(hits.load(Ordering::SeqCst), 2 + passed);
    daemon.stop().await.unwrap();
}

/// Post until the answer is not 200 (the stalled upload's head may still
/// be on its way when the first is sent: on a loaded machine it was once
/// not read for over a second); the refusal and how many tries passed.
async fn wait_until_refused(url: &str, token: &str, body: &str) -> (StatusCode, String, usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut passed = 0;
    while std::time::Instant::now() < deadline {
        let (status, text) = post(url, token, body.to_owned()).await;
        if status != StatusCode::OK {
            return (status, text, passed);
        }
        passed += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the per-agent cap never refused ({passed} tries passed)");
}

/// The attack: `count_tokens` reached the provider while the subtree was
/// paused. Now it is refused like any other call while paused, and never
/// reaches the upstream.
#[tokio::test(flavor = "multi_thread")]
async fn issue27_count_tokens_is_refused_while_the_subtree_is_paused() {
    let counts = Arc::new(AtomicUsize::new(0));
    let c = counts.clone();
    let app = axum::Router::new()
        .route(
            "/v1/messages",
            route_post(|| async {
                // More than the budget: settling it pauses the subtree.
                json(serde_json::json!({
                    "type": "message", "content": [],
                    "usage": {"input_tokens": 10, "output_tokens": 2000},
                }))
            }),
        )
        .route(
            "/v1/messages/count_tokens",
            route_post(move || {
                c.fetch_add(1, Ordering::SeqCst);
                async { json(serde_json::json!({"input_tokens": 17})) }
            }),
        );
    let up = serve(app).await;
    let toml = format!("[models.anth]\napi = \"anthropic\"\nbase_url = \"http://{up}\"\n");
    let (_dir, home) = home_with_config(&toml);
    let (daemon, svc, root) = start(&home).await;
    svc.budget_set(Principal::User, root, tokens(1000)).unwrap();
    let (token, _) = root_agent(&svc, root);
    let base = format!("http://{}/model/anth/v1/messages", daemon.addr());
    let count = format!("{base}/count_tokens");
    let ask = r#"{"model":"m","messages":[]}"#;

    let (status, text) = post(&count, &token, ask.into()).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let (status, text) = post(
        &base,
        &token,
        r#"{"model":"m","max_tokens":64,"messages":[]}"#.into(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    wait_for("the budget paused", || {
        svc.budget_show(Principal::User, None).unwrap().paused
    })
    .await;

    let (status, text) = post(&count, &token, ask.into()).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS, "{text}");
    assert!(text.contains("paused"), "{text}");
    assert_eq!(
        counts.load(Ordering::SeqCst),
        1,
        "count_tokens reached the upstream while paused"
    );
    daemon.stop().await.unwrap();
}

/// The agent going away mid-stream is the other way a stream ends without
/// its final usage: the upstream may go on generating, so the call is
/// charged at its reservation too, not at the one token seen.
#[tokio::test(flavor = "multi_thread")]
async fn issue27_an_agent_gone_mid_stream_is_charged_at_reservation() {
    const BODY: &str = r#"{"model":"m","max_tokens":500,"stream":true,"messages":[]}"#;
    let app = axum::Router::new().route(
        "/v1/messages",
        route_post(|| async {
            let start = Bytes::from_static(
                b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":9,\"output_tokens\":1}}}\n\n",
            );
            // The rest of the answer takes its time.
            let rest = futures_util::stream::once(async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                Ok::<_, std::io::Error>(Bytes::new())
            });
            let parts =
                futures_util::StreamExt::chain(futures_util::stream::iter([Ok(start)]), rest);
            (
                [("content-type", "text/event-stream")],
                Body::from_stream(parts),
            )
        }),
    );
    let up = serve(app).await;
    let toml = format!("[models.anth]\napi = \"anthropic\"\nbase_url = \"http://{up}\"\n");
    let (_dir, home) = home_with_config(&toml);
    let (daemon, svc, root) = start(&home).await;
    let (token, agent) = root_agent(&svc, root);
    let url = format!("http://{}/model/anth/v1/messages", daemon.addr());
    let mut r = reqwest::Client::new()
        .post(&url)
        .header("x-api-key", &token)
        .body(BODY)
        .send()
        .await
        .unwrap();
    let first = r.chunk().await.unwrap().unwrap();
    assert!(first.starts_with(b"event: message_start"));
    drop(r); // the agent goes away

    let calls = calls_of(&svc, agent, 1).await;
    let c = &calls[0];
    assert!(c.estimated, "{c:?}");
    assert_eq!((c.usage.input_tokens, c.usage.output_tokens), (9, 500));
    daemon.stop().await.unwrap();
}
