//! The [`Store`] trait: run a closure as one transaction.

use std::fmt::Debug;

use crate::error::StoreError;
use crate::tx::Tx;

/// A transactional backend. Object safe, so the service can hold an
/// `Arc<dyn Store>`; use the generic [`read`] and [`write`] helpers.
///
/// Contract for implementations:
/// - `write_dyn` runs the closure exactly once inside a transaction that
///   commits durably (the data survives the process being killed) when the
///   closure returns `Ok`, and rolls back when it returns `Err` or panics.
///   Writes are serialized: two write closures never interleave. A backend
///   may commit the closures of concurrent writers together (group commit)
///   as long as each closure's changes stay all-or-nothing, a failing
///   closure undoes only its own changes, and `write_dyn` returns only once
///   the commit holding its closure is durable (or failed).
/// - `read_dyn` runs the closure once on a consistent snapshot; the
///   closure must not write.
pub trait Store: Send + Sync + Debug {
    fn read_dyn(
        &self,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;
    fn write_dyn(
        &self,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
    ) -> Result<(), StoreError>;
}

/// Run `f` in one write transaction. An `Err` from `f` rolls back and is
/// returned unchanged; a commit failure comes back as `E::from(StoreError)`.
pub fn write<R, E: From<StoreError>>(
    store: &dyn Store,
    f: impl FnOnce(&mut dyn Tx) -> Result<R, E>,
) -> Result<R, E> {
    run(store, true, f)
}

/// Run `f` on a consistent read snapshot.
pub fn read<R, E: From<StoreError>>(
    store: &dyn Store,
    f: impl FnOnce(&mut dyn Tx) -> Result<R, E>,
) -> Result<R, E> {
    run(store, false, f)
}

fn run<R, E: From<StoreError>>(
    store: &dyn Store,
    writing: bool,
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
    let res = if writing {
        store.write_dyn(&mut body)
    } else {
        store.read_dyn(&mut body)
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
