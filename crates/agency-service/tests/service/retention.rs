//! Issue 9 item 11, retention: `gc` removes acknowledged mail past the
//! retention period (with bodies nothing else needs) and blobs no version
//! points at, and keeps everything a live capability, an unexpired message
//! or a file version needs; fsck is clean afterwards.

use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use agency_core::{FileId, HandlerId, Level, MailTarget, MessageId, Principal, Resource};
use agency_service::{GcReport, GrantRequest, MailBody, Retention, ServiceConfig};
use agency_store::{BlobId, BlobStore, FsBlobStore};

use crate::quotas::blob_list;
use crate::support::{Env, assert_kind};

const DAY_MS: i64 = 24 * 3600 * 1000;
const USER: Principal = Principal::User;

fn env() -> Env {
    Env::with_config(ServiceConfig {
        retention: Retention {
            acked_mail_days: 1,
            event_days: 0,
            blob_grace: Duration::from_secs(3600),
        },
        ..ServiceConfig::default()
    })
}

fn text(t: &str) -> MailBody {
    MailBody::Text {
        subject: None,
        text: t.into(),
    }
}

fn blob_path(env: &Env, id: &BlobId) -> PathBuf {
    let hex = &id.as_str()["blake3:".len()..];
    env.dir.path().join("blobs").join(&hex[..2]).join(&hex[2..])
}

/// Make a blob look as if it was last written two hours ago.
fn age(env: &Env, id: &BlobId) {
    File::open(blob_path(env, id))
        .unwrap()
        .set_modified(SystemTime::now() - Duration::from_secs(7200))
        .unwrap();
}

fn age_all(env: &Env) {
    for b in blob_list(env) {
        age(env, &b);
    }
}

fn body_of(env: &Env, m: MessageId) -> FileId {
    agency_store::read(&**env.svc.store(), |tx| {
        Ok::<_, agency_store::StoreError>(tx.message(m)?.unwrap().file)
    })
    .unwrap()
}

/// An organisation with mail of every kind retention must tell apart.
struct World {
    env: Env,
    a: HandlerId,
    a1: HandlerId,
    /// User -> root, acknowledged, old: removed with its body.
    old: MessageId,
    old_body: FileId,
    /// A -> root, acknowledged, old, but A granted its body onward to A1.
    granted: MessageId,
    granted_body: FileId,
    /// Root -> A carrying a document, acknowledged, old.
    attached: MessageId,
    doc: FileId,
    /// User -> root, delivered but never acknowledged.
    unacked: MessageId,
    /// User -> root, acknowledged recently.
    recent: MessageId,
    /// Root -> user, deferred, not yet delivered.
    deferred: MessageId,
    /// A document with two versions.
    versioned: FileId,
    old_orphan: BlobId,
    young_orphan: BlobId,
}

fn world() -> World {
    let env = env();
    let svc = &env.svc;
    let root = env.root;
    let r = env.agent(root);
    let oa = env.outcome(root, "A", &[root.root()]);
    let a = svc.delegate(r, oa, &[]).unwrap().handler;
    let pa = env.agent(a);
    let oa1 = env.outcome(a, "A1", &[oa]);
    let a1 = svc.delegate(pa, oa1, &[]).unwrap().handler;

    let old = svc
        .mail_send(
            USER,
            MailTarget::Handler(root),
            &text("old news from the user"),
        )
        .unwrap();
    let granted = svc
        .mail_send(
            pa,
            MailTarget::Handler(root),
            &text("A's report, shared with A1"),
        )
        .unwrap();
    let granted_body = body_of(&env, granted);
    svc.grant(
        pa,
        a1,
        &GrantRequest {
            resource: Resource::Kb(granted_body),
            level: Level::Read,
            delegatable: false,
        },
    )
    .unwrap();
    let doc = svc.kb_create(r, "the plan", b"the plan, attached").unwrap();
    let attached = svc
        .mail_send(
            r,
            MailTarget::Handler(a),
            &MailBody::File {
                file: doc,
                subject: Some("plan".into()),
            },
        )
        .unwrap();
    let unacked = svc
        .mail_send(USER, MailTarget::Handler(root), &text("still to be read"))
        .unwrap();
    let versioned = svc.kb_create(r, "notes", b"notes v1").unwrap();
    svc.kb_write(
        r,
        versioned,
        b"notes v2",
        1,
        BlobId::of(b"notes v1").as_str(),
    )
    .unwrap();
    svc.mail_ack(r, &[old, granted]).unwrap();
    svc.mail_ack(pa, &[attached]).unwrap();

    env.clock.advance_millis(2 * DAY_MS);
    let r = env.agent(root);
    let recent = svc
        .mail_send(USER, MailTarget::Handler(root), &text("fresh news"))
        .unwrap();
    svc.mail_ack(r, &[recent]).unwrap();
    let deferred = svc
        .mail_send_deferred(
            r,
            MailTarget::User,
            &text("see you next year"),
            env.now_plus(300 * DAY_MS),
        )
        .unwrap();

    // An orphan as a failed write leaves one; then time passes for every
    // blob so far. A second orphan is written just now.
    let loose = FsBlobStore::open(env.dir.path().join("blobs")).unwrap();
    let old_orphan = loose.put(b"left by a refused write").unwrap();
    age_all(&env);
    let young_orphan = loose
        .put(b"put a moment ago; its row is committing")
        .unwrap();

    World {
        old_body: body_of(&env, old),
        env,
        a,
        a1,
        old,
        granted,
        granted_body,
        attached,
        doc,
        unacked,
        recent,
        deferred,
        versioned,
        old_orphan,
        young_orphan,
    }
}

#[test]
fn issue9_item11_gc_removes_expired_mail_and_orphans_and_keeps_what_is_needed() {
    let w = world();
    let (env, svc) = (&w.env, &w.env.svc);
    let report = svc.gc(USER, false).unwrap();
    assert_eq!(
        report,
        GcReport {
            dry_run: false,
            mail_acked_before: Some(env.now_plus(-DAY_MS)),
            messages_removed: 3,
            bodies_removed: 1,
            bodies_kept: 1,
            capabilities_revoked: 1,
            events_before: None,
            events_removed: 0,
            blobs_removed: 2,
            bytes_freed: (b"old news from the user".len() + b"left by a refused write".len())
                as u64,
        }
    );

    // Removed: the expired envelopes, the body only they needed, its blob
    // and the orphan.
    for m in [w.old, w.granted, w.attached] {
        assert_kind(svc.mail_status(USER, m), "not_found");
    }
    assert_kind(svc.kb_read(USER, w.old_body), "not_found");
    assert!(!blob_path(env, &w.old_orphan).exists());
    assert!(!blob_path(env, &BlobId::of(b"old news from the user")).exists());

    // Kept: a body granted onward (readable by everyone who could), an
    // attached document, unacknowledged, recent and undelivered mail, both
    // versions of a file, and a blob younger than the grace period.
    let r = env.agent(env.root);
    for who in [r, env.agent(w.a1), env.agent(w.a)] {
        assert_eq!(
            svc.kb_read(who, w.granted_body).unwrap().text(),
            "A's report, shared with A1"
        );
    }
    assert_eq!(
        svc.kb_read(env.agent(w.a), w.doc).unwrap().text(),
        "the plan, attached"
    );
    let inbox = svc.mail_inbox(r, None).unwrap();
    assert!(inbox.iter().any(|m| m.id == w.unacked));
    svc.mail_status(USER, w.recent).unwrap();
    assert_eq!(svc.mail_status(r, w.deferred).unwrap().delivered_at, None);
    assert_eq!(
        svc.kb_read_version(r, w.versioned, 1).unwrap().text(),
        "notes v1"
    );
    assert_eq!(svc.kb_read(r, w.versioned).unwrap().text(), "notes v2");
    assert!(blob_path(env, &w.young_orphan).exists());

    let fsck = svc.fsck().unwrap();
    assert!(fsck.is_clean(), "{fsck:?}");
    assert_eq!(
        fsck.unreferenced_blobs,
        vec![w.young_orphan.as_str().to_owned()]
    );

    // The deferred message is still delivered when due.
    env.clock.advance_millis(300 * DAY_MS);
    svc.deliver_due(env.now_plus(0)).unwrap();
    assert!(
        svc.mail_status(USER, w.deferred)
            .unwrap()
            .delivered_at
            .is_some()
    );
    // Much later the recent message has expired too; the body granted
    // onward still stays, and the unacknowledged message is still there.
    let again = svc.gc(USER, false).unwrap();
    assert_eq!(
        (
            again.messages_removed,
            again.bodies_removed,
            again.bodies_kept
        ),
        (1, 1, 0)
    );
    assert_kind(svc.mail_status(USER, w.recent), "not_found");
    svc.kb_read(env.agent(w.a1), w.granted_body).unwrap();
    assert!(
        svc.mail_inbox(r, None)
            .unwrap()
            .iter()
            .any(|m| m.id == w.unacked)
    );
    assert!(svc.fsck().unwrap().is_clean());
}

#[test]
fn issue9_item11_gc_dry_run_changes_nothing_and_predicts_the_mail() {
    let w = world();
    let svc = &w.env.svc;
    let before = crate::quotas::snapshot(&w.env, w.env.root);
    let dry = svc.gc(USER, true).unwrap();
    assert!(dry.dry_run);
    assert_eq!(crate::quotas::snapshot(&w.env, w.env.root), before);
    svc.mail_status(USER, w.old).unwrap();
    let real = svc.gc(USER, false).unwrap();
    assert_eq!(
        (
            dry.messages_removed,
            dry.bodies_removed,
            dry.bodies_kept,
            dry.capabilities_revoked
        ),
        (
            real.messages_removed,
            real.bodies_removed,
            real.bodies_kept,
            real.capabilities_revoked
        )
    );
    // The dry run saw only the orphan; the body's blob is freed by the real run.
    assert_eq!((dry.blobs_removed, real.blobs_removed), (1, 2));
}

#[test]
fn issue9_item11_an_agent_cannot_collect_garbage() {
    // A prompt-injected agent must not be able to erase mail or blobs.
    let w = world();
    let r = w.env.agent(w.env.root);
    let before = crate::quotas::snapshot(&w.env, w.env.root);
    assert_kind(w.env.svc.gc(r, false), "permission_denied");
    assert_kind(w.env.svc.gc(w.env.agent(w.a), true), "permission_denied");
    assert_eq!(crate::quotas::snapshot(&w.env, w.env.root), before);
}

#[test]
fn issue9_item11_acked_mail_is_kept_forever_with_zero_days() {
    let env = Env::with_config(ServiceConfig {
        retention: Retention {
            acked_mail_days: 0,
            event_days: 0,
            blob_grace: Duration::from_secs(3600),
        },
        ..ServiceConfig::default()
    });
    let r = env.agent(env.root);
    let m = env
        .svc
        .mail_send(USER, MailTarget::Handler(env.root), &text("keep me"))
        .unwrap();
    env.svc.mail_ack(r, &[m]).unwrap();
    env.clock.advance_millis(10_000 * DAY_MS);
    let report = env.svc.gc(USER, false).unwrap();
    assert_eq!(
        (report.mail_acked_before, report.messages_removed),
        (None, 0)
    );
    env.svc.mail_status(USER, m).unwrap();
}

/// A write puts its blob, then commits its row. An old orphan with the same
/// content is the worst case: the put finds it present. It must not be
/// collected in between, or the row would point at nothing.
#[test]
fn issue9_item11_gc_keeps_a_blob_whose_row_is_being_committed() {
    let env = env();
    let r = env.agent(env.root);
    let content = b"written twice: once lost, once for real";
    let loose = FsBlobStore::open(env.dir.path().join("blobs")).unwrap();
    let id = loose.put(content).unwrap();
    age(&env, &id);
    // The write's first step: the put (finding the old orphan).
    loose.put(content).unwrap();
    // gc runs before the row commits.
    let report = env.svc.gc(USER, false).unwrap();
    assert_eq!(report.blobs_removed, 0);
    assert!(blob_path(&env, &id).exists());
    // The write commits; its content is there.
    let f = env.svc.kb_create(r, "late", content).unwrap();
    assert_eq!(env.svc.kb_read(r, f).unwrap().content, content);
    assert!(env.svc.fsck().unwrap().is_clean());
}

/// The same race, for real: writers re-create old orphans' contents while
/// gc runs in a loop; every committed file stays readable and fsck clean.
#[test]
fn issue9_item11_gc_beside_concurrent_writes_leaves_fsck_clean() {
    let env = env();
    let r = env.agent(env.root);
    let loose = FsBlobStore::open(env.dir.path().join("blobs")).unwrap();
    let contents: Vec<Vec<u8>> = (0..150)
        .map(|i| format!("content number {i}").into_bytes())
        .collect();
    for c in &contents {
        let id = loose.put(c).unwrap();
        age(&env, &id);
    }
    let done = Arc::new(AtomicBool::new(false));
    let gc = {
        let (svc, done) = (env.svc.clone(), done.clone());
        std::thread::spawn(move || {
            let mut runs = 0;
            while !done.load(Ordering::SeqCst) || runs == 0 {
                svc.gc(USER, false).unwrap();
                runs += 1;
            }
        })
    };
    let files: Vec<FileId> = contents
        .iter()
        .map(|c| env.svc.kb_create(r, "racing", c).unwrap())
        .collect();
    done.store(true, Ordering::SeqCst);
    gc.join().unwrap();
    for (f, c) in files.iter().zip(&contents) {
        assert_eq!(&env.svc.kb_read(r, *f).unwrap().content, c);
    }
    let fsck = env.svc.fsck().unwrap();
    assert!(fsck.is_clean(), "{fsck:?}");
}

/// A run's transcript and captured output are blobs no version points at:
/// gc keeps them as long as the run record does (found at the merge of
/// issue 9 items 11 and 16).
#[test]
fn issue9_item11_gc_keeps_run_transcripts_and_logs() {
    let env = env();
    let agent = env.svc.agent_start(env.root).unwrap();
    env.svc
        .agent_record_spawn(
            agent,
            "command",
            "hash",
            agency_core::prompt::PROMPT_VERSION,
        )
        .unwrap();
    let report = agency_service::RunReport {
        reason: "exited".into(),
        transcript: Some(b"{\"turn\":1}\n".to_vec()),
        log: Some(b"the run's own stderr\n".to_vec()),
        ..agency_service::RunReport::default()
    };
    env.svc.agent_finish(agent, &report).unwrap();
    age_all(&env);
    let names = |env: &Env| {
        let mut v: Vec<String> = blob_list(env)
            .iter()
            .map(|b| b.as_str().to_owned())
            .collect();
        v.sort();
        v
    };
    let before = names(&env);
    let report = env.svc.gc(USER, false).unwrap();
    assert_eq!(report.blobs_removed, 0, "{report:?}");
    assert_eq!(names(&env), before);
    assert_eq!(
        env.svc.agent_run_log(USER, agent).unwrap().text,
        "the run's own stderr\n"
    );
    assert!(env.svc.fsck().unwrap().is_clean());
}
