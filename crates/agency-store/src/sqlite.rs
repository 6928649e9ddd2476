//! SQLite backend: [`SqliteStore`] runs each transaction closure on a
//! SQLite database in WAL mode.
//!
//! - One writer connection behind a mutex: write closures are serialized,
//!   inside a `BEGIN IMMEDIATE` transaction, so it holds the write lock from
//!   its first statement and never fails half-way on a lock upgrade.
//!   Concurrent writers share one transaction, each closure in its own
//!   savepoint, and so one commit and one WAL fsync (group commit, see
//!   `group`).
//! - A small pool of reader connections: each read closure runs in
//!   `BEGIN DEFERRED` and sees one consistent snapshot; WAL lets readers
//!   proceed while a write is in progress. Readers are `query_only`.
//! - `synchronous = FULL`: a commit is on disk (WAL fsynced) before
//!   `write_dyn` returns, so an acknowledged write survives a crash.
//!   `write_lazy_dyn` runs one transaction with `NORMAL` (no fsync; safe
//!   against the process being killed, carried to disk by the next FULL
//!   commit).
//! - The schema is a list of migrations applied in order, each in its own
//!   transaction, tracked in `PRAGMA user_version`.
//!
//! The SQL lives in the submodules, one per area of [`Tx`]: each
//! implements its area trait (e.g. `KbTx` in `kb`) on `SqliteTx`, and
//! `convert` holds the column conventions.

mod agents;
mod approvals;
mod audit_log;
mod budgets;
mod calls;
mod caps;
mod convert;
mod events;
pub mod export;
mod group;
mod handler_settings;
mod handlers;
mod kb;
mod leases;
mod lessons;
mod mail;
mod maintenance;
mod mcp_pins;
mod memory;
mod org_messages;
mod org_tools;
mod orgs;
mod outcomes;
mod pipelines;
mod problems;
mod runs;
mod usage;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use rusqlite::config::DbConfig;
use rusqlite::types::Value;
use rusqlite::{Connection, OpenFlags, TransactionBehavior, params_from_iter};

use self::group::Writer;

use self::convert::Ctx;
use crate::error::StoreError;
use crate::store::Store;
use crate::tx::Tx;

/// The schema, one migration per entry; entry `i` takes the database from
/// `user_version` `i` to `i + 1`. Append only: never edit a shipped entry.
const MIGRATIONS: &[&str] = &[
    include_str!("sqlite/schema_v1.sql"),
    include_str!("sqlite/schema_v2.sql"),
    include_str!("sqlite/schema_v3.sql"),
    include_str!("sqlite/schema_v4.sql"),
    include_str!("sqlite/schema_v5.sql"),
    include_str!("sqlite/schema_v6.sql"),
    include_str!("sqlite/schema_v7.sql"),
    include_str!("sqlite/schema_v8.sql"),
    include_str!("sqlite/schema_v9.sql"),
    include_str!("sqlite/schema_v10.sql"),
    include_str!("sqlite/schema_v11.sql"),
    include_str!("sqlite/schema_v12.sql"),
    include_str!("sqlite/schema_v13.sql"),
    include_str!("sqlite/schema_v14.sql"),
    include_str!("sqlite/schema_v15.sql"),
    include_str!("sqlite/schema_v16.sql"),
    include_str!("sqlite/schema_v17.sql"),
    include_str!("sqlite/schema_v18.sql"),
    include_str!("sqlite/schema_v19.sql"),
    include_str!("sqlite/schema_v20.sql"),
    include_str!("sqlite/schema_v21.sql"),
    include_str!("sqlite/schema_v22.sql"),
    include_str!("sqlite/schema_v23.sql"),
    include_str!("sqlite/schema_v24.sql"),
    include_str!("sqlite/schema_v25.sql"),
    include_str!("sqlite/schema_v26.sql"),
    include_str!("sqlite/schema_v27.sql"),
    include_str!("sqlite/schema_v28.sql"),
    include_str!("sqlite/schema_v29.sql"),
    include_str!("sqlite/schema_v30.sql"),
    include_str!("sqlite/schema_v31.sql"),
];

/// How long a connection waits for a lock held by another process (e.g. a
/// second `agency` command) before giving up with "database is locked".
const BUSY_TIMEOUT: Duration = Duration::from_millis(5000);

/// Idle reader connections kept for reuse; more may be open at a peak,
/// each closed after its read. Opening one costs the schema's parse and
/// every statement's preparation again: with 8 kept, 16 concurrent KB
/// writers (each write reads first) opened a new reader for two writes in
/// five and wrote ×0.7–×1.1 of the naive floor, ×1.25–×1.36 with 32. An idle reader holds at most its page cache (2 MiB).
const MAX_IDLE_READERS: usize = 32;

/// The WAL's size, in pages, at which a commit copies it back into the
/// database (SQLite's default is 1000). Each checkpoint writes every page
/// the WAL holds once and fsyncs the database file; the pages every model
/// call's metering touches (the event log's, the ledger's) are the same
/// few, so a longer interval writes them back fewer times: 5000 pages cost
/// the gateway ~3% less CPU per call than 1000, measured. The WAL file
/// stays at its largest size (here ~20 MiB) once reached.
const WAL_AUTOCHECKPOINT_PAGES: i64 = 5000;

/// Prepared statements cached per connection: room for every statement the
/// store issues (a few dozen, plus one KB search per number of terms), so
/// none is re-prepared in steady state.
const STATEMENT_CACHE: usize = 128;

/// One open transaction (read or write) on a SQLite connection: the
/// [`Tx`] handed to transaction closures. The store has already begun the
/// transaction on `conn`; the area modules implement the traits on it.
pub(crate) struct SqliteTx<'c> {
    conn: &'c Connection,
}

impl<'c> SqliteTx<'c> {
    pub(crate) fn new(conn: &'c Connection) -> Self {
        SqliteTx { conn }
    }
}

/// A [`Store`] on one SQLite database file (plus its `-wal` and `-shm`
/// companions). Cheap to share: wrap it in an `Arc`.
pub struct SqliteStore {
    path: PathBuf,
    writer: Writer,
    readers: Mutex<Vec<Connection>>,
    /// Reader connections opened since `open` (diagnostics, tests).
    readers_opened: AtomicU64,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// The schema version this build creates and understands.
    pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

    /// Open the database at `path`, creating the file if needed, and bring
    /// its schema up to date. A database written by a newer build (higher
    /// schema version) is refused rather than misread.
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        let mut writer = connect(path, false)?;
        migrate(&mut writer, path)?;
        Ok(SqliteStore {
            path: path.to_owned(),
            writer: Writer::new(writer),
            readers: Mutex::new(Vec::new()),
            readers_opened: AtomicU64::new(0),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `EXPLAIN QUERY PLAN` of the queries that run most often and must stay
    /// index-driven (has_work, handlers_with_work, due_messages, inbox), as
    /// `(name, plan)`: for diagnostics and for tests that guard against a
    /// schema change silently turning an index probe into a table scan.
    pub fn query_plans(&self) -> Result<Vec<(&'static str, String)>, StoreError> {
        let queries = [
            ("has_work", handlers::HAS_WORK),
            ("handlers_with_work", handlers::HANDLERS_WITH_WORK),
            ("due_messages", mail::DUE_MESSAGES),
            ("inbox", mail::INBOX),
        ];
        let conn = self.take_reader()?;
        let mut plans = Vec::new();
        for (name, sql) in queries {
            let op = || format!("explain the {name} query");
            let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).ctx(op)?;
            // Plans do not depend on the values; bind NULL for each parameter.
            let nulls = std::iter::repeat_n(Value::Null, stmt.parameter_count());
            let lines: Vec<String> = stmt
                .query_map(params_from_iter(nulls), |r| r.get::<_, String>(3))
                .ctx(op)?
                .collect::<Result<_, _>>()
                .ctx(op)?;
            plans.push((name, lines.join("\n")));
        }
        self.put_reader(conn);
        Ok(plans)
    }

    /// Fault injection: while `fail` is set, SQLite turns every COMMIT of
    /// the writer into a rollback (a commit hook), after the transaction's
    /// statements all ran, so the caller sees a failed commit.
    #[cfg(feature = "fault-injection")]
    pub fn fail_commits_while(
        &self,
        fail: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) -> Result<(), StoreError> {
        let st = self.writer.lock(&self.path)?;
        st.conn
            .commit_hook(Some(move || fail.load(Ordering::SeqCst)));
        Ok(())
    }

    /// Fault injection: cap the database at its current number of pages
    /// (`full`) or lift the cap, so that a write needing a new page fails
    /// with SQLite's own "database or disk is full", as on a full disk.
    #[cfg(feature = "fault-injection")]
    pub fn set_full(&self, full: bool) -> Result<(), StoreError> {
        let st = self.writer.lock(&self.path)?;
        let conn = &st.conn;
        let op = || self.op("set max_page_count");
        let pages: i64 = if full {
            conn.pragma_query_value(None, "page_count", |r| r.get(0))
                .ctx(op)?
        } else {
            // SQLite's default maximum.
            4_294_967_294
        };
        conn.pragma_update(None, "max_page_count", pages).ctx(op)?;
        Ok(())
    }

    fn op(&self, what: &str) -> String {
        format!("{what} on database {}", self.path.display())
    }

    /// Writers waiting for the writer connection right now (those that
    /// will join the next batch): for diagnostics and for tests that need
    /// a batch of more than one write.
    pub fn queued_writers(&self) -> usize {
        self.writer.queued()
    }

    fn take_reader(&self) -> Result<Connection, StoreError> {
        let idle = self
            .readers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        match idle {
            Some(conn) => Ok(conn),
            None => {
                self.readers_opened.fetch_add(1, Ordering::Relaxed);
                connect(&self.path, true)
            }
        }
    }

    /// How many reader connections were opened since [`SqliteStore::open`]:
    /// it stays put once the pool covers the reads that run at once.
    pub fn readers_opened(&self) -> u64 {
        self.readers_opened.load(Ordering::Relaxed)
    }

    /// Return a reader to the pool if it is clean (no open transaction) and
    /// the pool is not full; otherwise close it.
    fn put_reader(&self, conn: Connection) {
        if !conn.is_autocommit() {
            return;
        }
        let mut idle = self.readers.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < MAX_IDLE_READERS {
            idle.push(conn);
        }
    }
}

impl Store for SqliteStore {
    fn read_dyn(
        &self,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let conn = self.take_reader()?;
        // BEGIN and ROLLBACK as cached statements: rusqlite's `Transaction`
        // parses them afresh at every read. A closure
        // that panics drops the connection, and its transaction with it.
        group::exec(&conn, "BEGIN").ctx(|| self.op("begin a read transaction"))?;
        let result = f(&mut SqliteTx::new(&conn));
        // A read transaction has nothing to keep; ending it releases the
        // snapshot. Should that fail, put_reader drops the connection.
        let _ = group::exec(&conn, "ROLLBACK");
        self.put_reader(conn);
        result
    }

    fn write_dyn(
        &self,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.writer.write(&self.path, f, false)
    }

    /// `synchronous = NORMAL` for this write's batch: in WAL mode the
    /// commit is appended to the WAL without an fsync, which the next FULL
    /// commit's fsync covers (the WAL is one file, written in order). A
    /// lazy write never shares a batch with a durable one (`group.rs`).
    fn write_lazy_dyn(
        &self,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.writer.write(&self.path, f, true)
    }
}

/// Open and configure one connection. Readers do not create the file (it
/// was created by `open`) and refuse to write.
fn connect(path: &Path, reader: bool) -> Result<Connection, StoreError> {
    let op = || format!("open database {}", path.display());
    let flags = if reader {
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
    };
    let conn = Connection::open_with_flags(path, flags).ctx(op)?;
    conn.busy_timeout(BUSY_TIMEOUT).ctx(op)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    // Statement journals (every savepoint of a group commit has one),
    // sorts and transient tables in memory: as files, each was created and
    // unlinked in the system's temporary directory, an inode allocated and
    // freed per statement that spilled (on ext4 without a
    // journal, freed inodes make every later file creation slower). Our
    // statements are bounded (pages of at most a few thousand rows).
    conn.pragma_update(None, "temp_store", "MEMORY").ctx(op)?;
    // One plan per statement whatever its bound values: without this, a
    // bound `LIMIT ?` (most of our pages) expired the cached statement at
    // every binding and each run parsed and planned it again.
    // No query of ours relies on a bound value to pick its plan:
    // partial indexes are matched by constants, there is no ANALYZE.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
        .ctx(op)?;
    if reader {
        conn.pragma_update(None, "query_only", true).ctx(op)?;
        return Ok(conn);
    }
    // WAL is a property of the file; setting it on the writer is enough.
    let mode: String = conn
        .pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0))
        .ctx(op)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(StoreError::backend(
            op(),
            format!("the database refused WAL mode (journal mode is {mode})"),
        ));
    }
    conn.pragma_update(None, "synchronous", "FULL").ctx(op)?;
    conn.pragma_update(None, "foreign_keys", true).ctx(op)?;
    conn.pragma_update(None, "wal_autocheckpoint", WAL_AUTOCHECKPOINT_PAGES)
        .ctx(op)?;
    Ok(conn)
}

/// Apply the migrations the database has not seen yet, each in its own
/// transaction together with its `user_version` bump. The version is read
/// inside the write lock, so two processes opening a fresh database at once
/// cannot both apply the same migration.
fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    let open_op = || format!("open database {}", path.display());
    loop {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .ctx(open_op)?;
        let version: i64 = tx
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .ctx(open_op)?;
        if version > SqliteStore::SCHEMA_VERSION {
            return Err(StoreError::backend(
                open_op(),
                format!(
                    "schema version {version} is newer than this build supports ({})",
                    SqliteStore::SCHEMA_VERSION
                ),
            ));
        }
        let Some(sql) = usize::try_from(version)
            .ok()
            .and_then(|v| MIGRATIONS.get(v))
        else {
            // Up to date (or a negative version nothing here could write).
            if version < 0 {
                return Err(StoreError::corrupt("schema version", version.to_string()));
            }
            return tx.commit().ctx(open_op);
        };
        let next = version + 1;
        let op = || {
            format!(
                "migrate database {} to schema version {next}",
                path.display()
            )
        };
        tx.execute_batch(sql).ctx(op)?;
        tx.pragma_update(None, "user_version", next).ctx(op)?;
        tx.commit().ctx(op)?;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The writer's `synchronous` (1 NORMAL, 2 FULL).
    fn sync(store: &SqliteStore) -> i64 {
        store
            .writer
            .lock(&store.path)
            .unwrap()
            .conn
            .pragma_query_value(None, "synchronous", |r| r.get(0))
            .unwrap()
    }

    /// Issue 15 item 4: SQLite 3.50 marks a bound `LIMIT ?` as a value the
    /// plan may depend on, so every new binding expired the cached
    /// statement and the next step parsed and planned it again (a profile
    /// of the many-agents bench found ~3% of the daemon's CPU there). With
    /// the query planner stability guarantee a statement keeps its plan.
    #[test]
    fn issue_15_a_cached_statement_with_a_bound_limit_is_not_prepared_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agency.db");
        drop(SqliteStore::open(&path).unwrap());
        for reader in [false, true] {
            let conn = connect(&path, reader).unwrap();
            for n in 1..=5_i64 {
                let mut st = conn
                    .prepare_cached("SELECT id FROM handlers ORDER BY id LIMIT ?1")
                    .unwrap();
                let rows: Vec<String> = st
                    .query_map([n], |r| r.get(0))
                    .unwrap()
                    .collect::<Result<_, _>>()
                    .unwrap();
                assert!(rows.is_empty());
                let again = st.get_status(rusqlite::StatementStatus::RePrepare);
                assert_eq!(again, 0, "reader {reader}: prepared again at run {n}");
            }
        }
    }

    #[test]
    fn issue_15_a_lazy_write_is_lax_alone_and_the_next_write_is_full() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("agency.db")).unwrap();
        assert_eq!(sync(&store), 2);
        let nobody = agency_core::HandlerId(uuid::Uuid::nil());
        crate::write_lazy(&store, |tx| tx.has_work(nobody)).unwrap();
        assert_eq!(sync(&store), 1);
        crate::write(&store, |tx| tx.has_work(nobody)).unwrap();
        assert_eq!(sync(&store), 2);
    }
}
