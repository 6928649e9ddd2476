//! The store conformance suite on PostgreSQL: every story on a database of
//! its own, made for it and dropped after it.
//!
//! A server is required: the suite fails when none is reachable, unless
//! `AGENCY_TEST_POSTGRES=off` says there is none on purpose.

use agency_postgres::PgStore;
use agency_postgres::scratch::{ScratchDb, admin_url};

fn fresh() -> agency_store::conformance::Fresh {
    let Some(admin) = admin_url() else {
        panic!("AGENCY_TEST_POSTGRES=off: no PostgreSQL server to run the suite against");
    };
    let db = ScratchDb::create(&admin)
        .unwrap_or_else(|e| panic!("{e} (set AGENCY_TEST_POSTGRES to a server's URL, or to off)"));
    let store = PgStore::open(db.url()).expect("open the scratch database");
    (Box::new(db), Box::new(store))
}

agency_store::store_conformance!(fresh);
