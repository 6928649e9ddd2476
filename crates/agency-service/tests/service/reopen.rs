//! Issue 9 item 13: reopening a completed or closed outcome — who may, what
//! it records, and what happens when the handler responsible has retired.

use agency_core::{HandlerId, Level, OutcomeId, OutcomeStatus, Principal, Resource};
use agency_service::{GrantRequest, MailBody};
use agency_store::HandlerStatus;

use crate::support::{Env, assert_kind};

/// The root handler delegated A to `u`; `u` has its own outcome `c` and
/// delegated `d` to `w`, which has work `e` and holds a capability `u`
/// granted it.
struct Org {
    env: Env,
    a: OutcomeId,
    c: OutcomeId,
    d: OutcomeId,
    e: OutcomeId,
    u: HandlerId,
    w: HandlerId,
}

fn org() -> Org {
    let env = Env::new();
    let svc = env.svc.clone();
    let r = env.agent(env.root);
    let a = env.outcome(env.root, "A", &[env.root.root()]);
    let u = svc.delegate(r, a, &[]).unwrap().handler;
    let c = env.outcome(u, "C", &[a]);
    let d = env.outcome(u, "D", &[a]);
    let w = svc.delegate(env.agent(u), d, &[]).unwrap().handler;
    let e = env.outcome(w, "E", &[d]);
    let notes = svc.kb_create(env.agent(u), "U's notes", b"notes").unwrap();
    svc.grant(
        env.agent(u),
        w,
        &GrantRequest {
            resource: Resource::Kb(notes),
            level: Level::Read,
            delegatable: false,
        },
    )
    .unwrap();
    Org {
        env,
        a,
        c,
        d,
        e,
        u,
        w,
    }
}

fn status(o: &Org, id: OutcomeId) -> OutcomeStatus {
    o.env
        .svc
        .outcome_view(Principal::User, id)
        .unwrap()
        .outcome
        .status
}

#[test]
fn issue9_item13_who_may_reopen_a_non_root_outcome() {
    let o = org();
    let svc = &o.env.svc;
    let (r, up, wp) = (o.env.agent(o.env.root), o.env.agent(o.u), o.env.agent(o.w));
    svc.outcome_complete(up, o.c, "done").unwrap();
    // A handler's own root is its boss's to reopen; the boss of a handler
    // may not reopen that handler's own outcomes.
    let e = assert_kind(svc.outcome_reopen(up, o.a, "x"), "permission_denied");
    assert!(e.to_string().contains("your own root"), "{e}");
    let e = assert_kind(svc.outcome_reopen(r, o.e, "x"), "permission_denied");
    assert!(e.to_string().starts_with("failed to reopen outcome"), "{e}");
    // The boss above the responsible handler could not complete C, so it
    // may not reopen it; the underling below does not even see it.
    assert_kind(svc.outcome_reopen(r, o.c, "redo"), "permission_denied");
    assert_kind(svc.outcome_reopen(wp, o.c, "redo"), "not_found");
    assert_kind(svc.outcome_reopen(up, o.c, " "), "invalid_input");
    assert_eq!(status(&o, o.c), OutcomeStatus::Completed);
    // The handler that completed it may, with a rationale kept in history
    // and in its Markdown.
    let rep = svc.outcome_reopen(up, o.c, "the tests were wrong").unwrap();
    assert_eq!(
        (rep.status, rep.responsible, rep.outcomes_reclaimed),
        (OutcomeStatus::Open, o.u, 0)
    );
    assert_eq!(status(&o, o.c), OutcomeStatus::Open);
    let view = svc.outcome_view(up, o.c).unwrap();
    let last = view.history.last().unwrap();
    assert_eq!(last.action, "reopened");
    assert!(
        last.detail.contains("the tests were wrong"),
        "{}",
        last.detail
    );
    assert_eq!(last.handler, Some(o.u));
    let md = svc.kb_read(up, o.c.file()).unwrap().text();
    assert!(
        md.contains("reopened") && md.contains("the tests were wrong"),
        "{md}"
    );
    // Open again: a second reopen is refused with the reason.
    let e = assert_kind(svc.outcome_reopen(up, o.c, "again"), "invalid_input");
    assert!(e.to_string().contains("it is open"), "{e}");
    // Closed outcomes reopen too; the user may reopen, and the responsible
    // handler is told by mail.
    svc.outcome_close(up, o.c, "not needed").unwrap();
    svc.outcome_reopen(Principal::User, o.c, "needed after all")
        .unwrap();
    assert_eq!(status(&o, o.c), OutcomeStatus::Open);
    let inbox = svc.mail_inbox(up, None).unwrap();
    let notice = inbox
        .iter()
        .find(|m| m.subject == "Outcome reopened: C")
        .expect("the responsible handler is told");
    assert!(notice.body.as_deref().unwrap().contains("needed after all"));
}

#[test]
fn issue9_item13_reopening_a_retired_handlers_root_makes_the_boss_responsible() {
    let o = org();
    let svc = &o.env.svc;
    let (r, up) = (o.env.agent(o.env.root), o.env.agent(o.u));
    let wp = o.env.agent(o.w);
    assert_eq!(svc.permissions_list(wp, None).unwrap().len(), 2);
    // The boss completes W's root while W still has open work: W retires
    // and loses its capabilities.
    svc.outcome_complete(up, o.d, "good enough").unwrap();
    assert_eq!(
        svc.handler_view(up, o.w).unwrap().status,
        HandlerStatus::Deactivated
    );
    assert!(
        svc.permissions_list(Principal::User, Some(o.w))
            .unwrap()
            .is_empty()
    );
    // Only W's boss may reopen it (the root handler is not W's boss).
    assert_kind(svc.outcome_reopen(r, o.d, "redo"), "permission_denied");
    assert!(svc.outcome_reopen(wp, o.d, "redo").is_err());
    let rep = svc
        .outcome_reopen(up, o.d, "the API is still missing")
        .unwrap();
    assert_eq!(rep.responsible, o.u);
    assert!(rep.outcomes_reclaimed >= 2, "{rep:?}");
    // The boss is responsible again, for the root and the open work below
    // it, and has work; W stays retired with nothing revived.
    for id in [o.d, o.e] {
        assert_eq!(
            svc.outcome_view(up, id).unwrap().outcome.responsible,
            o.u,
            "{id}"
        );
    }
    assert_eq!(status(&o, o.d), OutcomeStatus::Open);
    assert_eq!(
        svc.handler_view(up, o.w).unwrap().status,
        HandlerStatus::Deactivated
    );
    assert!(
        svc.permissions_list(Principal::User, Some(o.w))
            .unwrap()
            .is_empty()
    );
    assert!(svc.outcome_view(wp, o.d).is_err(), "W's token works again");
    assert!(svc.has_work(o.u).unwrap());
    let history = svc.outcome_view(up, o.d).unwrap().history;
    let last = history.last().unwrap();
    assert_eq!(last.action, "reopened");
    assert!(
        last.detail.contains("the API is still missing")
            && last
                .detail
                .contains(&format!("handler {} is responsible again", o.u)),
        "{}",
        last.detail
    );
    let log = svc.audit_read(up, Some(o.w)).unwrap();
    assert!(format!("{log:?}").contains("reopened"), "{log:?}");
    // It can now be redone by the boss or delegated afresh: W comes back
    // with its work, but only with what the new delegation grants.
    let again = svc.delegate(up, o.d, &[]).unwrap();
    assert!(again.reactivated);
    assert_eq!(svc.outcome_view(up, o.e).unwrap().outcome.responsible, o.w);
    let caps = svc.permissions_list(Principal::User, Some(o.w)).unwrap();
    assert!(
        caps.iter().all(|c| matches!(c.resource, Resource::Mail(_))),
        "{caps:?}"
    );
}

#[test]
fn issue9_item13_the_user_reopens_below_a_retired_line() {
    let o = org();
    let svc = &o.env.svc;
    let r = o.env.agent(o.env.root);
    svc.outcome_complete(o.env.agent(o.w), o.e, "done").unwrap();
    // Completing A retires U and W together.
    svc.outcome_complete(r, o.a, "shipped").unwrap();
    // Neither can act any more; the user may reopen W's finished work, and
    // the nearest active boss (the root handler) takes it back and is told.
    let rep = svc
        .outcome_reopen(Principal::User, o.e, "a customer found a bug")
        .unwrap();
    assert_eq!(rep.responsible, o.env.root);
    assert_eq!(status(&o, o.e), OutcomeStatus::Open);
    assert_eq!(
        svc.outcome_view(r, o.e).unwrap().outcome.responsible,
        o.env.root
    );
    assert!(svc.has_work(o.env.root).unwrap());
    for h in [o.u, o.w] {
        assert_eq!(
            svc.handler_view(Principal::User, h).unwrap().status,
            HandlerStatus::Deactivated
        );
    }
    assert!(
        svc.mail_inbox(r, None)
            .unwrap()
            .iter()
            .any(|m| m.subject == "Outcome reopened: E")
    );
}

#[test]
fn issue9_item13_a_process_inbox_is_not_reopened() {
    let o = org();
    let svc = &o.env.svc;
    let up = o.env.agent(o.u);
    svc.mail_send(
        Principal::User,
        agency_core::MailTarget::Handler(o.u),
        &MailBody::Text {
            subject: Some("hi".into()),
            text: "hello".into(),
        },
    )
    .unwrap();
    let inbox = svc.mail_inbox(up, None).unwrap();
    let ids: Vec<_> = inbox.iter().map(|m| m.id).collect();
    let pi = svc
        .outcomes_of(up, o.u)
        .unwrap()
        .into_iter()
        .find(|x| x.process_inbox)
        .unwrap()
        .id;
    svc.mail_ack(up, &ids).unwrap();
    assert_eq!(status(&o, pi), OutcomeStatus::Completed);
    let e = assert_kind(svc.outcome_reopen(up, pi, "x"), "invalid_input");
    assert!(e.to_string().contains("Process Inbox"), "{e}");
}
