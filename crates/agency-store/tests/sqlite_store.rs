//! The SQLite backend: the conformance suite every backend passes (see
//! `agency_store::conformance`), then what only SQLite has: the file on
//! disk and its migrations, raw values the schema does not check, foreign
//! keys checked at commit, index use of hot queries, the reader pool.

use std::sync::Arc;

use agency_core::Timestamp;
use agency_store::conformance::Fresh;
use agency_store::conformance::fixtures::*;
use agency_store::{LogEntryRow, SqliteStore, StoreError, read};
use tempfile::TempDir;

/// A fresh SQLite store in a temporary directory, for the suite.
fn fresh() -> Fresh {
    let (dir, store) = open();
    (Box::new(dir), Box::new(store))
}

agency_store::store_conformance!(fresh);

fn open() -> (TempDir, SqliteStore) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqliteStore::open(&dir.path().join("agency.db")).expect("open store");
    (dir, store)
}

// ---- persistence and migrations ---------------------------------------------

#[test]
fn data_survives_reopen_and_migrations_are_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agency.db");
    let (h, state) = (hid(1), fid(STATE + 1));
    let store = SqliteStore::open(&path).unwrap();
    wr(&store, |tx| {
        add_handler(tx, 1, None)?;
        tx.insert_version(&version(state, 1))?;
        let summary = "born".to_owned();
        tx.insert_log_entry(&LogEntryRow {
            handler: h,
            at: Timestamp(7),
            agent: None,
            summary,
        })
    });
    drop(store);
    // Reopen twice: the second and third opens find the schema current.
    for _ in 0..2 {
        let store = SqliteStore::open(&path).unwrap();
        rd(&store, |tx| {
            assert_eq!(tx.handler(h)?.unwrap().state_doc, state);
            assert_eq!(tx.file(state)?.unwrap().latest_version, 1);
            assert_eq!(tx.versions(state)?, [version(state, 1)]);
            assert_eq!(tx.log_entries(h)?[0].summary, "born");
            Ok(())
        });
        drop(store);
        let raw = rusqlite::Connection::open(&path).unwrap();
        let v: i64 = raw
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, SqliteStore::SCHEMA_VERSION);
        let mode: String = raw
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
    }
}

#[test]
fn newer_schema_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agency.db");
    drop(SqliteStore::open(&path).unwrap());
    let newer = SqliteStore::SCHEMA_VERSION + 3;
    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.pragma_update(None, "user_version", newer).unwrap();
    let err = SqliteStore::open(&path).unwrap_err().to_string();
    let want = format!(
        "failed to open database {}: schema version {newer} is newer than this build supports ({})",
        path.display(),
        SqliteStore::SCHEMA_VERSION
    );
    assert_eq!(err, want);
}

#[test]
fn undecodable_values_are_reported_as_corrupt() {
    let (dir, store) = open();
    wr(&store, |tx| add_handler(tx, 1, None));
    let raw = rusqlite::Connection::open(dir.path().join("agency.db")).unwrap();
    raw.execute("UPDATE outcomes SET status = 'pondering'", [])
        .unwrap();
    let err = read(&store, |tx| tx.outcome(oid(1))).unwrap_err();
    let StoreError::Corrupt { what, value } = &err else {
        panic!("{err:?}")
    };
    assert_eq!((*what, value.as_str()), ("outcome status", "pondering"));
}

#[test]
fn dangling_foreign_key_fails_at_commit_and_persists_nothing() {
    let (_dir, store) = open();
    let err = wr_err(&store, |tx| tx.insert_agent(&agent(100, hid(42), 1)));
    assert!(err.to_string().contains("FOREIGN KEY"), "{err}");
    assert_eq!(rd(&store, |tx| tx.agent(aid(100))), None);
}

/// A backend error keeps SQLite's own error underneath (its code, for a
/// caller that must tell a full disk from a lock), printed once.
#[test]
fn a_backend_error_keeps_sqlites_error() {
    let (_dir, store) = open();
    let err = wr_err(&store, |tx| tx.insert_agent(&agent(100, hid(42), 1)));
    let StoreError::Backend { op, .. } = &err else {
        panic!("expected Backend: {err:?}")
    };
    let cause = err.cause().expect("a cause");
    let sqlite = cause
        .downcast_ref::<rusqlite::Error>()
        .expect("the cause is rusqlite's error");
    assert_eq!(
        sqlite.sqlite_error_code(),
        Some(rusqlite::ErrorCode::ConstraintViolation)
    );
    assert_eq!(err.to_string(), format!("failed to {op}: {sqlite}"));
    assert!(
        std::error::Error::source(&err).is_none(),
        "not printed twice"
    );
    // A refusal of the store itself has words, not an error, underneath.
    let missing = fid(DOC + 9);
    let err = wr_err(&store, |tx| tx.set_file_description(missing, "x"));
    assert!(
        err.cause()
            .unwrap()
            .downcast_ref::<rusqlite::Error>()
            .is_none()
    );
}

#[test]
fn hot_queries_use_indexes() {
    let (_d, store) = open();
    let plans = store.query_plans().unwrap();
    let plan = |name| {
        plans
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, p)| p.clone())
            .unwrap()
    };
    for name in ["has_work", "handlers_with_work"] {
        let p = plan(name);
        assert!(
            p.contains("USING INDEX") || p.contains("USING COVERING INDEX"),
            "{name}: {p}"
        );
        assert!(p.contains("outcomes_open_work"), "{name}: {p}");
        // The outcomes table is aliased `o` in these queries.
        assert!(
            !p.lines()
                .any(|l| l.starts_with("SCAN o") || l.starts_with("SCAN outcomes")),
            "{name}: {p}"
        );
    }
    for name in ["due_messages", "inbox"] {
        let p = plan(name);
        assert!(p.contains("USING INDEX messages_"), "{name}: {p}");
        assert!(
            !p.contains("TEMP B-TREE"),
            "{name} should not need a sort: {p}"
        );
    }
}

/// Issue 15 item 2: with 8 idle readers kept, 16 concurrent KB writers
/// (each reads first) opened a fresh reader connection for two writes in
/// five: a schema parse and every statement prepared again each time.
#[test]
fn issue_15_sixteen_concurrent_reads_reuse_their_connections() {
    let (_dir, store) = open();
    let store = Arc::new(store);
    let n = 16;
    let round = || {
        // Every read holds its connection until all sixteen hold one.
        let barrier = Arc::new(std::sync::Barrier::new(n));
        let threads: Vec<_> = (0..n)
            .map(|_| {
                let (store, barrier) = (store.clone(), barrier.clone());
                std::thread::spawn(move || {
                    read(&*store, |tx| {
                        barrier.wait();
                        tx.root_handler()
                    })
                    .unwrap()
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    };
    round();
    let opened = store.readers_opened();
    assert_eq!(opened, n as u64, "the first round opens one reader each");
    round();
    round();
    assert_eq!(
        store.readers_opened(),
        opened,
        "later rounds reuse the idle readers"
    );
}
