//! Group commit: concurrent write closures of one store share one
//! PostgreSQL transaction, and so one WAL flush and one turn of the
//! writers' lock, instead of paying one each.
//!
//! The store has one writer connection. Every writer still runs its own
//! closure, on its own thread, under the writer's mutex, inside a
//! `SAVEPOINT` of the batch's transaction (`BEGIN READ COMMITTED`, the
//! writers' advisory lock taken once per batch): a closure that fails or
//! panics rolls back to its savepoint and leaves the work of the others in
//! the batch alone (on PostgreSQL a failed statement aborts the whole
//! transaction unless it is rolled back to a savepoint). When a writer is
//! done and no other writer is queued for the connection (or the batch is
//! full), it commits the batch; otherwise it leaves the transaction open
//! for the next writer in line, which decides the same way. A writer
//! announces itself (`queued`) before it waits for the mutex and only
//! withdraws once it holds it, so a batch left open always has a writer
//! coming that will commit it.
//!
//! Every writer of a batch, even one whose closure failed, waits for the
//! batch's end before returning: a write is acknowledged only once it is
//! durable, and a refusal never rests on rows that might still be rolled
//! back. A failed COMMIT, or a connection lost mid-batch, fails every write
//! of the batch; the broken connection is dropped and the next batch opens
//! a fresh one. A lone writer (no one queued) commits at once.
//!
//! Durability: a batch opened by a lazy write begins with
//! `SET LOCAL synchronous_commit = off`; the first durable writer to join
//! it turns the setting back to the server's default, outside any
//! savepoint, so the batch commits lazily only when every closure in it
//! was lazy. A closure's own `SET LOCAL` (the lease claim turns the flush
//! back on) survives the release of its savepoint and is undone with its
//! rollback, as its rows are.

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use agency_store::{Cause, StoreError, Tx};

use crate::conn::Conn;
use crate::convert::PgError;
use crate::{PgTx, Shared, WRITE_LOCK};

/// The most closures one transaction keeps: bounds the wait of the first
/// writer of a batch when writers keep arriving, and stays within the
/// subtransactions a backend tracks without overflowing
/// (`PGPROC_MAX_CACHED_SUBXIDS`, 64), past which every other session's
/// snapshot checks get slower while the batch is open.
pub(crate) const MAX_BATCH: usize = 32;

/// The writer connection and the batch open on it.
pub(crate) struct Writer {
    state: Mutex<State>,
    /// Writers waiting for (or about to wait for) `state`.
    queued: AtomicUsize,
}

/// What the mutex guards.
struct State {
    /// The writer connection; `None` before the first write and after it
    /// broke.
    conn: Option<Conn>,
    /// The batch whose transaction is open on `conn`, if any.
    batch: Option<Arc<Batch>>,
    /// Closures whose work is kept in the open batch.
    members: usize,
    /// Whether the last closure's savepoint is still to be released (kept
    /// work; the release rides with the next statement sent).
    release: bool,
    /// Whether the open batch began lazily and no durable writer joined it
    /// since.
    lazy: bool,
}

/// The end of one batch, awaited by its writers.
#[derive(Default)]
struct Batch {
    /// `None` while open; then `Ok` (committed) or the failure as
    /// `(operation, cause)`, shared by each writer's error.
    outcome: Mutex<Option<Result<(), (String, Cause)>>>,
    ended: Condvar,
}

impl Batch {
    fn finish(&self, outcome: Result<(), (String, Cause)>) {
        *self.outcome.lock().unwrap_or_else(PoisonError::into_inner) = Some(outcome);
        self.ended.notify_all();
    }

    fn wait(&self) -> Result<(), StoreError> {
        let mut outcome = self.outcome.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            match &*outcome {
                Some(Ok(())) => return Ok(()),
                Some(Err((op, cause))) => {
                    return Err(StoreError::Backend {
                        op: op.clone(),
                        cause: cause.clone(),
                    });
                }
                None => {
                    outcome = self
                        .ended
                        .wait(outcome)
                        .unwrap_or_else(PoisonError::into_inner);
                }
            }
        }
    }
}

/// How one writer's closure ended.
enum Member {
    /// Its changes are in the batch, to be committed with it.
    Kept,
    Failed(StoreError),
    Panicked(Box<dyn Any + Send>),
}

/// A batch's failure told in words.
fn said(why: &str) -> Cause {
    Arc::from(Box::<dyn std::error::Error + Send + Sync>::from(why))
}

/// A client error as a batch's cause, with the server's message.
fn cause(e: tokio_postgres::Error) -> Cause {
    Arc::new(PgError(e))
}

/// A client error's words for a batch's failure: the server's message,
/// and whether the connection is gone.
fn describe(e: &tokio_postgres::Error, conn: &Conn) -> String {
    let words = match e.as_db_error() {
        Some(db) => format!("{}: {}", db.severity(), db.message()),
        None => e.to_string(),
    };
    if conn.is_closed() {
        format!("the connection to the server was lost ({words})")
    } else {
        words
    }
}

impl Writer {
    pub(crate) fn new() -> Writer {
        Writer {
            state: Mutex::new(State {
                conn: None,
                batch: None,
                members: 0,
                release: false,
                lazy: false,
            }),
            queued: AtomicUsize::new(0),
        }
    }

    /// Run `f` as one write of a batch and return once that batch ended:
    /// `Ok` only if `f` returned `Ok` and the batch committed. A `lazy`
    /// write may be committed without waiting for the disk
    /// (`Store::write_lazy_dyn`), and is only when every write of its
    /// batch is lazy.
    pub(crate) fn write(
        &self,
        shared: &Shared,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
        lazy: bool,
    ) -> Result<(), StoreError> {
        self.queued.fetch_add(1, Ordering::SeqCst);
        let locked = self.state.lock();
        self.queued.fetch_sub(1, Ordering::SeqCst);
        let mut st = locked.unwrap_or_else(|poisoned| {
            // Closures run under catch_unwind, so only a panic in this
            // module (or in the client) gets here: the open batch, if any,
            // cannot be trusted and fails, and so does its connection.
            self.state.clear_poison();
            let mut st = poisoned.into_inner();
            st.abort_batch(shared, "a writer panicked while holding the connection");
            st.conn = None;
            st
        });
        let member = st.run(shared, f, lazy);
        let batch = st.batch.clone();
        if batch.is_some() && (st.members >= MAX_BATCH || self.queued.load(Ordering::SeqCst) == 0) {
            st.end_batch(shared);
        }
        drop(st);
        let ended = batch.map_or(Ok(()), |b| b.wait());
        match member {
            Member::Kept => ended,
            Member::Failed(e) => Err(e),
            Member::Panicked(payload) => panic::resume_unwind(payload),
        }
    }
}

impl State {
    /// Run one closure in its own savepoint of the open batch (opening one
    /// if none is).
    fn run(
        &mut self,
        shared: &Shared,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
        lazy: bool,
    ) -> Member {
        if let Err(e) = self.enter(shared, lazy) {
            return Member::Failed(e);
        }
        let Some(conn) = self.conn.as_mut() else {
            return Member::Failed(StoreError::backend(
                shared.op("begin a write transaction"),
                "no writer connection",
            ));
        };
        let result = panic::catch_unwind(AssertUnwindSafe(|| f(&mut PgTx { conn })));
        let member = match result {
            Ok(Ok(())) => {
                // Released with the next statement sent: the next
                // closure's savepoint or the commit.
                self.release = true;
                self.members += 1;
                return Member::Kept;
            }
            Ok(Err(e)) => Member::Failed(e),
            Err(payload) => Member::Panicked(payload),
        };
        // ROLLBACK TO keeps the savepoint open; close it.
        if let Err(e) = conn.batch("ROLLBACK TO member; RELEASE member") {
            // The batch's state is unknown: fail all of it.
            let why = describe(&e, conn);
            self.abort_batch(shared, &why);
        }
        member
    }

    /// Make the savepoint of the next closure: open a batch if none is,
    /// on the writer connection (a fresh one if there is none or it
    /// broke), else release the last closure's savepoint.
    fn enter(&mut self, shared: &Shared, lazy: bool) -> Result<(), StoreError> {
        let op = || shared.op("begin a write transaction");
        if self.batch.is_none() {
            let mut conn = match self.conn.take().map(|mut c| {
                c.refresh();
                c
            }) {
                Some(c) if !c.is_closed() => c,
                _ => shared.take()?,
            };
            // Take the writers' lock first, so the batch sees every write
            // committed before it (READ COMMITTED takes its snapshot per
            // statement, after the lock is held).
            let sync = if lazy {
                "SET LOCAL synchronous_commit = off; "
            } else {
                ""
            };
            let begin = format!(
                "BEGIN ISOLATION LEVEL READ COMMITTED; {sync}\
                 SELECT pg_advisory_xact_lock({WRITE_LOCK}); SAVEPOINT member"
            );
            if let Err(e) = conn.batch(&begin) {
                // End whatever began; a connection that cannot is dropped.
                if !conn.is_closed() && conn.batch("ROLLBACK").is_ok() {
                    self.conn = Some(conn);
                }
                return Err(StoreError::Backend {
                    op: op(),
                    cause: cause(e),
                });
            }
            self.conn = Some(conn);
            self.batch = Some(Arc::default());
            self.members = 0;
            self.release = false;
            self.lazy = lazy;
            return Ok(());
        }
        let release = if self.release { "RELEASE member; " } else { "" };
        let durable = if self.lazy && !lazy {
            "SET LOCAL synchronous_commit TO DEFAULT; "
        } else {
            ""
        };
        let sql = format!("{release}{durable}SAVEPOINT member");
        let Some(conn) = self.conn.as_mut() else {
            self.abort_batch(shared, "its connection is gone");
            return Err(StoreError::backend(op(), "the writer connection is gone"));
        };
        match conn.batch(&sql) {
            Ok(()) => {
                self.release = false;
                if !lazy {
                    self.lazy = false;
                }
                Ok(())
            }
            Err(e) => {
                let why = describe(&e, conn);
                self.abort_batch(shared, &why);
                Err(StoreError::Backend {
                    op: op(),
                    cause: cause(e),
                })
            }
        }
    }

    /// Commit the open batch (roll it back if nothing was kept) and tell
    /// its writers.
    fn end_batch(&mut self, shared: &Shared) {
        let Some(batch) = self.batch.take() else {
            return;
        };
        let members = std::mem::take(&mut self.members);
        let release = std::mem::take(&mut self.release);
        let Some(conn) = self.conn.as_mut() else {
            batch.finish(Err((
                shared.op("commit a write transaction"),
                said("the writer connection is gone"),
            )));
            return;
        };
        if members == 0 {
            // Nothing to keep; a connection that cannot roll back is not
            // reused.
            if conn.batch("ROLLBACK").is_err() {
                self.conn = None;
            }
            batch.finish(Ok(()));
            return;
        }
        // The last savepoint is released first: should a closure have
        // swallowed a statement's error, the transaction is aborted, the
        // release fails, and the batch fails with it (a COMMIT of an
        // aborted transaction rolls back without an error).
        let sql = if release {
            "RELEASE member; COMMIT"
        } else {
            "COMMIT"
        };
        let outcome = match conn.batch(sql) {
            Ok(()) => Ok(()),
            Err(e) => {
                // The transaction may still be open (the release failed);
                // ROLLBACK outside one only warns.
                if conn.is_closed() || conn.batch("ROLLBACK").is_err() {
                    self.conn = None;
                }
                Err((shared.op("commit a write transaction"), cause(e)))
            }
        };
        batch.finish(outcome);
    }

    /// Roll back the open batch and fail every write in it; a connection
    /// that cannot roll back is dropped, so the next batch takes a fresh
    /// one.
    fn abort_batch(&mut self, shared: &Shared, why: &str) {
        let Some(batch) = self.batch.take() else {
            return;
        };
        self.members = 0;
        self.release = false;
        let rolled_back = self
            .conn
            .as_mut()
            .is_some_and(|c| !c.is_closed() && c.batch("ROLLBACK").is_ok());
        if !rolled_back {
            self.conn = None;
        }
        let why = said(&format!("the batch it was part of failed: {why}"));
        batch.finish(Err((shared.op("commit a write transaction"), why)));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::PgStore;
    use crate::scratch::{ScratchDb, admin_url};

    fn setting(st: &mut State) -> String {
        let conn = st.conn.as_mut().unwrap();
        let row = conn.query_opt("SHOW synchronous_commit", &[]).unwrap();
        row.unwrap().get(0)
    }

    fn member(st: &mut State, shared: &Shared, lazy: bool) {
        let kept = st.run(shared, &mut |_| Ok(()), lazy);
        assert!(matches!(kept, Member::Kept));
    }

    #[test]
    fn a_batch_commits_lazily_only_when_every_write_in_it_is_lazy() {
        let admin = admin_url().expect("AGENCY_TEST_POSTGRES=off: no server for this test");
        let db = ScratchDb::create(&admin).unwrap();
        let store = PgStore::open(db.url()).unwrap();
        let shared = &*store.shared;
        let mut st = store.writer.state.lock().unwrap();

        member(&mut st, shared, true);
        member(&mut st, shared, true);
        assert_eq!(setting(&mut st), "off", "all lazy so far");
        member(&mut st, shared, false);
        assert_eq!(setting(&mut st), "on", "a durable write joined");
        member(&mut st, shared, true);
        assert_eq!(setting(&mut st), "on", "and it stays durable");
        st.end_batch(shared);

        member(&mut st, shared, false);
        assert_eq!(setting(&mut st), "on", "a durable batch");
        member(&mut st, shared, true);
        assert_eq!(setting(&mut st), "on", "a lazy write joining it");
        st.end_batch(shared);

        member(&mut st, shared, true);
        assert_eq!(setting(&mut st), "off", "a new batch, lazy");
        st.end_batch(shared);
    }
}
