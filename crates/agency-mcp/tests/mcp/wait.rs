//! `mail_wait` (issue 13 item 6): it answers at once when mail waits,
//! wakes when mail is delivered to the caller's handler and to no other,
//! names no handler (an agent can wait only on its own inbox), ends when
//! the agent is no longer live (a revoked token), and answers `released`
//! when the daemon's warm pool asks for the agent's slot back.

use std::sync::{Arc, Mutex};

use agency_core::{HandlerId, MailTarget, Principal};
use agency_mcp::{AgentIdentity, CancellationToken, RouterOptions, WarmPool};
use agency_service::{MailBody, NewOutcome, Service};
use serde_json::json;

use crate::support::{Agency, call, connect, err, ok, serve, serve_router};

fn send(svc: &Service, from: Principal, to: HandlerId, subject: &str) {
    svc.mail_send(
        from,
        MailTarget::Handler(to),
        &MailBody::Text {
            subject: Some(subject.into()),
            text: "hello".into(),
        },
    )
    .unwrap();
}

/// A handler delegated by the root's agent, with a live agent of its own.
fn underling(a: &Agency) -> AgentIdentity {
    let by = Principal::agent(a.root, a.agent);
    let o = a
        .svc
        .outcome_create(
            by,
            &NewOutcome {
                title: "Sweep the yard".into(),
                parents: vec![a.root.root()],
                ..Default::default()
            },
        )
        .unwrap();
    let handler = a.svc.delegate(by, o, &[]).unwrap().handler;
    let agent = a.sys.agent_start(handler).unwrap();
    AgentIdentity {
        handler,
        agent,
        workspace: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mail_wait_answers_waiting_mail_and_wakes_on_delivery() {
    let a = Agency::new();
    let server = serve(a.svc.clone(), Some(a.identity())).await;
    let c = Arc::new(connect(&server.url).await.unwrap());

    let r = ok(&call(&c, "mail_wait", json!({ "timeout_ms": 50 })).await);
    assert_eq!(r, json!({ "status": "timeout" }));

    // A wait in progress is woken by a delivery to its handler.
    let waiter = {
        let c = c.clone();
        tokio::spawn(async move { call(&c, "mail_wait", json!({ "timeout_ms": 120000 })).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    send(&a.svc, Principal::User, a.root, "Compost question");
    let r = ok(&waiter.await.unwrap());
    assert_eq!(r["status"], "mail", "{r}");
    assert_eq!(r["messages"][0]["subject"], "Compost question");
    assert_eq!(r["messages"][0]["from"], json!({ "kind": "user" }));
    let id = r["messages"][0]["id"].as_str().unwrap().to_owned();

    // Unacknowledged mail answers at once, unless it is known already.
    let r = ok(&call(&c, "mail_wait", json!({ "timeout_ms": 120000 })).await);
    assert_eq!(r["messages"][0]["id"], id.as_str());
    let r = ok(&call(&c, "mail_wait", json!({ "timeout_ms": 50, "ignore": [id] })).await);
    assert_eq!(r["status"], "timeout");
    let r = call(&c, "mail_wait", json!({ "ignore": ["nope"] })).await;
    err(&r, "invalid_input");
}

/// The attack: an agent waits on its own handler's inbox and no other.
/// Mail to another handler does not wake it, and no argument names one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mail_wait_waits_on_the_callers_own_handler_only() {
    let a = Agency::new();
    let u = underling(&a);
    let server = serve(a.svc.clone(), Some(u.clone())).await;
    let c = Arc::new(connect(&server.url).await.unwrap());

    let r = call(&c, "mail_wait", json!({ "handler": a.root.to_string() })).await;
    err(&r, "invalid_input");

    let waiter = {
        let c = c.clone();
        tokio::spawn(async move { call(&c, "mail_wait", json!({ "timeout_ms": 1500 })).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    // The root's mail is the root's: the underling's wait sees nothing.
    send(&a.svc, Principal::User, a.root, "For the root only");
    let r = ok(&waiter.await.unwrap());
    assert_eq!(r, json!({ "status": "timeout" }));

    // Mail to the underling from its boss does reach it.
    send(
        &a.svc,
        Principal::agent(a.root, a.agent),
        u.handler,
        "For the underling",
    );
    let r = ok(&call(&c, "mail_wait", json!({ "timeout_ms": 50 })).await);
    assert_eq!(r["messages"][0]["subject"], "For the underling");
    assert_eq!(r["messages"].as_array().unwrap().len(), 1);
}

/// A wait ends when its agent does (a revoked token, a stop): the next look
/// is refused rather than the wait running on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_ends_when_its_agent_is_ended() {
    let a = Agency::new();
    let u = underling(&a);
    let server = serve(a.svc.clone(), Some(u.clone())).await;
    let c = Arc::new(connect(&server.url).await.unwrap());
    let waiter = {
        let c = c.clone();
        tokio::spawn(async move { call(&c, "mail_wait", json!({ "timeout_ms": 120000 })).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(a.sys.agent_end(u.agent, "token revoked").unwrap());
    // Bounded so that a wait that does not end fails the test instead of
    // running to its 120 s timeout.
    let r = tokio::time::timeout(std::time::Duration::from_secs(60), waiter)
        .await
        .expect("the wait did not end with its agent")
        .unwrap();
    err(&r, "permission_denied");
}

/// A stand-in for the daemon's warm registry: records parks and can
/// release.
#[derive(Debug, Default)]
struct Pool {
    parked: Mutex<Vec<(AgentIdentity, CancellationToken)>>,
    unparked: Mutex<usize>,
}

impl WarmPool for Pool {
    fn park(&self, caller: &AgentIdentity) -> CancellationToken {
        let t = CancellationToken::new();
        self.parked
            .lock()
            .unwrap()
            .push((caller.clone(), t.clone()));
        t
    }
    fn unpark(&self, _caller: &AgentIdentity) {
        *self.unparked.lock().unwrap() += 1;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_agent_is_released_when_its_slot_is_wanted() {
    let a = Agency::new();
    let pool = Arc::new(Pool::default());
    let app = agency_mcp::router_with(
        a.svc.clone(),
        RouterOptions {
            warm: Some(pool.clone()),
            ..Default::default()
        },
    );
    let server = serve_router(app, a.identity()).await;
    let c = Arc::new(connect(&server.url).await.unwrap());
    let waiter = {
        let c = c.clone();
        tokio::spawn(async move { call(&c, "mail_wait", json!({ "timeout_ms": 120000 })).await })
    };
    let token = loop {
        if let Some((who, t)) = pool.parked.lock().unwrap().first().cloned() {
            assert_eq!(who, a.identity());
            break t;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    token.cancel();
    let r = ok(&waiter.await.unwrap());
    assert_eq!(r, json!({ "status": "released" }));
    assert_eq!(*pool.unparked.lock().unwrap(), 1);
}

/// Waiting costs nothing but time: `mail_wait` is not charged to the
/// tool-call budget (an ordinary tool is).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mail_wait_is_not_charged_to_the_tool_call_budget() {
    let a = Agency::new();
    let server = serve(a.svc.clone(), Some(a.identity())).await;
    let c = connect(&server.url).await.unwrap();
    a.svc
        .budget_set(
            Principal::User,
            a.root,
            agency_service::BudgetLimits {
                tool_calls: Some(5),
                ..agency_service::BudgetLimits::default()
            },
        )
        .unwrap();
    for _ in 0..3 {
        ok(&call(&c, "mail_wait", json!({ "timeout_ms": 1 })).await);
    }
    ok(&call(&c, "mail_inbox", json!({})).await);
    let shown = a.svc.budget_show(Principal::User, None).unwrap();
    assert_eq!(shown.spent.tool_calls, 1);
}
