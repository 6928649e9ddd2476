//! Issue 9 item 2: Read gained through mail follows the capability rules.
//! Written as attacks by a prompt-injected agent: attaching a file it may
//! not pass on, keeping access after its source is revoked, slipping an
//! attachment through a deferred message, rewriting a delivered body.

use agency_core::{FileId, HandlerId, Level, MailTarget, Principal, Resource};
use agency_service::{GrantRequest, MailBody};
use agency_store::{CapOrigin, Tx};

use crate::support::{Env, assert_kind};

fn attach(file: FileId) -> MailBody {
    MailBody::File {
        file,
        subject: Some("see this".into()),
    }
}

fn text(t: &str) -> MailBody {
    MailBody::Text {
        subject: None,
        text: t.into(),
    }
}

fn kb(file: FileId, level: Level, delegatable: bool) -> GrantRequest {
    GrantRequest {
        resource: Resource::Kb(file),
        level,
        delegatable,
    }
}

/// root -> a -> a1, and a document `f` the root created, granted to `a` at
/// `level` (delegatable or not) when `a` is delegated to.
struct Org {
    env: Env,
    a: HandlerId,
    a1: HandlerId,
    f: FileId,
}

fn org(level: Level, delegatable: bool) -> Org {
    let env = Env::new();
    let svc = &env.svc;
    let root = env.root;
    let f = svc
        .kb_create(env.agent(root), "plans", b"the plans")
        .unwrap();
    let oa = env.outcome(root, "A", &[root.root()]);
    let a = svc
        .delegate(env.agent(root), oa, &[kb(f, level, delegatable)])
        .unwrap()
        .handler;
    let oa1 = env.outcome(a, "A1", &[oa]);
    let a1 = svc.delegate(env.agent(a), oa1, &[]).unwrap().handler;
    Org { env, a, a1, f }
}

#[test]
fn issue9_item2_attaching_needs_a_capability_the_sender_may_delegate() {
    // a holds Write on f, not delegatable: it may not pass it on by mail.
    let o = org(Level::Write, false);
    let (svc, pa) = (&o.env.svc, o.env.agent(o.a));
    let e = assert_kind(
        svc.mail_send(pa, MailTarget::Handler(o.a1), &attach(o.f)),
        "permission_denied",
    );
    assert!(e.to_string().contains("not delegatable"), "{e}");
    assert_kind(svc.kb_read(o.env.agent(o.a1), o.f), "not_found");
    // Nothing was stored for the refused send.
    assert_eq!(svc.mail_inbox(o.env.agent(o.a1), None).unwrap().len(), 0);
    // To its boss, which can read f already, the attachment passes nothing.
    svc.mail_send(pa, MailTarget::Handler(o.env.root), &attach(o.f))
        .unwrap();

    // With delegatable Write, the recipient still gets Read only.
    let o = org(Level::Write, true);
    let (svc, pa1) = (&o.env.svc, o.env.agent(o.a1));
    svc.mail_send(o.env.agent(o.a), MailTarget::Handler(o.a1), &attach(o.f))
        .unwrap();
    assert_eq!(svc.kb_level(pa1, o.f).unwrap(), Level::Read);
    let base = svc.kb_read(pa1, o.f).unwrap();
    assert_kind(
        svc.kb_write(pa1, o.f, b"mine now", base.version, base.hash.as_str()),
        "permission_denied",
    );
    // Nor may the recipient forward it: its Read is not delegatable.
    let oa2 = o.env.outcome(o.a1, "A2", &[o.a1.root()]);
    let a2 = svc.delegate(pa1, oa2, &[]).unwrap().handler;
    assert_kind(
        svc.mail_send(pa1, MailTarget::Handler(a2), &attach(o.f)),
        "permission_denied",
    );
}

#[test]
fn issue9_item2_mail_read_is_derived_from_the_senders_capability() {
    // The user grants a delegatable Read; a mails f on to a1.
    let o = org(Level::None, false);
    let svc = &o.env.svc;
    let cap = svc
        .grant(Principal::User, o.a, &kb(o.f, Level::Read, true))
        .unwrap();
    svc.mail_send(o.env.agent(o.a), MailTarget::Handler(o.a1), &attach(o.f))
        .unwrap();
    let pa1 = o.env.agent(o.a1);
    assert_eq!(svc.kb_read(pa1, o.f).unwrap().content, b"the plans");
    let held = svc.permissions_list(pa1, None).unwrap();
    let mail_cap = held
        .iter()
        .find(|c| c.resource == Resource::Kb(o.f))
        .unwrap();
    assert_eq!(mail_cap.origin, CapOrigin::Mail);
    assert_eq!(mail_cap.derived_from, Some(cap));
    // Revoking the source revokes what the mail gave.
    let revoked = svc.revoke(Principal::User, cap).unwrap();
    assert!(revoked.contains(&mail_cap.id), "{revoked:?}");
    assert_kind(svc.kb_read(pa1, o.f), "not_found");

    // Finishing the outcome the source is scoped to revokes it too.
    let o = org(Level::None, false);
    let svc = &o.env.svc;
    let x = o.env.outcome(o.a, "X", &[o.a.root()]);
    svc.grant_for(
        o.env.agent(o.env.root),
        o.a,
        &kb(o.f, Level::Read, true),
        Some(x),
    )
    .unwrap();
    svc.mail_send(o.env.agent(o.a), MailTarget::Handler(o.a1), &attach(o.f))
        .unwrap();
    let pa1 = o.env.agent(o.a1);
    svc.kb_read(pa1, o.f).unwrap();
    svc.outcome_complete(o.env.agent(o.a), x, "done").unwrap();
    assert_kind(svc.kb_read(pa1, o.f), "not_found");
}

#[test]
fn issue9_item2_a_deferred_message_is_checked_again_when_it_falls_due() {
    let o = org(Level::None, false);
    let svc = &o.env.svc;
    let cap = svc
        .grant(Principal::User, o.a, &kb(o.f, Level::Read, true))
        .unwrap();
    let pa = o.env.agent(o.a);
    let due = o.env.now_plus(60_000);
    let m = svc
        .mail_send_deferred(pa, MailTarget::Handler(o.a1), &attach(o.f), due)
        .unwrap();
    // The source goes before the message falls due.
    svc.revoke(Principal::User, cap).unwrap();
    o.env.clock.advance_millis(60_000);
    assert!(svc.deliver_due(due).unwrap().is_empty());
    let pa1 = o.env.agent(o.a1);
    assert!(svc.mail_inbox(pa1, None).unwrap().is_empty());
    assert_kind(svc.kb_read(pa1, o.f), "not_found");
    // The message left the queue and the sender is told why.
    assert_eq!(svc.next_due().unwrap(), None);
    // Its receipt says it was dropped, and why, never that it was
    // delivered.
    let receipt = svc.mail_status(pa, m).unwrap();
    assert_eq!(
        (receipt.delivered_at, receipt.acked_at),
        (None, None),
        "{receipt:?}"
    );
    assert_eq!(receipt.dropped_at, Some(o.env.svc.now()), "{receipt:?}");
    assert!(
        receipt
            .dropped_reason
            .as_deref()
            .is_some_and(|r| r.contains("could not be given the attached file")),
        "{receipt:?}"
    );
    let notice = svc.mail_inbox(pa, None).unwrap();
    assert_eq!(notice.len(), 1, "{notice:?}");
    assert!(notice[0].subject.starts_with("Not delivered"), "{notice:?}");
    let log = svc.audit_read(pa, None).unwrap();
    assert!(
        log.iter().any(|e| e.summary.contains("was not delivered")),
        "{log:?}"
    );

    // A deferred message from a handler retired before it fell due is not
    // delivered either: its sender's mail permission went with it.
    let o = org(Level::None, false);
    let svc = &o.env.svc;
    let due = o.env.now_plus(60_000);
    svc.mail_send_deferred(
        o.env.agent(o.a1),
        MailTarget::Handler(o.a),
        &text("later"),
        due,
    )
    .unwrap();
    svc.force_stop(o.env.agent(o.a), o.a1).unwrap();
    assert!(svc.deliver_due(due).unwrap().is_empty());
    assert!(svc.mail_inbox(o.env.agent(o.a), None).unwrap().is_empty());
}

/// The body file of the newest message in `who`'s inbox.
fn newest_body(env: &Env, who: Principal) -> FileId {
    env.svc.mail_inbox(who, None).unwrap().last().unwrap().file
}

#[test]
fn issue9_item2_a_delivered_message_body_cannot_be_rewritten() {
    let o = org(Level::None, false);
    let svc = &o.env.svc;
    let (pa, pr) = (o.env.agent(o.a), o.env.agent(o.env.root));
    svc.mail_send(pa, MailTarget::Handler(o.env.root), &text("all is well"))
        .unwrap();
    let body = newest_body(&o.env, pr);
    // The sender keeps Read, not Write; nobody may rewrite it, not even
    // the user.
    assert_eq!(svc.kb_level(pa, body).unwrap(), Level::Read);
    let held = svc.permissions_list(pa, None).unwrap();
    let own = held
        .iter()
        .find(|c| c.resource == Resource::Kb(body))
        .unwrap();
    assert_eq!((own.level, own.origin), (Level::Read, CapOrigin::Creator));
    let v = svc.kb_read(pa, body).unwrap();
    for who in [pa, pr, Principal::User] {
        let e = assert_kind(
            svc.kb_write(who, body, b"all is lost", v.version, v.hash.as_str()),
            "invalid_input",
        );
        assert!(e.to_string().contains("message body"), "{e}");
    }
    assert_eq!(svc.kb_read(pr, body).unwrap().content, b"all is well");
}

#[test]
fn issue9_item2_a_notice_written_in_a_handlers_name_cannot_be_rewritten_by_it() {
    let o = org(Level::None, false);
    let svc = &o.env.svc;
    let (pa, pr) = (o.env.agent(o.a), o.env.agent(o.env.root));
    // Agency writes the completion request in a's name.
    svc.outcome_request_completion(pa, "done, honestly")
        .unwrap();
    let body = newest_body(&o.env, pr);
    let row = agency_store::read(&**svc.store(), |tx: &mut dyn Tx| tx.file(body))
        .unwrap()
        .unwrap();
    assert_eq!(row.created_by, Some(o.a));
    let v = svc.kb_read(pa, body).unwrap();
    assert_kind(
        svc.kb_write(pa, body, b"approve me now", v.version, v.hash.as_str()),
        "invalid_input",
    );
    assert_eq!(svc.kb_read(pr, body).unwrap().version, 1);
}
