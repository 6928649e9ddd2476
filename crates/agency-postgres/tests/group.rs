//! Group commit on PostgreSQL: concurrent writes share transactions, yet
//! each write is kept or dropped on its own, and a broken connection fails
//! only the writes of its batch.

#![allow(clippy::unwrap_used)]

use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use agency_core::Timestamp;
use agency_postgres::PgStore;
use agency_postgres::scratch::{ScratchDb, admin_url};
use agency_store::StoreError;
use agency_store::events::{EventFilter, EventScope, NewEventRow};
use agency_store::mcp_pins::{McpPinChangeRow, PinChangeStatus};

fn open() -> (ScratchDb, Arc<PgStore>) {
    let admin = admin_url().expect("AGENCY_TEST_POSTGRES=off: no server for this test");
    let db = ScratchDb::create(&admin).unwrap();
    let store = PgStore::open(db.url()).unwrap();
    (db, Arc::new(store))
}

fn event(summary: &str) -> NewEventRow {
    NewEventRow {
        at: Timestamp(1),
        kind: "test.group".into(),
        handler: None,
        agent: None,
        outcome: None,
        summary: summary.to_owned(),
        data: "{}".into(),
    }
}

/// The summaries of every event in the log, in log order.
fn summaries(store: &PgStore) -> Vec<String> {
    let filter = EventFilter {
        after: 0,
        scope: EventScope::All,
        kinds: Vec::new(),
        since: None,
        limit: 1_000_000,
    };
    agency_store::read(store, |tx| tx.events_after(&filter))
        .unwrap()
        .into_iter()
        .map(|e| e.event.summary)
        .collect()
}

fn change(id: &str) -> McpPinChangeRow {
    McpPinChangeRow {
        id: id.to_owned(),
        server: "git".into(),
        tool: "push".into(),
        old_hash: None,
        old_def: None,
        new_hash: "h".into(),
        new_def: "def h".into(),
        seen_at: Timestamp(1),
        seen_by: None,
        status: PinChangeStatus::Pending,
        decided_at: None,
    }
}

const THREADS: usize = 8;
const WRITES: usize = 40;

#[test]
fn concurrent_writes_are_each_committed_once() {
    let (_db, store) = open();
    let start = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (store, start) = (store.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                for i in 0..WRITES {
                    // Lazy and durable writes mixed, as the service makes them.
                    let body = |tx: &mut dyn agency_store::Tx| {
                        tx.append_event(&event(&format!("t{t} w{i}")))?;
                        tx.append_event(&event(&format!("t{t} w{i} second")))
                    };
                    if i % 3 == 0 {
                        agency_store::write_lazy::<_, StoreError>(&*store, body).unwrap();
                    } else {
                        agency_store::write::<_, StoreError>(&*store, body).unwrap();
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    let got = summaries(&store);
    assert_eq!(got.len(), THREADS * WRITES * 2, "every write, once");
    for t in 0..THREADS {
        let mine: Vec<_> = got
            .iter()
            .filter(|s| s.starts_with(&format!("t{t} ")))
            .cloned()
            .collect();
        let want: Vec<_> = (0..WRITES)
            .flat_map(|i| [format!("t{t} w{i}"), format!("t{t} w{i} second")])
            .collect();
        assert_eq!(
            mine, want,
            "a writer's events in its order, each pair together"
        );
    }
}

#[test]
fn a_failing_write_leaves_the_others_of_its_batch_committed() {
    let (_db, store) = open();
    agency_store::write::<_, StoreError>(&*store, |tx| tx.insert_mcp_pin_change(&change("dup")))
        .unwrap();
    let start = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (store, start) = (store.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                let mut kept = Vec::new();
                for i in 0..WRITES {
                    let name = format!("t{t} w{i}");
                    // Every third write of the odd threads fails after it
                    // wrote: by the database (a unique violation, which
                    // aborts PostgreSQL's transaction) or by the closure.
                    let fails = t % 2 == 1 && i % 3 == 0;
                    let r = agency_store::write::<_, StoreError>(&*store, |tx| {
                        tx.append_event(&event(&name))?;
                        if fails && i % 2 == 0 {
                            tx.insert_mcp_pin_change(&change("dup"))?;
                        } else if fails {
                            return Err(StoreError::Rollback);
                        }
                        tx.insert_mcp_pin_change(&change(&name))
                    });
                    match r {
                        Ok(()) => {
                            assert!(!fails, "{name} should have failed");
                            kept.push(name);
                        }
                        Err(StoreError::Unique { .. }) if fails && i % 2 == 0 => {}
                        Err(StoreError::Rollback) if fails => {}
                        Err(e) => panic!("{name}: {e}"),
                    }
                }
                kept
            })
        })
        .collect();
    let mut kept: Vec<String> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    kept.sort();
    let mut got = summaries(&store);
    got.sort();
    assert_eq!(got, kept, "exactly the writes that succeeded");
    let changes =
        agency_store::read::<_, StoreError>(&*store, |tx| tx.mcp_pin_changes(None, None, 100_000))
            .unwrap();
    assert_eq!(
        changes.len(),
        kept.len() + 1,
        "their rows too, and the first"
    );
}

#[test]
fn a_failure_inside_an_open_batch_spares_the_writer_queued_behind_it() {
    let (_db, store) = open();
    let (queued_tx, queued_rx) = mpsc::channel();
    let behind = {
        let store = store.clone();
        thread::spawn(move || {
            queued_rx.recv().unwrap();
            agency_store::write::<_, StoreError>(&*store, |tx| {
                tx.append_event(&event("behind")).map(drop)
            })
        })
    };
    let r = agency_store::write::<_, StoreError>(&*store, |tx| {
        tx.append_event(&event("failing"))?;
        // Let the other writer queue for the connection, so this batch is
        // left open for it when this closure fails.
        queued_tx.send(()).unwrap();
        thread::sleep(Duration::from_millis(100));
        tx.insert_mcp_pin_change(&change("x"))?;
        tx.insert_mcp_pin_change(&change("x"))
    });
    assert!(matches!(r, Err(StoreError::Unique { .. })), "{r:?}");
    behind.join().unwrap().unwrap();
    assert_eq!(summaries(&store), ["behind"]);
    agency_store::write::<_, StoreError>(&*store, |tx| tx.append_event(&event("after")).map(drop))
        .unwrap();
    assert_eq!(summaries(&store), ["behind", "after"]);
}

#[test]
fn a_panicking_write_loses_none_of_the_others() {
    let (_db, store) = open();
    let start = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (store, start) = (store.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                for i in 0..WRITES {
                    let name = format!("t{t} w{i}");
                    agency_store::write::<_, StoreError>(&*store, |tx| {
                        tx.append_event(&event(&name))?;
                        if t == 0 && i == WRITES / 2 {
                            panic!("closure panics on purpose");
                        }
                        Ok(())
                    })
                    .unwrap();
                }
            })
        })
        .collect();
    let mut panicked = 0;
    for (t, h) in handles.into_iter().enumerate() {
        match h.join() {
            Ok(()) => assert_ne!(t, 0, "thread 0 should have panicked"),
            Err(payload) => {
                assert_eq!(
                    payload.downcast_ref::<&str>(),
                    Some(&"closure panics on purpose"),
                    "the closure's own panic, resumed"
                );
                panicked += 1;
            }
        }
    }
    assert_eq!(panicked, 1);
    let got = summaries(&store);
    let mut want: Vec<String> = (1..THREADS)
        .flat_map(|t| (0..WRITES).map(move |i| format!("t{t} w{i}")))
        .chain((0..WRITES / 2).map(|i| format!("t0 w{i}")))
        .collect();
    want.sort();
    let mut got_sorted = got.clone();
    got_sorted.sort();
    assert_eq!(got_sorted, want, "every write but the panicking one");
    // The store still writes after it.
    agency_store::write::<_, StoreError>(&*store, |tx| tx.append_event(&event("after")).map(drop))
        .unwrap();
    assert_eq!(summaries(&store).len(), got.len() + 1);
}

/// Terminate the server sessions of `db` that are inside a transaction:
/// the writer connection while a write closure runs.
fn kill_writer(db: &ScratchDb) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(db.url(), tokio_postgres::NoTls)
            .await
            .unwrap();
        let task = tokio::spawn(conn);
        let killed: i64 = client
            .query_one(
                "SELECT count(*) FROM (SELECT pg_terminate_backend(pid, 5000)
                 FROM pg_stat_activity
                 WHERE datname = current_database() AND pid <> pg_backend_pid()
                   AND state LIKE 'idle in transaction%') k",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(killed, 1, "the writer's session");
        drop(client);
        let _ = task.await;
    });
}

#[test]
fn a_lost_connection_fails_its_batch_and_the_next_write_reconnects() {
    let (db, store) = open();
    agency_store::write::<_, StoreError>(&*store, |tx| tx.append_event(&event("before")).map(drop))
        .unwrap();
    let r = agency_store::write::<_, StoreError>(&*store, |tx| {
        tx.append_event(&event("lost"))?;
        kill_writer(&db);
        tx.append_event(&event("lost too")).map(drop)
    });
    let err = r.unwrap_err();
    assert!(matches!(err, StoreError::Backend { .. }), "{err:?}");
    // The next write takes a fresh connection.
    agency_store::write::<_, StoreError>(&*store, |tx| tx.append_event(&event("after")).map(drop))
        .unwrap();
    assert_eq!(summaries(&store), ["before", "after"]);
}
