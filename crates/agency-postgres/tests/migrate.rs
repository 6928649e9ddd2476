//! A SQLite store copied into PostgreSQL: rows, blobs and key sequences
//! arrive, the source is left as it was, and a second copy into the same
//! database is refused.

#![allow(clippy::unwrap_used)]

use agency_core::Timestamp;
use agency_core::access::FileKind;
use agency_postgres::PgStore;
use agency_postgres::scratch::{ScratchDb, admin_url};
use agency_store::conformance::fixtures::*;
use agency_store::{
    BlobStore, EventFilter, EventScope, FsBlobStore, NewEventRow, SqliteStore, Store, StoreError,
    VersionRow, fsck, read, write,
};

fn event(at: i64, kind: &str) -> NewEventRow {
    NewEventRow {
        at: Timestamp(at),
        kind: kind.into(),
        handler: None,
        agent: None,
        outcome: None,
        summary: format!("{kind} at {at}"),
        data: "{}".into(),
    }
}

/// Everything `read` sees of the populated tables, for comparing stores.
fn snapshot(store: &dyn Store) -> String {
    read(store, |tx| {
        let events = tx.events_after(&EventFilter {
            after: 0,
            scope: EventScope::All,
            kinds: Vec::new(),
            since: None,
            limit: 100,
        })?;
        let versions = tx.all_versions()?;
        let files = tx.file(fid(7))?;
        let handler = tx.handler(hid(1))?;
        let lease = tx.lease(hid(1))?;
        Ok::<_, StoreError>(format!(
            "{events:?}\n{versions:?}\n{files:?}\n{handler:?}\n{lease:?}"
        ))
    })
    .unwrap()
}

#[test]
fn a_sqlite_store_is_copied_whole_and_left_untouched() {
    let admin = admin_url().expect("AGENCY_TEST_POSTGRES=off: no server for this test");
    let dir = tempfile::tempdir().unwrap();
    let src = SqliteStore::open(&dir.path().join("agency.db")).unwrap();
    let src_blobs = FsBlobStore::open(dir.path().join("blobs")).unwrap();
    let body = src_blobs.put(b"the body of a KB file").unwrap();
    let orphan = src_blobs.put(b"no version points here").unwrap();
    write(&src, |tx| {
        add_handler(tx, 1, None)?;
        tx.insert_file(&file(fid(7), FileKind::Document, "a doc", Some(hid(1))))?;
        tx.insert_version(&VersionRow {
            file: fid(7),
            version: 1,
            hash: body.clone(),
            size: 21,
            created_at: Timestamp(5),
            handler: Some(hid(1)),
            agent: None,
        })?;
        for (at, kind) in [(30, "mail.sent"), (10, "agent.started"), (20, "kb.written")] {
            tx.append_event(&event(at, kind))?;
        }
        tx.claim_lease(hid(1), "daemon-a", 60_000)?;
        Ok::<_, StoreError>(())
    })
    .unwrap();
    let before = snapshot(&src);

    let db = ScratchDb::create(&admin).unwrap();
    let dst = PgStore::open(db.url()).unwrap();
    let report = dst.copy_from_sqlite(&src, &src_blobs).unwrap();
    assert_eq!(report.blobs, 2);
    let count = |t: &str| report.tables.iter().find(|(n, _)| n == t).map(|(_, n)| *n);
    assert_eq!(count("events"), Some(3));
    assert_eq!(count("versions"), Some(1));
    assert_eq!(count("handler_leases"), Some(1));
    assert_eq!(count("memories"), Some(0), "empty tables are listed too");

    assert_eq!(snapshot(&dst), before, "the copy reads as the source");
    assert_eq!(snapshot(&src), before, "the source is unchanged");
    let blobs = dst.blobs();
    assert_eq!(blobs.get(&body).unwrap(), b"the body of a KB file");
    let check = fsck(&dst, &blobs).unwrap();
    assert!(check.is_clean(), "{check:?}");
    assert_eq!(check.unreferenced_blobs, [orphan]);

    // New keys follow the copied ones.
    let seq = write(&dst, |tx| tx.append_event(&event(40, "after.copy"))).unwrap();
    assert_eq!(seq, 4);

    let again = dst.copy_from_sqlite(&src, &src_blobs).unwrap_err();
    assert!(
        again.to_string().contains("not empty"),
        "a second copy is refused: {again}"
    );
}
