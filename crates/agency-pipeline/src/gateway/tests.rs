//! [`GatewayModel`] against a scripted HTTP server on 127.0.0.1:0 that
//! answers like agency-gateway and its upstreams do.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::json;

use super::*;
use crate::ladder::tests::request;
use crate::ladder::{Backoff, StageDeps, StageStatus, SystemClock, TokioSleeper, run_llm_stage};
use crate::template::Context;
use crate::validate::OutputContract;

/// One scripted answer: status, extra headers, body, and a delay.
#[derive(Clone)]
struct Canned(u16, Vec<(&'static str, String)>, String, u64);

#[derive(Default)]
struct Server {
    script: Mutex<VecDeque<Canned>>,
    /// (path, authorization, anthropic-version, body) of every request.
    seen: Mutex<Vec<(String, String, String, Value)>>,
}

async fn handle(
    State(s): State<Arc<Server>>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let (auth, version) = (header("authorization"), header("anthropic-version"));
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    s.seen
        .lock()
        .expect("not poisoned")
        .push((uri.path().to_owned(), auth, version, body));
    let next = s.script.lock().expect("not poisoned").pop_front();
    let Some(Canned(status, hdrs, body, delay)) = next else {
        return (StatusCode::IM_A_TEAPOT, "script exhausted").into_response();
    };
    tokio::time::sleep(Duration::from_millis(delay)).await;
    let mut r = (StatusCode::from_u16(status).expect("a status"), body).into_response();
    for (k, v) in hdrs {
        r.headers_mut()
            .insert(k, v.parse().expect("a header value"));
    }
    r
}

/// Serve `script`; the server's state and base URL.
async fn serve(script: Vec<Canned>) -> (Arc<Server>, String) {
    let state = Arc::new(Server {
        script: Mutex::new(script.into()),
        seen: Mutex::default(),
    });
    let app = Router::new()
        .route("/model/{name}/{*path}", post(handle))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let addr = listener.local_addr().expect("an address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (state, format!("http://{addr}"))
}

fn client(base: &str, timeout_ms: u64) -> GatewayModel {
    let upstreams = BTreeMap::from([
        (
            "fast".to_owned(),
            Upstream {
                api: WireApi::Anthropic,
                model: "claude-x".into(),
                constrained: true,
            },
        ),
        (
            "strong".to_owned(),
            Upstream {
                api: WireApi::OpenAi,
                model: "gpt-x".into(),
                constrained: false,
            },
        ),
    ]);
    GatewayModel::new(
        base,
        "agent-token".into(),
        "fast",
        upstreams,
        Duration::from_millis(timeout_ms),
    )
    .expect("configures")
}

fn anthropic_ok(text: &str) -> Canned {
    let body = json!({"content": [{"type": "text", "text": text}], "usage": {"input_tokens": 9, "output_tokens": 4}, "stop_reason": "end_turn"});
    Canned(
        200,
        vec![("content-type", "application/json".into())],
        body.to_string(),
        0,
    )
}

fn agency_error(status: u16, kind: &str, message: &str) -> Canned {
    let body = json!({"error": {"kind": kind, "message": message}}).to_string();
    Canned(status, vec![], body, 0)
}

#[tokio::test]
async fn calls_go_to_the_upstreams_route_with_the_token() {
    let (server, base) = serve(vec![anthropic_ok("{}"), {
        let body = json!({"choices": [{"message": {"content": "{\"a\":1}"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 3, "completion_tokens": 2}});
        Canned(200, vec![], body.to_string(), 0)
    }])
    .await;
    let c = client(&base, 5000);
    let a = c.call(&request(true)).await.expect("answers");
    assert_eq!(
        (a.text.as_str(), a.input_tokens, a.output_tokens),
        ("{}", 9, 4)
    );
    let mut strong = request(true);
    strong.model = Some("strong".into());
    let b = c.call(&strong).await.expect("answers");
    assert_eq!(b.text, "{\"a\":1}");
    let seen = server.seen.lock().expect("not poisoned").clone();
    assert_eq!(seen[0].0, "/model/fast/v1/messages");
    assert_eq!(seen[0].1, "Bearer agent-token");
    assert_eq!(seen[0].2, ANTHROPIC_VERSION);
    assert_eq!(seen[0].3["model"], json!("claude-x"));
    assert_eq!(
        seen[0].3["output_config"]["format"]["type"],
        json!("json_schema")
    );
    assert_eq!(seen[1].0, "/model/strong/v1/chat/completions");
    assert_eq!(seen[1].2, "", "no anthropic-version on OpenAI calls");
    assert_eq!(
        seen[1].3["response_format"]["json_schema"]["strict"],
        json!(true)
    );
    assert!(c.constrained(None) && c.constrained(Some("fast")));
    assert!(!c.constrained(Some("strong")) && !c.constrained(Some("nope")));
}

#[tokio::test]
async fn answers_are_classified() {
    let cases: Vec<(Canned, &str)> = vec![
        (agency_error(429, "budget", "failed to reserve: budget of handler reached"), "budget"),
        (
            Canned(429, vec![("retry-after", "7".into())], json!({"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}).to_string(), 0),
            "transport 429 7",
        ),
        (agency_error(429, "rate_limited", "too many"), "transport 429 -"),
        (agency_error(403, "denied", "your handler's model upstream is cheap"), "policy"),
        (agency_error(401, "unauthorized", "bad token"), "policy"),
        (agency_error(502, "unavailable", "failed to reach model upstream fast"), "transport 502 -"),
        (Canned(529, vec![], json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}).to_string(), 0), "transport 529 -"),
        (agency_error(408, "timeout", "body too slow"), "transport 408 -"),
        (agency_error(404, "not_found", "no [models.fast]"), "invalid"),
        (agency_error(400, "invalid_request_error", "schema unsupported"), "invalid"),
        (Canned(200, vec![], "<html>".into(), 0), "invalid"),
    ];
    let n = cases.len();
    let (_, base) = serve(cases.iter().map(|c| c.0.clone()).collect()).await;
    let c = client(&base, 5000);
    for (canned, want) in cases.into_iter().take(n) {
        let got = match c.call(&request(true)).await {
            Ok(_) => "ok".to_owned(),
            Err(CallError::Budget(m)) => {
                assert!(m.contains("budget of handler reached"), "{m}");
                "budget".to_owned()
            }
            Err(CallError::Policy(_)) => "policy".to_owned(),
            Err(CallError::Invalid(_)) => "invalid".to_owned(),
            Err(CallError::Transport {
                status,
                retry_after,
                ..
            }) => format!(
                "transport {} {}",
                status.map_or("-".to_owned(), |s| s.to_string()),
                retry_after.map_or("-".to_owned(), |d| d.as_secs().to_string())
            ),
        };
        assert_eq!(got, want, "status {}: {}", canned.0, canned.2);
    }
}

#[tokio::test]
async fn unreachable_and_slow_gateways_are_transport_failures() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let addr = listener.local_addr().expect("an address");
    drop(listener);
    let c = client(&format!("http://{addr}"), 5000);
    assert!(matches!(
        c.call(&request(false)).await,
        Err(CallError::Transport { status: None, .. })
    ));
    let (_, base) = serve(vec![Canned(200, vec![], "{}".into(), 2000)]).await;
    let c = client(&base, 200);
    assert!(matches!(
        c.call(&request(false)).await,
        Err(CallError::Transport { status: None, .. })
    ));
}

#[test]
fn bad_configurations_are_refused() {
    let one = |name: &str| {
        BTreeMap::from([(
            name.to_owned(),
            Upstream {
                api: WireApi::Anthropic,
                model: "m".into(),
                constrained: false,
            },
        )])
    };
    let d = Duration::from_secs(1);
    let cases = [
        ("ftp://x", "fast", one("fast")),
        ("not a url", "fast", one("fast")),
        ("http://127.0.0.1:1", "fast", one("fa/st")),
        ("http://127.0.0.1:1", "other", one("fast")),
    ];
    for (base, default, ups) in cases {
        assert!(
            GatewayModel::new(base, "t".into(), default, ups, d).is_err(),
            "{base} {default}"
        );
    }
    let ok = GatewayModel::new(
        "http://127.0.0.1:1/",
        "secret-token".into(),
        "fast",
        one("fast"),
        d,
    )
    .expect("configures");
    assert!(!format!("{ok:?}").contains("secret-token"));
}

#[tokio::test]
async fn a_stage_rides_out_a_503_through_the_gateway() {
    let valid = r#"{"reflection": "shipped"}"#;
    let (server, base) = serve(vec![
        agency_error(503, "unavailable", "upstream down"),
        anthropic_ok(valid),
    ])
    .await;
    let c = client(&base, 5000);
    let stage = crate::validate::tests::stage(
        crate::validate::tests::learner_schema(),
        crate::validate::tests::learner_stamped(),
        vec![],
    );
    let contract = OutputContract::compile(&stage).expect("compiles");
    let deps = StageDeps {
        client: &c,
        clock: &SystemClock,
        sleeper: &TokioSleeper,
        backoff: Backoff {
            base: Duration::from_millis(10),
            cap: Duration::from_millis(50),
            max_tries: 3,
            max_retry_after: Duration::from_millis(50),
        },
    };
    let r = run_llm_stage(
        &stage,
        &contract,
        &Context::new(json!("task")),
        &crate::validate::Stamps::new(1, &Default::default()),
        &deps,
    )
    .await
    .expect("runs");
    assert_eq!(r.status, StageStatus::Ok);
    assert_eq!(
        (r.totals.calls, r.totals.transport_retries, r.totals.reasks),
        (2, 1, 0)
    );
    assert_eq!(
        r.artifact.expect("an artifact").value()["currentLevel"],
        json!(1)
    );
    let seen = server.seen.lock().expect("not poisoned").clone();
    assert_eq!(seen[0].3, seen[1].3, "the retry is the same request");
}
