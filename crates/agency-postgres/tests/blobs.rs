//! Blobs in the database: content-addressed, verified on read, and
//! collected one shard at a time by the time of their last put (a put of
//! content already present counts), as the file blob store does.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, SystemTime};

use agency_postgres::PgStore;
use agency_postgres::scratch::{ScratchDb, admin_url};
use agency_store::{BlobCheck, BlobId, BlobStore, StoreError};

fn shard(id: &BlobId) -> u8 {
    u8::from_str_radix(&id.as_str()["blake3:".len()..][..2], 16).unwrap()
}

#[test]
fn blobs_round_trip_and_are_collected_by_last_put() {
    let admin = admin_url().expect("AGENCY_TEST_POSTGRES=off: no server for this test");
    let db = ScratchDb::create(&admin).unwrap();
    let store = PgStore::open(db.url()).unwrap();
    let blobs = store.blobs();

    let a = blobs.put(b"alpha").unwrap();
    assert_eq!(a, BlobId::of(b"alpha"));
    assert_eq!(blobs.put(b"alpha").unwrap(), a, "idempotent");
    assert_eq!(blobs.get(&a).unwrap(), b"alpha");
    assert_eq!(blobs.check(&a).unwrap(), BlobCheck::Ok);
    let missing = BlobId::of(b"never stored");
    assert!(matches!(
        blobs.get(&missing),
        Err(StoreError::MissingBlob(_))
    ));
    assert_eq!(blobs.check(&missing).unwrap(), BlobCheck::Missing);
    assert_eq!(blobs.list().unwrap(), [a.clone()]);

    let past = SystemTime::now() - Duration::from_secs(3600);
    let future = SystemTime::now() + Duration::from_secs(3600);
    // Young: neither listed nor removed before a cut-off in the past.
    assert!(blobs.list_put_before(shard(&a), past).unwrap().is_empty());
    assert_eq!(blobs.remove_if_put_before(&a, past).unwrap(), None);
    // Other shards do not hold it.
    let other = shard(&a).wrapping_add(1);
    assert!(blobs.list_put_before(other, future).unwrap().is_empty());
    // Old enough: listed with its size, removed with it.
    assert_eq!(
        blobs.list_put_before(shard(&a), future).unwrap(),
        [(a.clone(), 5)]
    );
    assert_eq!(blobs.remove_if_put_before(&a, future).unwrap(), Some(5));
    assert_eq!(
        blobs.remove_if_put_before(&a, future).unwrap(),
        None,
        "gone"
    );
    assert!(matches!(blobs.get(&a), Err(StoreError::MissingBlob(_))));
    assert!(blobs.list().unwrap().is_empty());

    // A put of content already present vouches for it again: a cut-off
    // between the two puts keeps it.
    let b = blobs.put(b"beta").unwrap();
    std::thread::sleep(Duration::from_millis(30));
    let between = SystemTime::now();
    std::thread::sleep(Duration::from_millis(30));
    blobs.put(b"beta").unwrap();
    assert_eq!(blobs.remove_if_put_before(&b, between).unwrap(), None);
    assert_eq!(blobs.get(&b).unwrap(), b"beta");
}
