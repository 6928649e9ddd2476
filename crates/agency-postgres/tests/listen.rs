//! Wake-ups between daemons: a listener hears of events another store
//! (another daemon) committed, by their numbers, and of nothing before
//! the commit.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use agency_core::Timestamp;
use agency_postgres::scratch::{ScratchDb, admin_url};
use agency_postgres::{EventNotifications, PgStore};
use agency_store::{NewEventRow, StoreError, write};

fn event(kind: &str) -> NewEventRow {
    NewEventRow {
        at: Timestamp(1),
        kind: kind.into(),
        handler: None,
        agent: None,
        outcome: None,
        summary: String::new(),
        data: "{}".into(),
    }
}

#[test]
fn a_listener_hears_the_numbers_of_committed_events() {
    let admin = admin_url().expect("AGENCY_TEST_POSTGRES=off: no server for this test");
    let db = ScratchDb::create(&admin).unwrap();
    let store = PgStore::open(db.url()).unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut heard = EventNotifications::listen(db.url()).unwrap();
    // The listener connects in the background: write until it hears.
    rt.block_on(async {
        for _ in 0..100 {
            let seq = write(&store, |tx| {
                tx.append_event(&event("a.one"))?;
                tx.append_event(&event("a.two"))
            })
            .unwrap();
            let Ok(Some(mut n)) =
                tokio::time::timeout(Duration::from_millis(200), heard.next()).await
            else {
                continue;
            };
            // Each statement notifies its own highest number; the last
            // one of the commit comes too, and nothing higher.
            while n < seq {
                n = tokio::time::timeout(Duration::from_secs(30), heard.next())
                    .await
                    .unwrap()
                    .unwrap();
            }
            assert_eq!(n, seq, "the commit's numbers, not beyond");
            return;
        }
        panic!("no notification heard");
    });
    // A rolled-back write notifies nothing.
    let _ = write(&store, |tx| {
        tx.append_event(&event("b.gone"))?;
        Err::<(), _>(StoreError::Rollback)
    });
    let quiet =
        rt.block_on(async { tokio::time::timeout(Duration::from_millis(500), heard.next()).await });
    assert!(quiet.is_err(), "heard {quiet:?} of a rolled-back event");
    let seq = write(&store, |tx| tx.append_event(&event("c.three"))).unwrap();
    let n = rt
        .block_on(async { tokio::time::timeout(Duration::from_secs(30), heard.next()).await })
        .unwrap();
    assert_eq!(n, Some(seq));
}
