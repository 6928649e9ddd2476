//! Group commit: concurrent write closures share one SQLite transaction, and
//! so one WAL fsync, instead of paying one fsync each.
//!
//! Every writer still runs its own closure, on its own thread, under the
//! writer connection's mutex, inside a `SAVEPOINT` of the batch's
//! `BEGIN IMMEDIATE` transaction: a closure that fails or panics rolls back
//! to its savepoint and leaves the work of the others in the batch alone.
//! When a writer is done and no other writer is queued for the connection
//! (or the batch is full), it commits the batch; otherwise it leaves the
//! transaction open for the next writer in line, which decides the same way.
//! A writer announces itself (`queued`) before it waits for the mutex and
//! only withdraws once it holds it, so a batch left open always has a writer
//! coming that will commit it.
//!
//! Every writer of a batch, even one whose closure failed, waits for the
//! batch's end before returning: a write is acknowledged only once it is
//! durable, and a refusal never rests on rows that might still be rolled
//! back. A failed COMMIT fails every write of the batch. A lone writer (no
//! one queued) commits at once, as before group commit.

use std::any::Any;
use std::panic::{self, AssertUnwindSafe};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use rusqlite::Connection;

use super::SqliteTx;
use super::convert::{Ctx, db_error};
use crate::error::{Cause, StoreError};
use crate::tx::Tx;

/// The most closures one transaction takes: bounds the wait of the first
/// writer of a batch when writers keep arriving.
pub(super) const MAX_BATCH: usize = 64;

/// The writer connection and the batch open on it.
pub(super) struct Writer {
    state: Mutex<State>,
    /// Writers waiting for (or about to wait for) `state`.
    queued: AtomicUsize,
}

/// What the mutex guards.
pub(super) struct State {
    pub(super) conn: Connection,
    /// The batch whose transaction is open on `conn`, if any.
    batch: Option<Arc<Batch>>,
    /// Closures whose savepoint was released into the open batch.
    members: usize,
    /// Whether the open batch commits with `synchronous = NORMAL` (every
    /// write in it asked for a lazy commit).
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

/// Run `sql` (a statement without parameters or results), prepared once.
pub(super) fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(drop)
}

fn op(db: &Path, what: &str) -> String {
    format!("{what} on database {}", db.display())
}

impl Writer {
    pub(super) fn new(conn: Connection) -> Writer {
        Writer {
            state: Mutex::new(State {
                conn,
                batch: None,
                members: 0,
                lazy: false,
            }),
            queued: AtomicUsize::new(0),
        }
    }

    /// Writers currently waiting for the connection.
    pub(super) fn queued(&self) -> usize {
        self.queued.load(Ordering::SeqCst)
    }

    /// The connection, for statements outside any closure (pragmas, fault
    /// injection). A batch may be open on it: such statements run inside
    /// that transaction, and the writer coming to commit it still will.
    pub(super) fn lock(&self, db: &Path) -> Result<MutexGuard<'_, State>, StoreError> {
        let st = self.state.lock().unwrap_or_else(|poisoned| {
            // Closures run under catch_unwind, so only a panic in this
            // module (or in rusqlite) gets here: the open batch, if any,
            // cannot be trusted and fails.
            self.state.clear_poison();
            let mut st = poisoned.into_inner();
            if let Some(batch) = st.batch.take() {
                st.members = 0;
                batch.finish(Err((
                    op(db, "commit a write transaction"),
                    said("a writer panicked while holding the connection"),
                )));
            }
            st
        });
        // A transaction open without a batch was abandoned (a rollback that
        // failed); end it before the connection is used again.
        if st.batch.is_none() && !st.conn.is_autocommit() {
            exec(&st.conn, "ROLLBACK")
                .ctx(|| op(db, "roll back an abandoned write transaction"))?;
        }
        Ok(st)
    }

    /// Run `f` as one write of a batch and return once that batch ended:
    /// `Ok` only if `f` returned `Ok` and the batch committed. A `lazy`
    /// write's batch commits without waiting for the disk
    /// (`Store::write_lazy_dyn`); lazy and durable writes never share a
    /// batch, so a durable write is never committed lazily.
    pub(super) fn write(
        &self,
        db: &Path,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
        lazy: bool,
    ) -> Result<(), StoreError> {
        self.queued.fetch_add(1, Ordering::SeqCst);
        let locked = self.lock(db);
        self.queued.fetch_sub(1, Ordering::SeqCst);
        let mut st = locked?;
        if st.batch.is_some() && st.lazy != lazy {
            // The open batch's writers are all done: commit it now, in its
            // own mode, and open one of ours.
            st.end_batch(db);
        }
        let member = st.run(db, f, lazy);
        let batch = st.batch.clone();
        if batch.is_some() && (st.members >= MAX_BATCH || self.queued() == 0) {
            st.end_batch(db);
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
        db: &Path,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
        lazy: bool,
    ) -> Member {
        if self.batch.is_none() {
            // Set before every batch (a flag on the connection, no I/O; it
            // cannot change inside a transaction), so a lazy batch never
            // leaves the writer lax for the next.
            let sync = match lazy {
                true => "PRAGMA synchronous = NORMAL",
                false => "PRAGMA synchronous = FULL",
            };
            if let Err(e) = exec(&self.conn, sync) {
                return Member::Failed(db_error(op(db, "set synchronous for a write"), e));
            }
            self.lazy = lazy;
            if let Err(e) = exec(&self.conn, "BEGIN IMMEDIATE") {
                return Member::Failed(db_error(op(db, "begin a write transaction"), e));
            }
            self.batch = Some(Arc::default());
            self.members = 0;
        }
        if let Err(e) = exec(&self.conn, "SAVEPOINT member") {
            return Member::Failed(db_error(op(db, "begin a write transaction"), e));
        }
        let result = panic::catch_unwind(AssertUnwindSafe(|| f(&mut SqliteTx::new(&self.conn))));
        if self.conn.is_autocommit() {
            // SQLite ended the whole transaction itself (it may, on a full
            // disk or an I/O error): the batch's earlier writes are gone.
            self.abort_batch(db, "SQLite rolled the transaction back");
            return match result {
                Ok(Ok(())) => Member::Failed(StoreError::backend(
                    op(db, "commit a write transaction"),
                    "SQLite rolled the transaction back",
                )),
                Ok(Err(e)) => Member::Failed(e),
                Err(payload) => Member::Panicked(payload),
            };
        }
        let (end, member) = match result {
            Ok(Ok(())) => ("RELEASE member", Member::Kept),
            Ok(Err(e)) => ("ROLLBACK TO member", Member::Failed(e)),
            Err(payload) => ("ROLLBACK TO member", Member::Panicked(payload)),
        };
        let ended = exec(&self.conn, end).and_then(|()| {
            // ROLLBACK TO keeps the savepoint open; close it.
            if matches!(member, Member::Kept) {
                Ok(())
            } else {
                exec(&self.conn, "RELEASE member")
            }
        });
        match ended {
            Ok(()) => {
                if matches!(member, Member::Kept) {
                    self.members += 1;
                }
                member
            }
            Err(e) => {
                // The batch's state is unknown: fail all of it.
                let message = e.to_string();
                self.abort_batch(db, &message);
                match member {
                    Member::Kept => {
                        Member::Failed(db_error(op(db, "commit a write transaction"), e))
                    }
                    other => other,
                }
            }
        }
    }

    /// Commit the open batch (roll it back if nothing was kept) and tell
    /// its writers.
    fn end_batch(&mut self, db: &Path) {
        let Some(batch) = self.batch.take() else {
            return;
        };
        let members = std::mem::take(&mut self.members);
        if members == 0 {
            // Nothing to keep. Should the rollback fail, the next lock()
            // ends the transaction.
            let _ = exec(&self.conn, "ROLLBACK");
            batch.finish(Ok(()));
            return;
        }
        let outcome = match exec(&self.conn, "COMMIT") {
            Ok(()) => Ok(()),
            Err(e) => {
                // A deferred foreign key leaves the transaction open; a
                // commit hook's veto has already rolled it back.
                if !self.conn.is_autocommit() {
                    let _ = exec(&self.conn, "ROLLBACK");
                }
                let cause: Cause = Arc::new(e);
                Err((op(db, "commit a write transaction"), cause))
            }
        };
        batch.finish(outcome);
    }

    /// Roll back the open batch and fail every write in it.
    fn abort_batch(&mut self, db: &Path, why: &str) {
        if let Some(batch) = self.batch.take() {
            self.members = 0;
            if !self.conn.is_autocommit() {
                let _ = exec(&self.conn, "ROLLBACK");
            }
            let why = said(&format!("the batch it was part of failed: {why}"));
            batch.finish(Err((op(db, "commit a write transaction"), why)));
        }
    }
}

/// A batch's failure told in words (no error underneath).
fn said(why: &str) -> Cause {
    Arc::from(Box::<dyn std::error::Error + Send + Sync>::from(why))
}
