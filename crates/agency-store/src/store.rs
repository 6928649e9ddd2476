//! The [`Store`] trait: run a closure as one transaction.

use std::fmt::Debug;

use crate::error::StoreError;
use crate::tx::Tx;

/// A transactional backend. Object safe, so the service can hold an
/// `Arc<dyn Store>`; use the generic [`read`] and [`write()`] helpers.
///
/// The contract, which the conformance suite (`conformance` feature)
/// checks and the service relies on:
/// - **Once.** `write_dyn` runs the closure exactly once inside a
///   transaction that commits durably (the data survives the process being
///   killed) when the closure returns `Ok`, and rolls back when it returns
///   `Err` or panics. A backend never runs a closure again, not to retry a
///   busy database or a serialisation failure: it waits for the lock
///   instead (SQLite: one writer connection, then `busy_timeout`). The
///   service's closures are not idempotent: they read, decide and write
///   (take a quota slot, reserve budget), and [`write()`] refuses a second
///   run. Effects outside the store wait for the commit (the service
///   publishes its events after it); the only ones inside a closure are
///   content-addressed blob writes, which a rollback merely orphans for
///   the blob garbage collector.
/// - **Serialised writers.** Two write closures never interleave: each
///   sees every write committed before it, and a check made in a closure
///   still holds when it acts (pending-message caps, quotas, budget
///   reservations, "one live agent per handler" depend on this). A backend
///   may commit the closures of concurrent writers together (group commit)
///   as long as each closure's changes stay all-or-nothing, a failing
///   closure undoes only its own changes, and `write_dyn` returns only once
///   the commit holding its closure is durable (or failed).
/// - **Snapshots.** `read_dyn` runs the closure once on a consistent
///   snapshot, unmoved by writes committed meanwhile; the closure must not
///   write. Reads may run alongside each other and alongside a write.
/// - **Order.** Every list is in the order its [`Tx`] method documents,
///   ties broken by id or by insertion order as it says; never the
///   backend's whim. A commit's effects are visible to every transaction
///   that begins after `write_dyn` returns.
pub trait Store: Send + Sync + Debug {
    fn read_dyn(
        &self,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;
    fn write_dyn(
        &self,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;
    /// As `write_dyn`, but the commit may return before it is on disk: it
    /// is visible at once and survives the process being killed (the
    /// operating system holds it), not a power loss or an OS crash until
    /// the next durable commit, which carries it to disk with its own. For
    /// a write on a latency-critical path whose loss in a power cut costs
    /// nothing: an agent spawn's preparation and its process record (the
    /// agent's process dies in the same power cut, and the next durable
    /// write, e.g. the agent's own first, makes them durable too).
    /// Serialized with every other write. The default is `write_dyn`.
    fn write_lazy_dyn(
        &self,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.write_dyn(f)
    }
}

/// A boxed store is a store (the conformance suite's factories hand out
/// `Box<dyn Store>`), and so is a shared one.
impl<S: Store + ?Sized> Store for Box<S> {
    fn read_dyn(
        &self,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        (**self).read_dyn(f)
    }
    fn write_dyn(
        &self,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        (**self).write_dyn(f)
    }
    fn write_lazy_dyn(
        &self,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        (**self).write_lazy_dyn(f)
    }
}

impl<S: Store + ?Sized> Store for std::sync::Arc<S> {
    fn read_dyn(
        &self,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        (**self).read_dyn(f)
    }
    fn write_dyn(
        &self,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        (**self).write_dyn(f)
    }
    fn write_lazy_dyn(
        &self,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        (**self).write_lazy_dyn(f)
    }
}

/// How a transaction runs.
#[derive(Clone, Copy)]
enum Mode {
    Read,
    Write,
    WriteLazy,
}

/// Run `f` in one write transaction. An `Err` from `f` rolls back and is
/// returned unchanged; a commit failure comes back as `E::from(StoreError)`.
pub fn write<R, E: From<StoreError>>(
    store: &dyn Store,
    f: impl FnOnce(&mut dyn Tx) -> Result<R, E>,
) -> Result<R, E> {
    run(store, Mode::Write, f)
}

/// Run `f` in one write transaction whose commit need not be on disk
/// when this returns (see [`Store::write_lazy_dyn`]).
pub fn write_lazy<R, E: From<StoreError>>(
    store: &dyn Store,
    f: impl FnOnce(&mut dyn Tx) -> Result<R, E>,
) -> Result<R, E> {
    run(store, Mode::WriteLazy, f)
}

/// Run `f` on a consistent read snapshot.
pub fn read<R, E: From<StoreError>>(
    store: &dyn Store,
    f: impl FnOnce(&mut dyn Tx) -> Result<R, E>,
) -> Result<R, E> {
    run(store, Mode::Read, f)
}

fn run<R, E: From<StoreError>>(
    store: &dyn Store,
    mode: Mode,
    f: impl FnOnce(&mut dyn Tx) -> Result<R, E>,
) -> Result<R, E> {
    let mut f = Some(f);
    let mut out: Option<Result<R, E>> = None;
    let mut body = |tx: &mut dyn Tx| -> Result<(), StoreError> {
        let Some(f) = f.take() else {
            // A backend must not run a closure twice; refuse rather than
            // repeat side effects.
            return Err(StoreError::backend(
                "run transaction",
                "the backend ran the closure twice",
            ));
        };
        match f(tx) {
            Ok(r) => {
                out = Some(Ok(r));
                Ok(())
            }
            Err(e) => {
                out = Some(Err(e));
                Err(StoreError::Rollback)
            }
        }
    };
    let res = match mode {
        Mode::Read => store.read_dyn(&mut body),
        Mode::Write => store.write_dyn(&mut body),
        Mode::WriteLazy => store.write_lazy_dyn(&mut body),
    };
    match (res, out) {
        (_, Some(Err(e))) => Err(e),
        (Err(se), _) => Err(E::from(se)),
        (Ok(()), Some(Ok(r))) => Ok(r),
        (Ok(()), None) => Err(E::from(StoreError::backend(
            "run transaction",
            "the backend did not run the closure",
        ))),
    }
}
