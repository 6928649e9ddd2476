//! PostgreSQL backend of the store: [`PgStore`] runs each transaction
//! closure of `agency_store`'s [`Store`] contract on a PostgreSQL database,
//! and [`PgBlobStore`] keeps content-addressed blobs in the same database.
//!
//! - **Serialised writers, across processes.** Every write transaction
//!   first takes one transaction-scoped advisory lock of the database, so
//!   write closures never interleave, whichever daemon runs them: a check
//!   made in a closure still holds when it acts (quotas, budget
//!   reservations, find-or-create of approvals, one live agent per
//!   handler), a closure runs exactly once (no serialisation failure to
//!   retry), and commit order is the order of the event log's sequence
//!   numbers, so a reader following the log by cursor never skips one
//!   (numbers are assigned inside the transaction, under the lock).
//! - **Group commit.** Within one store, concurrent write closures share
//!   one such transaction, each in a savepoint of its own, one after the
//!   other on the store's writer connection (`group`): one turn of the lock
//!   and one WAL flush for the batch instead of one each. A closure that
//!   fails or panics is rolled back to its savepoint alone; a write returns
//!   only once its batch committed, and a failed commit fails every write
//!   of the batch.
//! - **Snapshots.** A read runs in `REPEATABLE READ READ ONLY`: one
//!   consistent snapshot, alongside writes and other reads.
//! - **Durability.** A write returns once its batch's commit is flushed
//!   (`synchronous_commit` as the server has it); a batch of lazy writes
//!   only commits without waiting for the flush (`synchronous_commit =
//!   off` for that transaction).
//! - **Schema.** Its own list of migrations (not SQLite's), applied under
//!   the same lock, tracked in `agency_schema`.
//!
//! The SQL lives in `tx/`, one file per area of `agency_store::Tx`, each
//! implementing its area trait on `PgTx`; `convert` holds the column
//! conventions, shared with the SQLite store's.

mod blob;
mod conn;
mod convert;
mod fts;
mod group;
mod listen;
mod migrate;
pub mod scratch;
mod tx;

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::{Arc, Mutex, PoisonError};

use agency_store::{Store, StoreError, Tx};

pub use blob::PgBlobStore;
use conn::Conn;
use convert::Ctx;
use group::Writer;
pub use listen::EventNotifications;
pub use migrate::CopyReport;

/// The schema, one migration per entry; entry `i` takes the database from
/// version `i` to `i + 1`. Append only: never edit a shipped entry.
const MIGRATIONS: &[&str] = &[
    include_str!("schema_v1.sql"),
    include_str!("schema_v2.sql"),
    include_str!("schema_v3.sql"),
];

/// The advisory lock every write transaction holds (the bytes of "agency").
/// Advisory locks are per database, so stores on other databases of the
/// same server do not contend.
const WRITE_LOCK: i64 = 0x6167_656e_6379;

/// Idle connections kept for reuse; more may be open at a peak, each
/// closed after its transaction. A connection closed is a backend the
/// server forks again for the next one, milliseconds of its CPU: with 8
/// kept, sixteen writers (a check, a blob put and a write each, on
/// connections of their own) made the server spend ~3 ms of CPU per KB
/// write, most of it forking and ending backends (benchmark item 3: 24
/// kept, 1.5 ms). Not more, because every daemon sharing the server keeps
/// its own (PostgreSQL allows 100 connections by default; three daemons
/// keep at most 3 × (24 + the writer and the listener) = 78).
const MAX_IDLE: usize = 24;

/// One open transaction on a connection: the [`Tx`] handed to transaction
/// closures. The store has already begun the transaction on `conn`.
pub(crate) struct PgTx<'c> {
    conn: &'c mut Conn,
}

/// What a store shares with the blob store of the same database.
struct Shared {
    config: tokio_postgres::Config,
    /// Where the connections live, for error messages (no password).
    target: String,
    idle: Mutex<Vec<Conn>>,
}

impl Shared {
    fn op(&self, what: &str) -> String {
        format!("{what} on database {}", self.target)
    }

    fn take(&self) -> Result<Conn, StoreError> {
        let idle = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop()
            .map(|mut c| {
                c.refresh();
                c
            });
        match idle {
            Some(c) if !c.is_closed() => Ok(c),
            _ => Conn::connect(&self.config)
                .map_err(|e| StoreError::backend(self.op("connect"), e.to_string())),
        }
    }

    fn put(&self, conn: Conn) {
        if conn.is_closed() {
            return;
        }
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < MAX_IDLE {
            idle.push(conn);
        }
    }

    /// Run `f` on a connection inside `begin` … COMMIT (or ROLLBACK when
    /// `f` fails or `commit` is false). A closure that panics takes its
    /// connection with it: closing the connection rolls the transaction
    /// back on the server.
    fn transaction(
        &self,
        begin: &str,
        commit: bool,
        f: &mut dyn FnMut(&mut Conn) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let mut conn = self.take()?;
        conn.batch(begin).ctx(|| self.op("begin a transaction"))?;
        let result = match catch_unwind(AssertUnwindSafe(|| f(&mut conn))) {
            Ok(r) => r,
            Err(panic) => {
                drop(conn);
                resume_unwind(panic);
            }
        };
        match result {
            Ok(()) if commit => {
                conn.batch("COMMIT").ctx(|| self.op("commit"))?;
            }
            _ => {
                // Nothing to keep; should the rollback fail, the broken
                // connection is not reused.
                if conn.batch("ROLLBACK").is_err() {
                    return result;
                }
            }
        }
        self.put(conn);
        result
    }
}

/// A [`Store`] on a PostgreSQL database. Cheap to share: wrap it in an
/// `Arc`.
pub struct PgStore {
    shared: Arc<Shared>,
    /// The writer connection and the batch of writes open on it.
    writer: Writer,
}

impl fmt::Debug for PgStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgStore")
            .field("database", &self.shared.target)
            .finish_non_exhaustive()
    }
}

/// The database a URL names, for messages: host, port and name, never the
/// password.
fn describe(config: &tokio_postgres::Config) -> String {
    let host = config
        .get_hosts()
        .first()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(h) => h.clone(),
            tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
        })
        .unwrap_or_else(|| "localhost".into());
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let name = config.get_dbname().unwrap_or("(default)");
    format!("{name} at {host}:{port}")
}

impl PgStore {
    /// The schema version this build creates and understands.
    pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

    /// Open the database a `postgres://` URL names and bring its schema up
    /// to date. A database written by a newer build (higher schema
    /// version) is refused rather than misread.
    pub fn open(url: &str) -> Result<PgStore, StoreError> {
        let config: tokio_postgres::Config = url.parse().map_err(|e| {
            StoreError::backend(
                "open the PostgreSQL store",
                format!("the URL is not a PostgreSQL connection URL: {e}"),
            )
        })?;
        let shared = Arc::new(Shared {
            target: describe(&config),
            config,
            idle: Mutex::new(Vec::new()),
        });
        migrate(&shared)?;
        Ok(PgStore {
            shared,
            writer: Writer::new(),
        })
    }

    /// The blob store of the same database.
    pub fn blobs(&self) -> PgBlobStore {
        PgBlobStore::new(self.shared.clone())
    }

    /// The database, for messages: `name at host:port`.
    pub fn target(&self) -> &str {
        &self.shared.target
    }
}

/// Begin a transaction that writes outside the batches of `group`
/// (migrations, a copy into the store), holding the writers' lock as a
/// batch does.
fn begin_locked() -> String {
    format!("BEGIN ISOLATION LEVEL READ COMMITTED; SELECT pg_advisory_xact_lock({WRITE_LOCK})")
}

const BEGIN_READ: &str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";

impl Store for PgStore {
    fn read_dyn(
        &self,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.shared
            .transaction(BEGIN_READ, false, &mut |conn| f(&mut PgTx { conn }))
    }

    fn write_dyn(
        &self,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.writer.write(&self.shared, f, false)
    }

    fn write_lazy_dyn(
        &self,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.writer.write(&self.shared, f, true)
    }
}

/// Apply the migrations the database has not seen yet, in one transaction
/// holding the writers' lock, so two daemons opening a fresh database at
/// once cannot both apply one.
fn migrate(shared: &Shared) -> Result<(), StoreError> {
    let open_op = || shared.op("open the store");
    shared.transaction(&begin_locked(), true, &mut |conn| {
        conn.batch("CREATE TABLE IF NOT EXISTS agency_schema (version BIGINT NOT NULL)")
            .ctx(open_op)?;
        let version: i64 = match conn
            .query_opt("SELECT version FROM agency_schema", &[])
            .ctx(open_op)?
        {
            Some(row) => row.try_get(0).ctx(open_op)?,
            None => {
                conn.execute("INSERT INTO agency_schema (version) VALUES (0)", &[])
                    .ctx(open_op)?;
                0
            }
        };
        if version > PgStore::SCHEMA_VERSION {
            return Err(StoreError::backend(
                open_op(),
                format!(
                    "schema version {version} is newer than this build supports ({})",
                    PgStore::SCHEMA_VERSION
                ),
            ));
        }
        let from = usize::try_from(version)
            .map_err(|_| StoreError::corrupt("schema version", version.to_string()))?;
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(from) {
            let next = i as i64 + 1;
            let op = || shared.op(&format!("migrate to schema version {next}"));
            conn.batch(sql).ctx(op)?;
            conn.execute("UPDATE agency_schema SET version = $1", &[&next])
                .ctx(op)?;
        }
        Ok(())
    })
}
