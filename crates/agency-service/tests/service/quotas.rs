//! Issue 9 item 11, quotas: each quota is hit at a small configured limit,
//! the refusal is a `quota` error naming the `agency.toml` key, and the
//! store (rows and blobs) is exactly as before the refused call.

use agency_core::{HandlerId, Limits, MailTarget, Principal};
use agency_service::{MailBody, ServiceError};
use agency_store::{BlobId, StoreCounts, VersionRow};

use crate::support::{Env, assert_kind};

/// Everything a refused call could have changed: counts, every version
/// row, every handler, the outbox and outcomes of `h`, and the blobs.
#[derive(Debug, PartialEq)]
pub struct Snapshot {
    counts: StoreCounts,
    versions: Vec<VersionRow>,
    handlers: Vec<(HandlerId, String)>,
    outbox: usize,
    outcomes: usize,
    blobs: Vec<BlobId>,
}

pub fn snapshot(env: &Env, h: HandlerId) -> Snapshot {
    let (counts, versions, handlers, outbox, outcomes) =
        agency_store::read(&**env.svc.store(), |tx| {
            Ok::<_, agency_store::StoreError>((
                tx.counts()?,
                tx.all_versions()?,
                tx.handlers(None, 10_000)?
                    .into_iter()
                    .map(|r| (r.id, r.status.as_str().to_owned()))
                    .collect(),
                tx.outbox(MailTarget::Handler(h), 10_000)?.len(),
                tx.outcomes_of(h, 10_000)?.len(),
            ))
        })
        .unwrap();
    let mut blobs = blob_list(env);
    blobs.sort();
    Snapshot {
        counts,
        versions,
        handlers,
        outbox,
        outcomes,
        blobs,
    }
}

/// Every blob the blob store holds, sorted.
pub fn blob_list(env: &Env) -> Vec<BlobId> {
    let mut out = env.blobs.list().unwrap();
    out.sort();
    out
}

/// The refusal names the key, its value and the file, and leaves the
/// store unchanged.
#[track_caller]
fn assert_quota<T: std::fmt::Debug>(
    env: &Env,
    h: HandlerId,
    key: &str,
    limit: usize,
    call: impl FnOnce() -> Result<T, ServiceError>,
) -> String {
    let before = snapshot(env, h);
    let e = assert_kind(call(), "quota");
    let text = e.to_string();
    assert!(text.starts_with("failed to "), "{text}");
    assert!(
        text.contains(&format!("limits.{key} = {limit} in agency.toml")),
        "{text}"
    );
    assert_eq!(snapshot(env, h), before, "a refused call changed the store");
    text
}

fn limits(f: impl FnOnce(&mut Limits)) -> Env {
    let mut l = Limits::default();
    f(&mut l);
    Env::with_limits(l)
}

fn text(t: &str) -> MailBody {
    MailBody::Text {
        subject: None,
        text: t.into(),
    }
}

#[test]
fn issue9_item11_outcomes_per_handler_quota() {
    let env = limits(|l| l.max_outcomes_per_handler = 3);
    let root = env.root;
    let first = env.outcome(root, "O0", &[root.root()]);
    for i in 1..3 {
        env.outcome(root, &format!("O{i}"), &[root.root()]);
    }
    let r = env.agent(root);
    let new = agency_service::NewOutcome {
        title: "one too many".into(),
        description: String::new(),
        parents: vec![root.root()],
        priority: 0,
    };
    let t = assert_quota(&env, root, "max_outcomes_per_handler", 3, || {
        env.svc.outcome_create(r, &new)
    });
    assert!(
        t.contains(&format!("handler {root} has created 3 outcomes")),
        "{t}"
    );
    // Outcomes Agency made (the root, Process Inbox) do not count, and the
    // quota is per handler: an underling has its own.
    let a = env.svc.delegate(r, first, &[]).unwrap();
    env.outcome(a.handler, "A1", &[a.handler.root()]);
}

#[test]
fn issue9_item11_kb_files_per_handler_quota() {
    let env = limits(|l| l.max_kb_files_per_handler = 2);
    let root = env.root;
    let r = env.agent(root);
    env.svc.kb_create(r, "one", b"1").unwrap();
    env.svc.kb_create(r, "two", b"2").unwrap();
    // Refused before the content is stored: no blob of it appears.
    let t = assert_quota(&env, root, "max_kb_files_per_handler", 2, || {
        env.svc
            .kb_create(r, "three", b"a third file's unique content")
    });
    assert!(t.contains("has created 2 KB files"), "{t}");
    // Mail bodies are not documents: mail still goes out.
    env.svc
        .mail_send(r, MailTarget::User, &text("still talking"))
        .unwrap();
    // The user sets the quotas and is not bound by them.
    env.svc
        .kb_create(Principal::User, "user's", b"mine")
        .unwrap();
}

#[test]
fn issue9_item11_pending_deferred_mail_quota() {
    let env = limits(|l| l.max_pending_deferred_per_handler = 2);
    let root = env.root;
    let r = env.agent(root);
    let later = env.now_plus(60_000);
    for i in 0..2 {
        env.svc
            .mail_send_deferred(r, MailTarget::User, &text(&format!("later {i}")), later)
            .unwrap();
    }
    let t = assert_quota(&env, root, "max_pending_deferred_per_handler", 2, || {
        env.svc
            .mail_send_deferred(r, MailTarget::User, &text("one more later"), later)
    });
    assert!(t.contains("already has 2 deferred messages"), "{t}");
    // Mail sent now is not held, so it is not limited by this quota.
    env.svc
        .mail_send(r, MailTarget::User, &text("now"))
        .unwrap();
    // Once they are delivered, the handler may schedule again.
    env.clock.advance_millis(60_000);
    env.svc.deliver_due(env.now_plus(0)).unwrap();
    env.svc
        .mail_send_deferred(r, MailTarget::User, &text("again"), env.now_plus(1000))
        .unwrap();
}

#[test]
fn issue9_item11_handlers_per_subtree_quota() {
    // The root handler and two underlings fill a subtree of three.
    let env = limits(|l| l.max_handlers_per_subtree = 3);
    let root = env.root;
    let r = env.agent(root);
    let a = env.outcome(root, "A", &[root.root()]);
    let b = env.outcome(root, "B", &[root.root()]);
    let c = env.outcome(root, "C", &[root.root()]);
    let ha = env.svc.delegate(r, a, &[]).unwrap().handler;
    let hb = env.svc.delegate(r, b, &[]).unwrap().handler;
    let t = assert_quota(&env, root, "max_handlers_per_subtree", 3, || {
        env.svc.delegate(r, c, &[])
    });
    assert!(
        t.contains(&format!(
            "subtree of handler {root} already has 3 active handlers"
        )),
        "{t}"
    );
    // A deeper handler joins the root's subtree too: refused as well.
    let a1 = env.outcome(ha, "A1", &[a]);
    assert_quota(&env, ha, "max_handlers_per_subtree", 3, || {
        env.svc.delegate(env.agent(ha), a1, &[])
    });
    // A stopped handler no longer counts.
    env.svc.force_stop(Principal::User, hb).unwrap();
    env.svc.delegate(r, c, &[]).unwrap();
}

#[test]
fn issue9_item11_delegation_depth_quota() {
    let env = limits(|l| l.max_delegation_depth = 2);
    let root = env.root;
    let a = env.outcome(root, "A", &[root.root()]);
    let ha = env.svc.delegate(env.agent(root), a, &[]).unwrap().handler; // depth 1
    let a1 = env.outcome(ha, "A1", &[a]);
    let ha1 = env.svc.delegate(env.agent(ha), a1, &[]).unwrap().handler; // depth 2
    let a2 = env.outcome(ha1, "A2", &[a1]);
    let t = assert_quota(&env, ha1, "max_delegation_depth", 2, || {
        env.svc.delegate(env.agent(ha1), a2, &[])
    });
    assert!(
        t.contains(&format!("handler {ha1} is 2 or more levels")),
        "{t}"
    );
}
