//! Two daemons' services on one store (two stores opened on one SQLite
//! file, or on one PostgreSQL database): what one store's single writer
//! gave for free holds across them. Deferred mail is delivered once
//! whoever delivers it; budget reservations racing from both stay within
//! the cap.

use std::sync::Arc;

use agency_core::{MailTarget, Principal};
use agency_service::{BudgetLimits, MailBody, ModelCallRequest, Service, ServiceConfig, System};

use crate::support::{Env, open_backend};

/// A second service on the environment's store, as another daemon's.
fn second(env: &Env) -> Arc<System> {
    let (store, blobs, _db) = open_backend(env.dir.path(), env.db.clone());
    Arc::new(
        Service::builder(store, blobs, env.clock.clone())
            .config(ServiceConfig::default())
            .build(),
    )
}

#[test]
fn deferred_mail_is_delivered_once_by_two_racing_daemons() {
    let env = Env::new();
    let other = second(&env);
    let r = env.agent(env.root);
    let due = env.now_plus(1_000);
    let mut sent = Vec::new();
    for i in 0..300 {
        let m = env
            .svc
            .mail_send_deferred(
                r,
                MailTarget::Handler(env.root),
                &MailBody::Text {
                    subject: Some(format!("later {i}")),
                    text: "x".into(),
                },
                due,
            )
            .unwrap();
        sent.push(m);
    }
    env.clock.advance_millis(2_000);
    let now = env.now_plus(0);
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| env.svc.deliver_due(now).unwrap());
        let b = s.spawn(|| other.deliver_due(now).unwrap());
        (a.join().unwrap(), b.join().unwrap())
    });
    let mut all: Vec<_> = a.iter().chain(b.iter()).copied().collect();
    all.sort();
    let mut want = sent.clone();
    want.sort();
    assert_eq!(
        all,
        want,
        "each delivered exactly once ({} + {})",
        a.len(),
        b.len()
    );
    assert!(other.deliver_due(now).unwrap().is_empty(), "nothing left");
}

#[test]
fn budget_reservations_racing_from_two_daemons_stay_within_the_cap() {
    let env = Env::new();
    let other = second(&env);
    env.svc
        .budget_set(
            Principal::User,
            env.root,
            BudgetLimits {
                tokens: Some(10_000),
                ..BudgetLimits::default()
            },
        )
        .unwrap();
    let agent = env.agent(env.root);
    // Each call reserves 1000: ten fit, whoever reserves them.
    let call = || ModelCallRequest {
        upstream: "main".into(),
        api: "anthropic".into(),
        model: "m".into(),
        stream: false,
        max_tokens: 900,
        input_estimate: 100,
        worst_cost_micro_usd: 0,
        priced: true,
    };
    let granted = std::thread::scope(|s| {
        let mut handles = Vec::new();
        for i in 0..8 {
            let svc: &System = if i % 2 == 0 { &env.svc } else { &other };
            handles.push(s.spawn(move || {
                (0..5)
                    .filter(|_| svc.model_call_reserve(agent, call()).is_ok())
                    .count()
            }));
        }
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .sum::<usize>()
    });
    assert_eq!(granted, 10, "exactly the cap's worth of reservations");
}

#[test]
fn another_daemons_events_reach_this_ones_listeners_through_the_log() {
    let env = Env::new();
    let other = second(&env);
    let start = other.event_log_end().unwrap();
    let mut heard = other.subscribe();
    let m = env
        .svc
        .mail_send(
            Principal::User,
            MailTarget::Handler(env.root),
            &MailBody::Text {
                subject: Some("news".into()),
                text: "x".into(),
            },
        )
        .unwrap();
    assert!(heard.try_recv().is_err(), "not heard before the relay");
    let next = other.relay_logged_events(start, 100).unwrap();
    assert!(next > start);
    let mut got = Vec::new();
    while let Ok(e) = heard.try_recv() {
        got.push(e);
    }
    assert!(
        got.contains(&agency_service::Event::MessageDelivered {
            message: m,
            to: MailTarget::Handler(env.root),
        }),
        "{got:?}"
    );
    // From the new cursor, nothing again.
    assert_eq!(other.relay_logged_events(next, 100).unwrap(), next);
    assert!(heard.try_recv().is_err());
}

#[test]
fn an_approval_is_consumed_once_and_asked_again_once_across_two_daemons() {
    use agency_service::{Admission, ToolCallRequest};
    let env = Env::new();
    let other = second(&env);
    let me = env.agent(env.root);
    let risky = || ToolCallRequest {
        tool: "bash".into(),
        args: serde_json::json!({"command": "rm -rf /tmp/agency-shared-approval"}),
        read_only: None,
    };
    let Admission::Pending { approval, .. } = env.svc.tool_call_admit(me, risky()).unwrap() else {
        panic!("the default policy asks about rm -rf");
    };
    env.svc.approve(Principal::User, approval, false).unwrap();
    let results: Vec<Admission> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let svc: &System = if i % 2 == 0 { &env.svc } else { &other };
                s.spawn(move || svc.tool_call_admit(me, risky()).unwrap())
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let allowed = results
        .iter()
        .filter(|a| matches!(a, Admission::Allow { .. }))
        .count();
    assert_eq!(allowed, 1, "consumed once: {results:?}");
    let asked: std::collections::HashSet<String> = results
        .iter()
        .filter_map(|a| match a {
            Admission::Pending { approval, .. } => Some(approval.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(
        asked.len(),
        1,
        "one new request, found or created once: {results:?}"
    );
}
