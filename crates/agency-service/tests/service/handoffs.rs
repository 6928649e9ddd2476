//! Issue 11 item 6, bounded loops: two handlers bouncing mail, or a chain
//! that keeps delegating, stop at `max_handoffs` with a clear error; the
//! user's next message starts a new chain.

use agency_core::{Limits, MailTarget, Principal};
use agency_service::MailBody;

use crate::support::{Env, assert_kind};

fn text(t: &str) -> MailBody {
    MailBody::Text {
        subject: None,
        text: t.into(),
    }
}

#[test]
fn mail_bouncing_between_handlers_stops_at_the_handoff_limit() {
    let env = Env::with_limits(Limits {
        max_handoffs: 4,
        ..Limits::default()
    });
    let o = env.outcome(env.root, "work", &[env.root.root()]);
    // Delegation is hop 1.
    let a = env
        .svc
        .delegate(env.agent(env.root), o, &[])
        .unwrap()
        .handler;
    let (root, under) = (env.agent(env.root), env.agent(a));
    env.svc
        .mail_send(Principal::User, MailTarget::Handler(env.root), &text("go"))
        .unwrap();
    // root (0) → a (1) → root (2) → a (3) → root (4) → a: 5 > 4.
    env.svc
        .mail_send(root, MailTarget::Handler(a), &text("1"))
        .unwrap();
    env.svc
        .mail_send(under, MailTarget::Handler(env.root), &text("2"))
        .unwrap();
    env.svc
        .mail_send(root, MailTarget::Handler(a), &text("3"))
        .unwrap();
    env.svc
        .mail_send(under, MailTarget::Handler(env.root), &text("4"))
        .unwrap();
    let e = assert_kind(
        env.svc.mail_send(root, MailTarget::Handler(a), &text("5")),
        "quota",
    );
    let msg = e.to_string();
    assert!(msg.contains("handed on 4 times"), "{msg}");
    assert!(msg.contains("limits.max_handoffs = 4"), "{msg}");
    // Mail to the user and to oneself are not hand-offs.
    env.svc
        .mail_send(root, MailTarget::User, &text("report"))
        .unwrap();
    // The user's next message starts a new chain.
    env.svc
        .mail_send(
            Principal::User,
            MailTarget::Handler(env.root),
            &text("again"),
        )
        .unwrap();
    env.svc
        .mail_send(root, MailTarget::Handler(a), &text("1"))
        .unwrap();
}

#[test]
fn a_chain_of_delegations_stops_at_the_handoff_limit() {
    let env = Env::with_limits(Limits {
        max_handoffs: 3,
        ..Limits::default()
    });
    let mut h = env.root;
    let mut parent = env.root.root();
    for i in 0..3 {
        let o = env.outcome(h, &format!("level {i}"), &[parent]);
        h = env.svc.delegate(env.agent(h), o, &[]).unwrap().handler;
        parent = o;
    }
    let o = env.outcome(h, "level 3", &[parent]);
    let e = assert_kind(env.svc.delegate(env.agent(h), o, &[]), "quota");
    assert!(e.to_string().contains("max_handoffs"), "{e}");
    assert!(
        e.to_string().contains(&format!("delegate outcome {o}")),
        "{e}"
    );
}
