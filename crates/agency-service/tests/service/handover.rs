//! Issue 9 item 3: when a subtree retires (its root finished, or
//! force-stopped and reclaimed), its work product passes to the boss that
//! retires it, and no file ends up readable only by the user.

use agency_core::{FileId, HandlerId, Level, MailTarget, OutcomeStatus, Principal};
use agency_service::{HandlerStatus, MailBody};
use agency_store::{CapOrigin, Tx};

use crate::support::Env;

fn text(t: &str) -> MailBody {
    MailBody::Text {
        subject: None,
        text: t.into(),
    }
}

/// root -> a -> a1 with work: each writes its state, creates a document,
/// and a1 reports to a by mail. Returns (a, a1, [a's doc, a1's doc]).
fn two_levels(env: &Env) -> (HandlerId, HandlerId, [FileId; 2]) {
    let svc = &env.svc;
    let root = env.root;
    let oa = env.outcome(root, "A", &[root.root()]);
    let a = svc.delegate(env.agent(root), oa, &[]).unwrap().handler;
    let oa1 = env.outcome(a, "A1", &[oa]);
    let a1 = svc.delegate(env.agent(a), oa1, &[]).unwrap().handler;
    let (pa, pa1) = (env.agent(a), env.agent(a1));
    let fa = svc.kb_create(pa, "a's notes", b"notes of a").unwrap();
    let fa1 = svc.kb_create(pa1, "a1's result", b"result of a1").unwrap();
    for (p, who) in [(pa, "a"), (pa1, "a1")] {
        let cur = svc.state_read(p, None).unwrap();
        svc.state_write(
            p,
            format!("state of {who}").as_bytes(),
            cur.version,
            cur.hash.as_str(),
        )
        .unwrap();
    }
    svc.mail_send(pa1, MailTarget::Handler(a), &text("a1 reports: done"))
        .unwrap();
    (a, a1, [fa, fa1])
}

/// Every file in the store that some active handler can read, checked one
/// by one through the service: none may be readable only by the user. The
/// user's own documents are the exception (no handler was ever given them).
fn assert_no_file_only_the_user_reads(env: &Env) {
    let svc = &env.svc;
    let (files, handlers) = agency_store::read(&**svc.store(), |tx: &mut dyn Tx| {
        let mut files = Vec::new();
        let mut after = None;
        loop {
            let page = tx.kb_candidates(None, &[], after, 500)?;
            after = page.last().map(|c| c.file.id);
            let done = page.len() < 500;
            files.extend(page.into_iter().map(|c| c.file));
            if done {
                break;
            }
        }
        Ok::<_, agency_store::StoreError>((files, tx.handlers(None, 10_000)?))
    })
    .unwrap();
    let active: Vec<HandlerId> = handlers
        .iter()
        .filter(|h| h.status == HandlerStatus::Active)
        .map(|h| h.id)
        .collect();
    assert!(!files.is_empty());
    for f in files {
        if f.created_by.is_none()
            && f.owner.is_none()
            && f.kind != agency_core::access::FileKind::Outcome
        {
            continue; // the user's own
        }
        let readers: Vec<HandlerId> = active
            .iter()
            .copied()
            .filter(|&h| {
                svc.kb_level(env.agent(h), f.id)
                    .is_ok_and(|l| l >= Level::Read)
            })
            .collect();
        assert!(
            !readers.is_empty(),
            "{:?} {} ({}) is readable only by the user",
            f.kind,
            f.id,
            f.description
        );
    }
}

/// What `boss` can do with the retired pair's work product.
fn assert_boss_has_the_work_product(
    env: &Env,
    boss: HandlerId,
    a: HandlerId,
    a1: HandlerId,
    docs: [FileId; 2],
) {
    let svc = &env.svc;
    let pb = env.agent(boss);
    for f in docs {
        assert_eq!(
            svc.kb_level(pb, f).unwrap(),
            Level::Write,
            "created file {f}"
        );
        let v = svc.kb_read(pb, f).unwrap();
        svc.kb_write(pb, f, b"taken over", v.version, v.hash.as_str())
            .unwrap();
    }
    for (h, who) in [(a, "a"), (a1, "a1")] {
        let view = svc.handler_view(Principal::User, h).unwrap();
        assert_eq!(view.status, HandlerStatus::Deactivated);
        let state = svc.kb_read(pb, view.state_doc).unwrap();
        assert_eq!(state.content, format!("state of {who}").as_bytes());
        // Also through the handler-level operations, below direct underlings.
        assert_eq!(svc.state_read(pb, Some(h)).unwrap().content, state.content);
        assert!(!svc.audit_read(pb, Some(h)).unwrap().is_empty());
        let log = svc.kb_read(pb, view.audit_log).unwrap();
        assert!(
            String::from_utf8_lossy(&log.content).contains("retired")
                || String::from_utf8_lossy(&log.content).contains("deactivated")
        );
    }
    // a1's report to a, and a's inbox, are part of the record too.
    let report = agency_store::read(&**svc.store(), |tx: &mut dyn Tx| {
        tx.outbox(MailTarget::Handler(a1), 10)
    })
    .unwrap();
    for m in report {
        assert!(svc.kb_read(pb, m.file).is_ok(), "message {}", m.id);
    }
    // Scoped to the boss's own root, so they last as long as its work.
    let held = svc.permissions_list(pb, None).unwrap();
    for f in docs {
        let c = held
            .iter()
            .find(|c| c.resource == agency_core::Resource::Kb(f) && c.origin == CapOrigin::Handover)
            .unwrap();
        assert_eq!(c.scope, Some(boss.root()));
        assert!(c.delegatable);
    }
}

#[test]
fn issue9_item3_completing_a_subtree_hands_its_work_product_to_the_boss() {
    let env = Env::new();
    let (a, a1, docs) = two_levels(&env);
    env.svc
        .outcome_complete(env.agent(env.root), a.root(), "accepted")
        .unwrap();
    assert_boss_has_the_work_product(&env, env.root, a, a1, docs);
    assert_no_file_only_the_user_reads(&env);
}

#[test]
fn issue9_item3_force_stop_hands_over_and_the_boss_does_not_inherit_the_inbox_chore() {
    let env = Env::new();
    let svc = &env.svc;
    let (a, a1, docs) = two_levels(&env);
    // a has an open Process Inbox (a1's report, unacknowledged).
    let pi = svc
        .outcomes_of(Principal::User, a)
        .unwrap()
        .into_iter()
        .find(|o| o.title == "Process inbox" && o.status == OutcomeStatus::Open)
        .expect("a has inbox work");
    let report = svc.force_stop(env.agent(env.root), a).unwrap();
    assert!(report.handlers.contains(&a1));
    assert_boss_has_the_work_product(&env, env.root, a, a1, docs);
    assert_no_file_only_the_user_reads(&env);
    // The inbox chore is closed, not handed to the boss as work.
    let pi = svc.outcome_view(Principal::User, pi.id).unwrap().outcome;
    assert_eq!(pi.status, OutcomeStatus::Closed);
    let root_work: Vec<_> = svc
        .outcomes_of(Principal::User, env.root)
        .unwrap()
        .into_iter()
        .filter(|o| o.status == OutcomeStatus::Open && o.title == "Process inbox")
        .collect();
    assert!(root_work.is_empty(), "{root_work:?}");
    // a's mail waits for it: delegated again, it has inbox work once more.
    let back = svc.delegate(env.agent(env.root), a.root(), &[]).unwrap();
    assert!(back.reactivated);
    assert!(svc.has_work(a).unwrap());
}

#[test]
fn issue9_item3_handover_climbs_when_the_middle_boss_retires_later() {
    let env = Env::new();
    let svc = &env.svc;
    let (a, a1, docs) = two_levels(&env);
    // a stops a1 first and takes its work...
    svc.force_stop(env.agent(a), a1).unwrap();
    let pa = env.agent(a);
    assert_eq!(svc.kb_level(pa, docs[1]).unwrap(), Level::Write);
    let a1_state = svc.handler_view(Principal::User, a1).unwrap().state_doc;
    svc.kb_read(pa, a1_state).unwrap();
    // ...then the root completes a: everything reaches the root.
    svc.outcome_complete(env.agent(env.root), a.root(), "accepted")
        .unwrap();
    assert_boss_has_the_work_product(&env, env.root, a, a1, docs);
    assert_no_file_only_the_user_reads(&env);
}
