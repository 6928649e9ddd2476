//! Issue 11 items 3 and 7, budgets at the model gateway against a real
//! daemon: two agents racing model calls under a token cap on their boss
//! end within one reservation of the cap and never above it, and a refused
//! call (429, with a message the agent can act on) never reaches the
//! upstream.

#![allow(clippy::unwrap_used)]

use crate::fixture;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agency_core::Principal;
use agency_service::BudgetLimits;
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::post as route_post;
use fixture::{delegate_new, home_with_config, start, wait_for};

/// 44 bytes: the gateway estimates 11 input tokens, so a call's worst
/// case is 11 + 64 = 75 tokens.
const BODY: &str = r#"{"model":"m","max_tokens":64,"messages":[]}"#;
const WORST: i64 = 11 + 64;
const CAP: i64 = 1000;

/// An upstream that uses exactly the worst case each call (input = bytes
/// / 4, output = `max_tokens`) and counts what reaches it.
async fn upstream() -> (Arc<AtomicUsize>, SocketAddr) {
    let hits = Arc::new(AtomicUsize::new(0));
    let h = hits.clone();
    let app = axum::Router::new().route(
        "/v1/messages",
        route_post(move |body: Bytes| {
            let h = h.clone();
            async move {
                h.fetch_add(1, Ordering::SeqCst);
                let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
                // Let the two agents' calls overlap.
                tokio::task::yield_now().await;
                let answer = serde_json::json!({
                    "id": "msg", "type": "message", "role": "assistant", "content": [],
                    "model": "m", "stop_reason": "end_turn",
                    "usage": {"input_tokens": body.len() / 4,
                              "output_tokens": v["max_tokens"]},
                });
                ([("content-type", "application/json")], answer.to_string()).into_response()
            }
        }),
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(l, app).await });
    (hits, addr)
}

/// A budget of `n` tokens and nothing else.
fn tokens(n: i64) -> BudgetLimits {
    BudgetLimits {
        tokens: Some(n),
        ..BudgetLimits::default()
    }
}

/// Call until refused; returns the calls that passed and the refusal.
async fn call_until_refused(url: String, token: String) -> (usize, StatusCode, String) {
    let client = reqwest::Client::new();
    let mut ok = 0;
    loop {
        let r = client
            .post(&url)
            .header("content-type", "application/json")
            .header("x-api-key", &token)
            .body(BODY)
            .send()
            .await
            .unwrap();
        let status = r.status();
        let text = r.text().await.unwrap();
        if status != StatusCode::OK {
            return (ok, status, text);
        }
        ok += 1;
        assert!(ok < 1000, "the cap never stopped the agent");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn two_agents_racing_under_a_token_cap_end_within_one_reservation_of_it() {
    let (hits, up) = upstream().await;
    let toml = format!("[models.anth]\napi = \"anthropic\"\nbase_url = \"http://{up}\"\n");
    let (_dir, home) = home_with_config(&toml);
    let (daemon, svc, root) = start(&home).await;
    let boss_agent = svc.token_mint(Principal::User, root, None).unwrap();
    let me = Principal::agent(root, boss_agent.agent);
    let boss = delegate_new(&svc, me, root, "boss");
    let boss_token = svc.token_mint(Principal::User, boss, None).unwrap();
    let by_boss = Principal::agent(boss, boss_token.agent);
    let a = delegate_new(&svc, by_boss, boss, "a");
    let b = delegate_new(&svc, by_boss, boss, "b");
    svc.budget_set(Principal::User, boss, tokens(CAP)).unwrap();
    let ta = svc.token_mint(Principal::User, a, None).unwrap().token;
    let tb = svc.token_mint(Principal::User, b, None).unwrap().token;
    let url = format!("http://{}/model/anth/v1/messages", daemon.addr());

    let (ra, rb) = tokio::join!(
        tokio::spawn(call_until_refused(url.clone(), ta.clone())),
        tokio::spawn(call_until_refused(url.clone(), tb)),
    );
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    for (_, status, text) in [&ra, &rb] {
        assert_eq!(*status, StatusCode::TOO_MANY_REQUESTS, "{text}");
        assert!(
            text.contains(&format!("budget of handler {boss} reached")),
            "{text}"
        );
        assert!(text.contains("save your state and stop"), "{text}");
    }
    let passed = ra.0 + rb.0;
    assert!(ra.0 > 0 && rb.0 > 0, "both agents called: {ra:?} {rb:?}");
    // Only the calls that passed reached the upstream.
    assert_eq!(hits.load(Ordering::SeqCst), passed);

    let shown = wait_for("every call settled", || {
        let s = svc.budget_show(Principal::User, Some(boss)).unwrap();
        (s.spent.reserved_calls == 0 && s.spent.calls == passed as i64).then_some(s)
    })
    .await;
    let spent = shown.spent.tokens;
    assert!(spent <= CAP, "spent {spent} over the cap {CAP}");
    assert!(
        spent > CAP - WORST,
        "spent {spent}: stopped more than one reservation below {CAP}"
    );

    // Once settled and refused, a further call is refused again before
    // the upstream; raising the cap lets it through.
    let (n, status, _) = call_until_refused(url.clone(), ta.clone()).await;
    assert_eq!((n, status), (0, StatusCode::TOO_MANY_REQUESTS));
    assert_eq!(hits.load(Ordering::SeqCst), passed);
    svc.budget_set(Principal::User, boss, tokens(CAP + WORST))
        .unwrap();
    let (n, _, _) = call_until_refused(url, ta).await;
    assert!(n >= 1);
    assert_eq!(hits.load(Ordering::SeqCst), passed + n);
    daemon.stop().await.unwrap();
}

/// A daemon that died mid-call left its reservation in the ledger; the
/// next daemon releases it, or the budget would stay held forever.
#[tokio::test(flavor = "multi_thread")]
async fn a_reservation_left_by_a_dead_daemon_is_released_on_start() {
    let (_hits, up) = upstream().await;
    let toml = format!("[models.anth]\napi = \"anthropic\"\nbase_url = \"http://{up}\"\n");
    let (_dir, home) = home_with_config(&toml);
    let (daemon, svc, root) = start(&home).await;
    let minted = svc.token_mint(Principal::User, root, None).unwrap();
    let request = agency_service::ModelCallRequest {
        upstream: "anth".into(),
        api: "anthropic".into(),
        model: "m".into(),
        stream: false,
        max_tokens: 500,
        input_estimate: 0,
        worst_cost_micro_usd: 0,
        priced: true,
    };
    // Reserved and never settled, as when the daemon is killed mid-call.
    let _held = svc
        .model_call_reserve(Principal::agent(root, minted.agent), request)
        .unwrap();
    let before = svc.budget_show(Principal::User, None).unwrap();
    assert_eq!(
        (before.spent.reserved_calls, before.spent.reserved_tokens),
        (1, 500)
    );
    daemon.stop().await.unwrap();
    drop(svc);

    let (daemon, svc, _) = start(&home).await;
    let after = svc.budget_show(Principal::User, None).unwrap();
    assert_eq!(after.spent.reserved_calls, 0);
    daemon.stop().await.unwrap();
}

/// Issue 15 (the gateway reads a request's metered fields with its own
/// scan, not serde): an agent that spells `max_tokens` so that a naive
/// scan misses it — an escaped key, the field twice, a decoy inside the
/// conversation — still has its real worst case reserved, or is refused
/// before the upstream. With a cap of 1,000 tokens, 100,000 asked is
/// refused (429); a cap that is not a whole number (which would reserve
/// nothing) is refused (400); no such call reaches the upstream.
#[tokio::test(flavor = "multi_thread")]
async fn issue_15_max_tokens_hidden_from_the_head_scan_is_still_reserved() {
    let (hits, up) = upstream().await;
    let toml = format!("[models.anth]\napi = \"anthropic\"\nbase_url = \"http://{up}\"\n");
    let (_dir, home) = home_with_config(&toml);
    let (daemon, svc, root) = start(&home).await;
    svc.budget_set(Principal::User, root, tokens(CAP)).unwrap();
    let token = svc.token_mint(Principal::User, root, None).unwrap().token;
    let url = format!("http://{}/model/anth/v1/messages", daemon.addr());
    let client = reqwest::Client::new();
    let send = |body: &'static str| {
        let rq = client
            .post(&url)
            .header("content-type", "application/json")
            .header("x-api-key", &token)
            .body(body);
        async move {
            let r = rq.send().await.unwrap();
            (r.status(), r.text().await.unwrap())
        }
    };
    for (body, want) in [
        (
            r#"{"model":"m","max\u005ftokens":100000,"messages":[]}"#,
            StatusCode::TOO_MANY_REQUESTS,
        ),
        (
            r#"{"model":"m","messages":[{"max_tokens":5}],"max_tokens":100000}"#,
            StatusCode::TOO_MANY_REQUESTS,
        ),
        (
            r#"{"model":"m","system":"\"max_tokens\":1, [{","max_tokens":100000,"messages":[]}"#,
            StatusCode::TOO_MANY_REQUESTS,
        ),
        (
            r#"{"model":"m","max_tokens":1,"messages":[],"max_tokens":100000}"#,
            StatusCode::BAD_REQUEST,
        ),
        (
            r#"{"model":"m","max_tokens":1,"messages":[]}{"max_tokens":100000}"#,
            StatusCode::BAD_REQUEST,
        ),
        // A cap the ledger cannot reserve is refused, not read as 0.
        (
            r#"{"model":"m","max_tokens":100000.5,"messages":[]}"#,
            StatusCode::BAD_REQUEST,
        ),
        (
            r#"{"model":"m","max_tokens":"100000","messages":[]}"#,
            StatusCode::BAD_REQUEST,
        ),
        (
            r#"{"model":"m","max_tokens":-1,"messages":[]}"#,
            StatusCode::BAD_REQUEST,
        ),
        // With both fields, the larger is reserved.
        (
            r#"{"model":"m","max_tokens":1,"max_completion_tokens":100000,"messages":[]}"#,
            StatusCode::TOO_MANY_REQUESTS,
        ),
    ] {
        let (status, text) = send(body).await;
        assert_eq!(status, want, "{body}: {text}");
    }
    assert_eq!(
        hits.load(Ordering::SeqCst),
        0,
        "a hidden request reached the upstream"
    );
    // The plain request under the cap passes.
    let (status, text) = send(BODY).await;
    assert_eq!(status, StatusCode::OK, "{text}");
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    daemon.stop().await.unwrap();
}
