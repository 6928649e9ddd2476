//! Group commit seen from the service (issue 15): sixteen concurrent KB
//! writers each get every acknowledged version back with its content, and
//! a COMMIT that fails fails every write of its batch.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agency_core::{FileId, Limits};
use agency_service::ManualClock;
use agency_store::{BlobId, FsBlobStore, SqliteStore};

use crate::support::{Env, T0};

fn content(w: usize, i: usize) -> Vec<u8> {
    format!("writer {w} write {i}").into_bytes()
}

#[test]
fn issue_15_every_acknowledged_kb_write_of_16_concurrent_writers_is_there() {
    const WRITERS: usize = 16;
    const WRITES: usize = 25;
    let env = Env::new();
    let r = env.agent(env.root);
    let files: Vec<FileId> = (0..WRITERS)
        .map(|w| {
            env.svc
                .kb_create(r, &format!("writer {w}"), &content(w, 0))
                .unwrap()
        })
        .collect();
    let handles: Vec<_> = files
        .iter()
        .enumerate()
        .map(|(w, &file)| {
            let svc = env.svc.clone();
            std::thread::spawn(move || {
                let (mut version, mut hash) = (1, BlobId::of(&content(w, 0)));
                let mut acked = vec![(1, content(w, 0))];
                for i in 1..=WRITES {
                    let v = svc
                        .kb_write(r, file, &content(w, i), version, hash.as_str())
                        .unwrap();
                    assert_eq!(v.version, version + 1, "writer {w} owns its file");
                    (version, hash) = (v.version, BlobId::parse(&v.hash).unwrap());
                    acked.push((version, content(w, i)));
                }
                acked
            })
        })
        .collect();
    let acked: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let env = env.reopen();
    let r = env.agent(env.root);
    for (w, versions) in acked.iter().enumerate() {
        let file = files[w];
        assert_eq!(
            env.svc.kb_read(r, file).unwrap().version,
            (WRITES + 1) as i64
        );
        for (version, sent) in versions {
            let got = env.svc.kb_read_version(r, file, *version).unwrap();
            assert_eq!(&got.content, sent, "writer {w} version {version}");
            assert_eq!(got.hash, BlobId::of(sent));
        }
    }
    let report = env.svc.fsck().unwrap();
    assert!(report.is_clean(), "{report:?}");
}

#[test]
fn issue_15_a_failed_commit_fails_every_write_of_its_batch() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("agency.db")).unwrap());
    let blobs = Arc::new(FsBlobStore::open(dir.path().join("blobs")).unwrap());
    let env = Env::assemble(
        dir,
        store.clone(),
        blobs,
        Arc::new(ManualClock::new(T0)),
        Limits::default(),
    );
    let r = env.agent(env.root);
    let files: Vec<FileId> = (0..2)
        .map(|w| {
            env.svc
                .kb_create(r, &format!("writer {w}"), &content(w, 0))
                .unwrap()
        })
        .collect();
    let fail = Arc::new(AtomicBool::new(true));
    store.fail_commits_while(fail.clone()).unwrap();

    // A holds the writer connection until both service writes are queued
    // behind it, so all three share one transaction.
    let (inside, a_inside) = std::sync::mpsc::channel();
    let a = {
        let store = store.clone();
        std::thread::spawn(move || {
            agency_store::write(&*store, |_| {
                inside.send(()).unwrap();
                while store.queued_writers() < 2 {
                    std::thread::yield_now();
                }
                Ok::<_, agency_store::StoreError>(())
            })
        })
    };
    a_inside.recv().unwrap();
    let writers: Vec<_> = files
        .iter()
        .enumerate()
        .map(|(w, &file)| {
            let svc = env.svc.clone();
            std::thread::spawn(move || {
                svc.kb_write(
                    r,
                    file,
                    &content(w, 1),
                    1,
                    BlobId::of(&content(w, 0)).as_str(),
                )
            })
        })
        .collect();
    let a_err = a.join().unwrap().unwrap_err().to_string();
    assert!(
        a_err.starts_with("failed to commit a write transaction on database"),
        "{a_err}"
    );
    for h in writers {
        let e = h.join().unwrap().unwrap_err().to_string();
        assert!(
            e.starts_with("failed to commit a write transaction on database"),
            "{e}"
        );
    }
    fail.store(false, Ordering::SeqCst);
    for (w, &file) in files.iter().enumerate() {
        assert_eq!(env.svc.kb_read(r, file).unwrap().version, 1, "writer {w}");
        // The same write goes through once commits do.
        env.svc
            .kb_write(
                r,
                file,
                &content(w, 1),
                1,
                BlobId::of(&content(w, 0)).as_str(),
            )
            .unwrap();
    }
    let report = env.svc.fsck().unwrap();
    assert!(report.is_clean(), "{report:?}");
}
