//! Injected I/O faults while writing blobs and rows: a full disk (ENOSPC)
//! or a failed fsync (EIO) at every step of a blob put, SQLite's own "disk
//! is full" while writing rows, and a COMMIT that SQLite itself fails.
//!
//! For each: the caller gets a "failed to …" error naming what failed, the
//! store is consistent afterwards (fsck clean, no row pointing at a missing
//! blob, no temporary file left, counts unchanged) and the same operation
//! succeeds once the fault clears. The faults go through the store's
//! `fault-injection` seams, so the real `FsBlobStore` and `SqliteStore`
//! code runs around them (crash.rs wraps the traits instead).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use agency_core::{Limits, Principal};
use agency_service::{ManualClock, NewOutcome, ServiceError};
use agency_store::{BlobId, BlobStore, FsBlobStore, PutStep, SqliteStore};

use crate::support::{Env, T0};

const ENOSPC: i32 = 28;
const EIO: i32 = 5;

/// Which step fails next, with which errno, and how often each step ran.
#[derive(Default)]
struct Plan {
    fail: Option<(PutStep, i32)>,
    seen: HashMap<PutStep, usize>,
}

struct Faulty {
    env: Env,
    store: Arc<SqliteStore>,
    blobs: Arc<FsBlobStore>,
    plan: Arc<Mutex<Plan>>,
    commits_fail: Arc<AtomicBool>,
}

fn faulty() -> Faulty {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("agency.db")).unwrap());
    let blobs = Arc::new(FsBlobStore::open(dir.path().join("blobs")).unwrap());
    let plan = Arc::new(Mutex::new(Plan::default()));
    let p = plan.clone();
    blobs.set_fault_hook(Some(Arc::new(move |step| {
        let mut p = p.lock().unwrap();
        *p.seen.entry(step).or_default() += 1;
        match p.fail {
            Some((s, errno)) if s == step => Some(std::io::Error::from_raw_os_error(errno)),
            _ => None,
        }
    })));
    let commits_fail = Arc::new(AtomicBool::new(false));
    store.fail_commits_while(commits_fail.clone()).unwrap();
    let env = Env::assemble(
        dir,
        store.clone(),
        blobs.clone(),
        Arc::new(ManualClock::new(T0)),
        Limits::default(),
    );
    Faulty {
        env,
        store,
        blobs,
        plan,
        commits_fail,
    }
}

impl Faulty {
    fn fail(&self, step: PutStep, errno: i32) {
        let mut p = self.plan.lock().unwrap();
        p.fail = Some((step, errno));
        p.seen.clear();
    }

    fn heal(&self) {
        let mut p = self.plan.lock().unwrap();
        p.fail = None;
        p.seen.clear();
    }

    fn seen(&self, step: PutStep) -> usize {
        self.plan
            .lock()
            .unwrap()
            .seen
            .get(&step)
            .copied()
            .unwrap_or(0)
    }

    /// fsck is clean, no version row points at a missing blob, and no
    /// temporary file is left in the blob store: `tmp/` is empty and the
    /// fan-out directories hold only blobs.
    fn assert_consistent(&self) {
        let report = self.env.svc.fsck().unwrap();
        assert!(report.is_clean(), "{report:?}");
        let root = self.blobs.root();
        let tmp: Vec<_> = std::fs::read_dir(root.join("tmp")).unwrap().collect();
        assert!(tmp.is_empty(), "temporary blob files left: {tmp:?}");
        for dir in std::fs::read_dir(root).unwrap().flatten() {
            let shard = dir.file_name().into_string().unwrap();
            if shard == "tmp" {
                continue;
            }
            for f in std::fs::read_dir(dir.path()).unwrap().flatten() {
                let rest = f.file_name().into_string().unwrap();
                assert!(
                    BlobId::parse(&format!("blake3:{shard}{rest}")).is_some(),
                    "not a blob in the blob store: {shard}/{rest}"
                );
            }
        }
    }
}

fn errno_text(errno: i32) -> String {
    std::io::Error::from_raw_os_error(errno).to_string()
}

/// What the caller must be told when `step` fails.
fn action(step: PutStep) -> &'static str {
    match step {
        PutStep::CreateTemp => "failed to create temporary blob file",
        PutStep::Write => "failed to write temporary blob file",
        PutStep::FsyncTemp => "failed to fsync temporary blob file",
        PutStep::Place => "failed to put blob into place at",
        PutStep::FsyncDir => "failed to fsync blob directory",
    }
}

const STEPS: [PutStep; 5] = [
    PutStep::CreateTemp,
    PutStep::Write,
    PutStep::FsyncTemp,
    PutStep::Place,
    PutStep::FsyncDir,
];

#[track_caller]
fn assert_io_error(e: &ServiceError, step: PutStep, errno: i32) {
    let text = e.to_string();
    assert!(text.starts_with(action(step)), "{step:?}: {text}");
    assert!(text.contains(&errno_text(errno)), "{step:?}: {text}");
    assert!(text.contains("blobs"), "names the blob path: {text}");
}

#[test]
fn a_blob_fault_at_any_step_fails_the_write_cleanly_and_a_retry_succeeds() {
    for errno in [ENOSPC, EIO] {
        for step in STEPS {
            let f = faulty();
            let svc = &f.env.svc;
            let r = f.env.agent(f.env.root);
            let file = svc.kb_create(r, "doc", b"v1").unwrap();
            let before = svc.counts().unwrap();
            let body = format!("new content for {step:?} {errno}").into_bytes();

            f.fail(step, errno);
            let e = svc.kb_create(r, "doomed", &body).unwrap_err();
            assert_io_error(&e, step, errno);
            let e = svc
                .kb_write(r, file, &body, 1, BlobId::of(b"v1").as_str())
                .unwrap_err();
            assert_io_error(&e, step, errno);
            assert_eq!(svc.counts().unwrap(), before, "{step:?}: no row added");
            assert_eq!(svc.kb_read(r, file).unwrap().version, 1);
            f.assert_consistent();

            f.heal();
            let v = svc
                .kb_write(r, file, &body, 1, BlobId::of(b"v1").as_str())
                .unwrap();
            assert_eq!(v.version, 2);
            assert_eq!(svc.kb_read(r, file).unwrap().content, body);
            let g = svc.kb_create(r, "retried", &body).unwrap();
            assert_eq!(svc.kb_read(r, g).unwrap().content, body);
            f.assert_consistent();
        }
    }
}

#[test]
fn outcome_changes_roll_back_whole_on_a_blob_fault() {
    // Outcome Markdown is put inside the write transaction: a failure there
    // must undo the outcome row, its file row and its audit records.
    for step in STEPS {
        let f = faulty();
        let svc = &f.env.svc;
        let r = f.env.agent(f.env.root);
        let before = svc.counts().unwrap();
        let new = NewOutcome {
            title: format!("A {step:?}"),
            parents: vec![f.env.root.root()],
            ..Default::default()
        };
        f.fail(step, ENOSPC);
        let e = svc.outcome_create(r, &new).unwrap_err();
        assert_io_error(&e, step, ENOSPC);
        assert_eq!(svc.counts().unwrap(), before, "{step:?}");
        f.assert_consistent();
        f.heal();
        let o = svc.outcome_create(r, &new).unwrap();
        assert_eq!(svc.outcome_view(r, o).unwrap().outcome.title, new.title);
        f.assert_consistent();
    }
}

/// Found by this suite: a put whose directory fsync failed had already
/// renamed the blob into place, and a retry of the same content saw the
/// file and returned at once, so the row committed next pointed at a
/// directory entry that was never made durable. A retry now syncs the
/// directory again before returning.
#[test]
fn retry_after_failed_dir_fsync_syncs_the_directory_again() {
    let f = faulty();
    let svc = &f.env.svc;
    let r = f.env.agent(f.env.root);
    f.fail(PutStep::FsyncDir, EIO);
    let e = svc.kb_create(r, "doc", b"precious").unwrap_err();
    assert_io_error(&e, PutStep::FsyncDir, EIO);
    // The file is in place (the rename happened), unreferenced.
    assert!(f.blobs.path_of(&BlobId::of(b"precious")).exists());
    // While the directory cannot be synced, the retry must fail too rather
    // than vouch for a blob that may vanish in a crash.
    let e = svc.kb_create(r, "doc", b"precious").unwrap_err();
    assert_io_error(&e, PutStep::FsyncDir, EIO);
    f.heal();
    let id = svc.kb_create(r, "doc", b"precious").unwrap();
    assert!(
        f.seen(PutStep::FsyncDir) >= 1,
        "the retry synced the directory"
    );
    assert_eq!(
        f.seen(PutStep::CreateTemp),
        0,
        "and did not rewrite the blob"
    );
    assert_eq!(svc.kb_read(r, id).unwrap().content, b"precious");
    f.assert_consistent();
}

#[test]
fn a_failed_commit_leaves_nothing_and_names_the_database() {
    let f = faulty();
    let svc = &f.env.svc;
    let r = f.env.agent(f.env.root);
    let file = svc.kb_create(r, "doc", b"v1").unwrap();
    let a = f.env.outcome(f.env.root, "A", &[f.env.root.root()]);
    let before = svc.counts().unwrap();

    f.commits_fail.store(true, Ordering::SeqCst);
    let errors = [
        svc.kb_create(r, "never", b"orphan").unwrap_err(),
        svc.kb_write(r, file, b"v2", 1, BlobId::of(b"v1").as_str())
            .unwrap_err(),
        svc.delegate(r, a, &[]).unwrap_err(),
        svc.outcome_create(
            r,
            &NewOutcome {
                title: "B".into(),
                parents: vec![a],
                ..Default::default()
            },
        )
        .unwrap_err(),
    ];
    for e in &errors {
        let text = e.to_string();
        assert!(
            text.starts_with("failed to commit a write transaction on database")
                && text.contains("agency.db"),
            "{text}"
        );
    }
    f.commits_fail.store(false, Ordering::SeqCst);

    assert_eq!(svc.counts().unwrap(), before);
    assert_eq!(svc.kb_read(r, file).unwrap().version, 1);
    assert_eq!(
        svc.outcome_view(r, a).unwrap().outcome.responsible,
        f.env.root
    );
    let report = svc.fsck().unwrap();
    assert!(report.is_clean(), "{report:?}");
    // The blobs put before the failed commits stay, unreferenced.
    assert!(
        report
            .unreferenced_blobs
            .contains(&BlobId::of(b"orphan").as_str().to_owned())
    );
    // Everything works again once commits do.
    svc.kb_write(r, file, b"v2", 1, BlobId::of(b"v1").as_str())
        .unwrap();
    let u = svc.delegate(r, a, &[]).unwrap();
    assert_eq!(
        svc.outcome_view(r, a).unwrap().outcome.responsible,
        u.handler
    );
    f.assert_consistent();
}

#[test]
fn a_full_database_fails_writes_with_sqlites_error_and_recovers() {
    let f = faulty();
    let svc = &f.env.svc;
    let r = f.env.agent(f.env.root);
    let file = svc.kb_create(r, "doc", b"v1").unwrap();
    f.store.set_full(true).unwrap();
    // Enough new rows that some statement needs a page the cap refuses.
    let mut failed = None;
    for i in 0..200 {
        let desc = format!("file {i} {}", "x".repeat(2000));
        match svc.kb_create(r, &desc, format!("content {i}").as_bytes()) {
            Ok(_) => {}
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    let e = failed.expect("a capped database refused a write");
    let text = e.to_string();
    assert!(
        text.starts_with("failed to ") && text.contains("database or disk is full"),
        "{text}"
    );
    // Reads still work on a full database; nothing is inconsistent.
    assert_eq!(svc.kb_read(r, file).unwrap().content, b"v1");
    f.assert_consistent();
    f.store.set_full(false).unwrap();
    let v = svc
        .kb_write(r, file, b"v2", 1, BlobId::of(b"v1").as_str())
        .unwrap();
    assert_eq!(v.version, 2);
    f.assert_consistent();
    // And the data survives a reopen.
    let Faulty { env, .. } = f;
    let env = env.reopen();
    assert_eq!(
        env.svc.kb_read(Principal::User, file).unwrap().content,
        b"v2"
    );
    assert!(env.svc.fsck().unwrap().is_clean());
}

#[test]
fn fsck_after_a_failed_put_lists_no_partial_blob() {
    // A torn temporary file is never renamed into place, so the blob
    // directory holds only whole blobs: every blob present re-hashes to
    // its name, including after a reopen (which clears `tmp/`).
    let f = faulty();
    let svc = &f.env.svc;
    let r = f.env.agent(f.env.root);
    let big = vec![b'z'; 1 << 20];
    f.fail(PutStep::Write, ENOSPC);
    assert_io_error(
        &svc.kb_create(r, "big", &big).unwrap_err(),
        PutStep::Write,
        ENOSPC,
    );
    f.heal();
    for id in f.blobs.list().unwrap() {
        assert_eq!(f.blobs.check(&id).unwrap(), agency_store::BlobCheck::Ok);
    }
    assert!(!f.blobs.path_of(&BlobId::of(&big)).exists());
    f.assert_consistent();
}
