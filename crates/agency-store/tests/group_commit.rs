//! Group commit of the SQLite backend (issue 15): concurrent writers share
//! transactions, yet every acknowledged write is there, in order, after the
//! store is reopened, and a write that fails or panics inside a batch
//! undoes only its own changes.
//!
//! A batch of several writes is made deterministic without timing: the
//! first writer's closure holds the connection until the others are queued
//! for it (`SqliteStore::queued_writers`), so it leaves its transaction open
//! for them.

#![allow(clippy::unwrap_used)]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::Arc;

use agency_core::access::FileKind;
use agency_core::{FileId, Timestamp};
use agency_store::{BlobId, FileRow, SqliteStore, StoreError, Tx, VersionRow, read, write};
use uuid::Uuid;

type R<T> = Result<T, StoreError>;

fn fid(n: u128) -> FileId {
    FileId(Uuid::from_u128(0x3_0000 + n))
}

fn body(file: u128, version: i64) -> String {
    format!("file {file} version {version}")
}

fn new_file(tx: &mut dyn Tx, n: u128) -> R<()> {
    tx.insert_file(&FileRow {
        id: fid(n),
        kind: FileKind::Document,
        description: format!("file {n}"),
        owner: None,
        created_at: Timestamp(1),
        created_by: None,
        latest_version: 0,
    })
}

fn add_version(tx: &mut dyn Tx, n: u128, version: i64) -> R<()> {
    tx.insert_version(&VersionRow {
        file: fid(n),
        version,
        hash: BlobId::of(body(n, version).as_bytes()),
        size: 1,
        created_at: Timestamp(version),
        handler: None,
        agent: None,
    })
}

/// The versions of file `n` as `(version, hash)`.
fn versions(store: &SqliteStore, n: u128) -> Vec<(i64, BlobId)> {
    read(store, |tx| tx.versions(fid(n)))
        .unwrap()
        .into_iter()
        .map(|v| (v.version, v.hash))
        .collect()
}

/// Wait (without a clock) until `n` writers are queued for the connection.
fn until_queued(store: &SqliteStore, n: usize) {
    while store.queued_writers() < n {
        std::thread::yield_now();
    }
}

fn open(dir: &Path) -> Arc<SqliteStore> {
    Arc::new(SqliteStore::open(&dir.join("agency.db")).unwrap())
}

#[test]
fn issue_15_every_acknowledged_write_of_16_concurrent_writers_is_present_after_reopen() {
    const WRITERS: u128 = 16;
    const WRITES: i64 = 40;
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    for n in 0..WRITERS {
        write(&*store, |tx| new_file(tx, n)).unwrap();
    }
    let handles: Vec<_> = (0..WRITERS)
        .map(|n| {
            let store = store.clone();
            std::thread::spawn(move || {
                let mut acked = 0;
                for v in 1..=WRITES {
                    write(&*store, |tx| add_version(tx, n, v)).unwrap();
                    acked = v;
                }
                acked
            })
        })
        .collect();
    let acked: Vec<i64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    drop(store);
    let store = open(dir.path());
    for n in 0..WRITERS {
        let want: Vec<_> = (1..=acked[n as usize])
            .map(|v| (v, BlobId::of(body(n, v).as_bytes())))
            .collect();
        assert_eq!(versions(&store, n), want, "file {n}");
        let latest = read(&*store, |tx| tx.file(fid(n))).unwrap().unwrap();
        assert_eq!(latest.latest_version, WRITES, "file {n}");
    }
}

/// Writer A opens a batch and holds it until B and C are queued; B fails
/// the way `fail_b` says; A and C are kept, B's row is not.
fn batch_with_a_failing_member(fail_b: fn(&mut dyn Tx) -> R<()>) {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path());
    for n in 0..3 {
        write(&*store, |tx| new_file(tx, n)).unwrap();
    }
    let (inside, a_inside) = std::sync::mpsc::channel();
    let a = {
        let store = store.clone();
        std::thread::spawn(move || {
            write(&*store, |tx| {
                add_version(tx, 0, 1)?;
                inside.send(()).unwrap();
                until_queued(&store, 2);
                Ok::<_, StoreError>(())
            })
        })
    };
    // B and C queue while A holds the connection.
    a_inside.recv().unwrap();
    let b = {
        let store = store.clone();
        std::thread::spawn(move || {
            catch_unwind(AssertUnwindSafe(|| {
                write(&*store, |tx| {
                    add_version(tx, 1, 1)?;
                    fail_b(tx)
                })
            }))
        })
    };
    let c = {
        let store = store.clone();
        std::thread::spawn(move || write(&*store, |tx| add_version(tx, 2, 1)))
    };
    a.join().unwrap().unwrap();
    c.join().unwrap().unwrap();
    // B either panicked, as it was told to, or was refused.
    if let Ok(r) = b.join().unwrap() {
        assert!(r.is_err(), "B's write was refused");
    }
    assert_eq!(versions(&store, 0).len(), 1, "A was kept");
    assert_eq!(versions(&store, 1), [], "B was undone");
    assert_eq!(versions(&store, 2).len(), 1, "C was kept");
    // The connection is clean for the next writer.
    write(&*store, |tx| add_version(tx, 1, 1)).unwrap();
    assert_eq!(versions(&store, 1).len(), 1);
}

#[test]
fn issue_15_a_refused_write_in_a_batch_undoes_only_its_own_changes() {
    batch_with_a_failing_member(|_| Err(StoreError::Rollback));
}

#[test]
fn issue_15_a_constraint_violation_in_a_batch_undoes_only_its_own_changes() {
    // Version 1 of file 0 again: A's row, already in the batch.
    batch_with_a_failing_member(|tx| add_version(tx, 0, 1));
}

#[test]
fn issue_15_a_panic_in_a_batch_undoes_only_its_own_changes() {
    batch_with_a_failing_member(|_| panic!("a closure panicked inside a batch"));
}
