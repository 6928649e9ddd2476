//! Mail rules: who may write to whom, deferred delivery (also across a
//! restart), Process Inbox outcomes, acknowledgement receipts.

use agency_core::{MailTarget, OutcomeStatus, Principal};
use agency_service::{Event, MailBody};

use crate::support::{Env, assert_kind};

fn text(t: &str) -> MailBody {
    MailBody::Text {
        subject: None,
        text: t.into(),
    }
}

#[test]
fn who_may_write_to_whom() {
    let env = Env::new();
    let svc = &env.svc;
    let root = env.root;
    let r = env.agent(root);
    let a = env.outcome(root, "A", &[root.root()]);
    let b = env.outcome(root, "B", &[root.root()]);
    let ha = svc.delegate(r, a, &[]).unwrap().handler;
    let hb = svc.delegate(r, b, &[]).unwrap().handler;
    let a1 = env.outcome(ha, "A1", &[a]);
    let ha1 = svc.delegate(env.agent(ha), a1, &[]).unwrap().handler;
    let (pa, pb, pa1) = (env.agent(ha), env.agent(hb), env.agent(ha1));
    let h = MailTarget::Handler;

    let allowed = [
        (Principal::User, h(root)),
        (r, MailTarget::User),
        (r, h(ha)),
        (pa, h(root)),
        (pa, h(ha1)),
        (pa1, h(ha)),
        (pa, h(ha)), // a handler to itself
    ];
    for (from, to) in allowed {
        svc.mail_send(from, to, &text("hello"))
            .unwrap_or_else(|e| panic!("{from} -> {to:?}: {e}"));
    }
    let refused = [
        (pa1, h(root)),                                // skip-level up
        (r, h(ha1)),                                   // skip-level down
        (pa, h(hb)),                                   // sibling
        (pa, MailTarget::User), // not the root, and the user never wrote to it
        (pa, h(agency_core::HandlerId::new_random())), // nobody
        (pb, h(ha)),            // sibling, the other way
    ];
    let mut texts = Vec::new();
    for (from, to) in refused {
        let e = assert_kind(svc.mail_send(from, to, &text("psst")), "permission_denied");
        texts.push(e.to_string().replace(&to_string(to), "<target>"));
    }
    // A target that does not exist is refused exactly like one that does.
    assert_eq!(texts[3 - 1], texts[4]);

    // Direct intervention: the user writes to a deep handler, which may then answer.
    svc.mail_send(Principal::User, h(ha1), &text("how is it going?"))
        .unwrap();
    svc.mail_send(pa1, MailTarget::User, &text("fine")).unwrap();
    let user_inbox = svc.mail_inbox(Principal::User, None).unwrap();
    assert!(user_inbox.iter().any(|m| m.body.as_deref() == Some("fine")));
}

fn to_string(t: MailTarget) -> String {
    match t {
        MailTarget::User => "the user".into(),
        MailTarget::Handler(h) => format!("handler {h}"),
    }
}

#[test]
fn deferred_mail_is_delivered_when_due_and_processing_completes_the_inbox_outcome() {
    let env = Env::new();
    let svc = &env.svc;
    let root = env.root;
    let r = env.agent(root);
    let mut events = svc.subscribe();
    let due = env.now_plus(3_600_000);
    let id = svc
        .mail_send_deferred(
            r,
            MailTarget::Handler(root),
            &text("remember the milk"),
            due,
        )
        .unwrap();
    assert!(svc.mail_inbox(r, None).unwrap().is_empty());
    assert_eq!(svc.next_due().unwrap(), Some(due));
    assert!(svc.deliver_due(env.now_plus(0)).unwrap().is_empty());
    assert!(!svc.has_work(root).unwrap());

    env.clock.advance_millis(3_600_000);
    assert_eq!(svc.deliver_due(env.now_plus(0)).unwrap(), vec![id]);
    assert!(svc.has_work(root).unwrap());
    let mut saw_delivery = false;
    while let Ok(e) = events.try_recv() {
        saw_delivery |= e
            == Event::MessageDelivered {
                message: id,
                to: MailTarget::Handler(root),
            };
    }
    assert!(saw_delivery);

    // The Process Inbox outcome cannot be finished while mail is unacknowledged.
    let pi = svc
        .outcomes_of(Principal::User, root)
        .unwrap()
        .into_iter()
        .find(|o| o.process_inbox && o.status == OutcomeStatus::Open)
        .expect("a Process Inbox outcome");
    assert_kind(svc.outcome_complete(r, pi.id, "done"), "invalid_input");
    let status = svc.mail_status(r, id).unwrap();
    assert!(status.delivered_at.is_some() && status.acked_at.is_none());
    assert_eq!(svc.mail_ack(r, &[id]).unwrap(), 1);
    assert!(svc.mail_status(r, id).unwrap().acked_at.is_some());
    let pi_now = svc.outcome_view(r, pi.id).unwrap().outcome;
    assert_eq!(pi_now.status, OutcomeStatus::Completed);
    assert!(!svc.has_work(root).unwrap());
    // Acknowledging someone else's message is refused as not found.
    assert_kind(svc.mail_ack(Principal::User, &[id]), "not_found");
}

#[test]
fn deferred_mail_that_fell_due_while_nothing_ran_is_delivered_after_restart() {
    let env = Env::new();
    let root = env.root;
    let r = env.agent(root);
    let due = env.now_plus(60_000);
    let id = env
        .svc
        .mail_send_deferred(r, MailTarget::Handler(root), &text("wake up"), due)
        .unwrap();
    let env = env.reopen();
    env.clock.advance_millis(24 * 3_600_000);
    assert_eq!(env.svc.deliver_due(env.now_plus(0)).unwrap(), vec![id]);
    let inbox = env.svc.mail_inbox(env.agent(root), None).unwrap();
    assert_eq!(inbox.len(), 1);
    assert_eq!(inbox[0].body.as_deref(), Some("wake up"));
}

#[test]
fn attaching_a_kb_file_gives_the_recipient_read_and_the_sender_sees_receipts() {
    let env = Env::new();
    let svc = &env.svc;
    let r = env.agent(env.root);
    let a = env.outcome(env.root, "A", &[env.root.root()]);
    let ha = svc.delegate(r, a, &[]).unwrap().handler;
    let pa = env.agent(ha);
    let report = svc.kb_create(pa, "findings", b"42").unwrap();
    // The boss cannot read it yet: the file does not exist for it.
    assert_kind(svc.kb_read(r, report), "not_found");
    let id = svc
        .mail_send(
            pa,
            MailTarget::Handler(env.root),
            &MailBody::File {
                file: report,
                subject: None,
            },
        )
        .unwrap();
    assert_eq!(svc.kb_read(r, report).unwrap().content, b"42");
    let sent = svc.mail_sent(pa, None).unwrap();
    assert_eq!(sent[0].id, id);
    assert!(sent[0].delivered_at.is_some());
    assert!(sent[0].acked_at.is_none());
    svc.mail_ack(r, &[id]).unwrap();
    assert!(svc.mail_sent(pa, None).unwrap()[0].acked_at.is_some());
    // Attaching a file the sender cannot read is refused.
    let secret = svc.kb_create(r, "secret", b"x").unwrap();
    assert_kind(
        svc.mail_send(
            pa,
            MailTarget::Handler(env.root),
            &MailBody::File {
                file: secret,
                subject: None,
            },
        ),
        "not_found",
    );
    // Read granted by mail survives the sender's outcome finishing.
    svc.outcome_complete(r, a, "done").unwrap();
    assert_eq!(svc.kb_read(r, report).unwrap().content, b"42");
}

#[test]
fn bad_mail_input_is_refused_and_stores_nothing() {
    let env = Env::new();
    let r = env.agent(env.root);
    let before = env.svc.counts().unwrap().files;
    assert_kind(
        env.svc
            .mail_send(r, MailTarget::Handler(env.root), &text("   ")),
        "invalid_input",
    );
    assert_kind(
        env.svc
            .mail_send(Principal::User, MailTarget::User, &text("hi")),
        "invalid_input",
    );
    let far = env.now_plus(20 * 366 * 24 * 3_600_000);
    assert_kind(
        env.svc
            .mail_send_deferred(r, MailTarget::Handler(env.root), &text("later"), far),
        "invalid_input",
    );
    assert_eq!(env.svc.counts().unwrap().files, before);
}
