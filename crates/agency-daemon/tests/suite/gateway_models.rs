//! Issue 11 item 1, "the model per handler may differ", against a real
//! daemon: the user gives a handler its own upstream (`model_set`), its
//! underlings inherit it unless they have their own, and the gateway
//! serves an agent its handler's upstream only (a prompt-injected agent
//! asking another, dearer one is refused, 403, before anything reaches an
//! upstream). An upstream that names its `model` gets every call with that
//! model, whatever the agent asked for. Only the user sets it, and only
//! to a declared upstream.

#![allow(clippy::unwrap_used)]

use crate::fixture;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use agency_core::Principal;
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use fixture::{delegate_new, home_with_config, start};

const ANSWER: &str = r#"{"id":"m","type":"message","role":"assistant","content":[{"type":"text","text":"hi"}],"model":"x","stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":2}}"#;

/// A loopback upstream recording the `model` of every request.
#[derive(Clone, Default)]
struct Upstream(Arc<Mutex<Vec<String>>>);

impl Upstream {
    async fn start() -> (Upstream, SocketAddr) {
        let up = Upstream::default();
        let rec = up.clone();
        let app = axum::Router::new().route(
            "/v1/messages",
            axum::routing::post(move |body: Bytes| {
                let rec = rec.clone();
                async move {
                    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
                    rec.0
                        .lock()
                        .unwrap()
                        .push(v["model"].as_str().unwrap_or_default().to_owned());
                    ([("content-type", "application/json")], ANSWER).into_response()
                }
            }),
        );
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(l, app).await.unwrap() });
        (up, addr)
    }

    fn models(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

async fn call(base: &str, upstream: &str, token: &str) -> (StatusCode, String) {
    let r = reqwest::Client::new()
        .post(format!("{base}/model/{upstream}/v1/messages"))
        .header("x-api-key", token)
        .header("content-type", "application/json")
        .body(r#"{"model":"claude-opus-4-5","max_tokens":16,"messages":[]}"#)
        .send()
        .await
        .unwrap();
    (r.status(), r.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_handler_uses_its_own_upstream_inherited_and_no_other() {
    let (up, addr) = Upstream::start().await;
    let (_dir, home) = home_with_config(&format!(
        "[models.big]\napi = \"anthropic\"\nbase_url = \"http://{addr}\"\n\n[models.small]\napi = \"anthropic\"\nbase_url = \"http://{addr}\"\nmodel = \"claude-haiku-4-5\"\n"
    ));
    let (daemon, svc, root) = start(&home).await;
    let base = format!("http://{}", daemon.addr());
    let root_tok = svc.token_mint(Principal::User, root, None).unwrap();
    let child = delegate_new(
        &svc,
        Principal::agent(root, root_tok.agent),
        root,
        "Routine work",
    );
    let child_tok = svc.token_mint(Principal::User, child, None).unwrap();
    let grandchild = delegate_new(
        &svc,
        Principal::agent(child, child_tok.agent),
        child,
        "More routine work",
    );
    let grand_tok = svc.token_mint(Principal::User, grandchild, None).unwrap();

    // Nothing set, no runtime default (runtime "none"): any upstream, and
    // the model asked for, unless the upstream names its own.
    assert_eq!(call(&base, "big", &child_tok.token).await.0, StatusCode::OK);
    assert_eq!(
        call(&base, "small", &child_tok.token).await.0,
        StatusCode::OK
    );
    assert_eq!(up.models(), ["claude-opus-4-5", "claude-haiku-4-5"]);

    // The user gives the child `small`: the grandchild inherits it.
    let m = svc
        .model_set(Principal::User, child, Some("small"))
        .unwrap();
    assert_eq!(
        (m.own.as_deref(), m.effective.as_deref()),
        (Some("small"), Some("small"))
    );
    let g = svc.model_show(Principal::User, grandchild).unwrap();
    assert_eq!(
        (g.own, g.effective.as_deref(), g.set_on),
        (None, Some("small"), Some(child))
    );
    assert_eq!(svc.model_effective(root).unwrap(), None);

    // A prompt-injected agent of the subtree asks for the dearer upstream:
    // refused before it reaches anything.
    for tok in [&child_tok.token, &grand_tok.token] {
        let (s, body) = call(&base, "big", tok).await;
        assert_eq!(s, StatusCode::FORBIDDEN, "{body}");
        assert!(body.contains("model upstream is small"), "{body}");
        let (s, _) = call(&base, "small", tok).await;
        assert_eq!(s, StatusCode::OK);
    }
    assert_eq!(up.models().len(), 4, "{:?}", up.models());
    assert!(up.models()[2..].iter().all(|m| m == "claude-haiku-4-5"));
    // The root is not bound by its underling's choice.
    assert_eq!(call(&base, "big", &root_tok.token).await.0, StatusCode::OK);

    // The grandchild's own wins over the inherited one.
    svc.model_set(Principal::User, grandchild, Some("big"))
        .unwrap();
    assert_eq!(call(&base, "big", &grand_tok.token).await.0, StatusCode::OK);
    assert_eq!(
        call(&base, "small", &grand_tok.token).await.0,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        call(&base, "big", &child_tok.token).await.0,
        StatusCode::FORBIDDEN
    );
    // Cleared: inherited again.
    svc.model_set(Principal::User, grandchild, None).unwrap();
    assert_eq!(
        svc.model_effective(grandchild).unwrap().as_deref(),
        Some("small")
    );

    // Only the user sets it, even an agent for its own underling; only a
    // declared upstream; an agent may read its own handler's only.
    let e = svc
        .model_set(Principal::agent(root, root_tok.agent), child, Some("big"))
        .unwrap_err();
    assert!(e.to_string().contains("only the user"), "{e}");
    let e = svc
        .model_set(Principal::User, child, Some("nope"))
        .unwrap_err();
    assert!(
        e.to_string().contains("no [models.nope]") && e.to_string().contains("big, small"),
        "{e}"
    );
    assert!(
        svc.model_show(Principal::agent(child, child_tok.agent), child)
            .is_ok()
    );
    assert!(
        svc.model_show(Principal::agent(child, child_tok.agent), root)
            .is_err()
    );
    assert_eq!(
        svc.model_effective(child).unwrap().as_deref(),
        Some("small")
    );
    daemon.stop().await.unwrap();
}
