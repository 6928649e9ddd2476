//! Crash consistency with injected faults: a failure between writing a blob
//! and committing its row, or while writing the blob, leaves no row that
//! points at a missing blob and no partial state.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agency_core::{Limits, Principal};
use agency_store::{BlobCheck, BlobId, BlobStore, FsBlobStore, SqliteStore, Store, StoreError, Tx};

use crate::support::{Env, assert_kind};

/// Runs each write transaction's body, then fails before commit when armed:
/// the blob has been written by then, the row never commits.
#[derive(Debug)]
struct FailingCommit {
    inner: SqliteStore,
    armed: AtomicBool,
}

impl Store for FailingCommit {
    fn read_dyn(
        &self,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.inner.read_dyn(f)
    }
    fn write_dyn(
        &self,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        if !self.armed.load(Ordering::SeqCst) {
            return self.inner.write_dyn(f);
        }
        let res = self.inner.write_dyn(&mut |tx| {
            f(tx)?;
            Err(StoreError::Injected("commit the transaction".into()))
        });
        match res {
            Err(StoreError::Injected(_)) | Ok(()) => {
                Err(StoreError::Injected("commit the transaction".into()))
            }
            Err(e) => Err(e),
        }
    }
}

/// A blob store whose writes fail (a full disk) when armed.
#[derive(Debug)]
struct FailingBlobs {
    inner: FsBlobStore,
    armed: AtomicBool,
}

impl BlobStore for FailingBlobs {
    fn put(&self, content: &[u8]) -> Result<BlobId, StoreError> {
        if self.armed.load(Ordering::SeqCst) {
            return Err(StoreError::Io {
                action: "write temporary blob file",
                path: self.inner.root().join("tmp/x"),
                cause: std::io::Error::from_raw_os_error(28), // ENOSPC
            });
        }
        self.inner.put(content)
    }
    fn get(&self, id: &BlobId) -> Result<Vec<u8>, StoreError> {
        self.inner.get(id)
    }
    fn check(&self, id: &BlobId) -> Result<BlobCheck, StoreError> {
        self.inner.check(id)
    }
    fn list(&self) -> Result<Vec<BlobId>, StoreError> {
        self.inner.list()
    }
}

fn env_with_faults() -> (Env, Arc<FailingCommit>, Arc<FailingBlobs>) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FailingCommit {
        inner: SqliteStore::open(&dir.path().join("agency.db")).unwrap(),
        armed: AtomicBool::new(false),
    });
    let blobs = Arc::new(FailingBlobs {
        inner: FsBlobStore::open(dir.path().join("blobs")).unwrap(),
        armed: AtomicBool::new(false),
    });
    let clock = Arc::new(agency_service::ManualClock::new(crate::support::T0));
    let env = Env::assemble(dir, store.clone(), blobs.clone(), clock, Limits::default());
    (env, store, blobs)
}

#[test]
fn failure_between_blob_and_row_leaves_no_dangling_row() {
    let (env, store, _) = env_with_faults();
    let svc = &env.svc;
    let r = env.agent(env.root);
    let f = svc.kb_create(r, "doc", b"v1").unwrap();
    let files_before = svc.counts().unwrap().files;

    store.armed.store(true, Ordering::SeqCst);
    let e = svc
        .kb_create(r, "never committed", b"orphan content")
        .unwrap_err();
    assert!(e.to_string().contains("injected fault"), "{e}");
    let v = svc.kb_read(r, f).unwrap();
    assert!(
        svc.kb_write(r, f, b"v2 never committed", v.version, v.hash.as_str())
            .is_err()
    );
    // A whole delegation fails atomically too.
    let a = {
        store.armed.store(false, Ordering::SeqCst);
        let a = env.outcome(env.root, "A", &[env.root.root()]);
        store.armed.store(true, Ordering::SeqCst);
        a
    };
    assert!(svc.delegate(r, a, &[]).is_err());
    store.armed.store(false, Ordering::SeqCst);

    assert_eq!(
        svc.counts().unwrap().files,
        files_before + 1,
        "only the outcome file of A was added"
    );
    assert_eq!(svc.kb_read(r, f).unwrap().version, 1);
    assert_eq!(
        svc.outcome_view(r, a).unwrap().outcome.responsible,
        env.root
    );
    let report = svc.fsck().unwrap();
    assert!(report.is_clean(), "{report:?}");
    // The blobs written before the failed commits are there, unreferenced.
    assert!(
        report
            .unreferenced_blobs
            .contains(&BlobId::of(b"orphan content").as_str().to_owned())
    );
    assert!(
        report
            .unreferenced_blobs
            .contains(&BlobId::of(b"v2 never committed").as_str().to_owned())
    );
    // And the store works normally afterwards.
    svc.kb_write(r, f, b"v2", v.version, v.hash.as_str())
        .unwrap();
    assert!(svc.fsck().unwrap().is_clean());
}

#[test]
fn a_failed_blob_write_gives_a_clear_error_and_stores_no_row() {
    let (env, _, blobs) = env_with_faults();
    let svc = &env.svc;
    let r = env.agent(env.root);
    let before = svc.counts().unwrap();
    blobs.armed.store(true, Ordering::SeqCst);
    let e = svc.kb_create(r, "doc", b"content").unwrap_err();
    assert!(
        e.to_string()
            .starts_with("failed to write temporary blob file"),
        "{e}"
    );
    // Outcome changes write Markdown blobs inside the transaction: they
    // roll back whole.
    assert!(
        svc.outcome_create(
            r,
            &agency_service::NewOutcome {
                title: "A".into(),
                parents: vec![env.root.root()],
                ..Default::default()
            }
        )
        .is_err()
    );
    blobs.armed.store(false, Ordering::SeqCst);
    assert_eq!(svc.counts().unwrap(), before);
    assert!(svc.fsck().unwrap().is_clean());
}

#[test]
fn fsck_reports_missing_and_corrupt_blobs() {
    let env = Env::new();
    let svc = &env.svc;
    let f = svc.kb_create(Principal::User, "doc", b"precious").unwrap();
    let g = svc
        .kb_create(Principal::User, "doc2", b"also precious")
        .unwrap();
    let blobs = FsBlobStore::open(env.dir.path().join("blobs")).unwrap();
    std::fs::write(blobs.path_of(&BlobId::of(b"precious")), b"tampered").unwrap();
    std::fs::remove_file(blobs.path_of(&BlobId::of(b"also precious"))).unwrap();
    let report = svc.fsck().unwrap();
    assert_eq!(report.problems.len(), 2, "{report:?}");
    let text = serde_json::to_string(&report.problems).unwrap();
    assert!(
        text.contains(&f.to_string()) && text.contains("corrupt_blob"),
        "{text}"
    );
    assert!(
        text.contains(&g.to_string()) && text.contains("missing_blob"),
        "{text}"
    );
    // A read of the corrupt file fails loudly instead of returning bad bytes.
    assert_kind(svc.kb_read(Principal::User, f), "internal");
}
