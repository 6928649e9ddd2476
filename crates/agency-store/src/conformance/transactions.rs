//! Transactions: a closure's error or panic rolls back only its own changes, and concurrent writers are serialised.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use agency_core::access::FileKind;

use super::New;
use super::fixtures::*;
use crate::tx::R;
use crate::*;

#[derive(Debug)]
enum AppError {
    Store(StoreError),
    Refused,
}

impl From<StoreError> for AppError {
    fn from(e: StoreError) -> Self {
        AppError::Store(e)
    }
}

pub fn closure_error_rolls_back_and_is_returned_unchanged(new: &New) {
    let (_d, store) = new();
    let f = fid(DOC + 1);
    let mut calls = 0;
    let res: Result<(), AppError> = write(&store, |tx| {
        calls += 1;
        tx.insert_file(&file(f, FileKind::Document, "doomed", None))?;
        Err(AppError::Refused)
    });
    assert!(matches!(res, Err(AppError::Refused)), "{res:?}");
    assert_eq!(calls, 1, "the closure runs exactly once");
    assert_eq!(rd(&store, |tx| tx.file(f)), None, "nothing persisted");
    let res: Result<(), AppError> = write(&store, |tx| Ok(tx.set_file_description(f, "x")?));
    assert!(
        matches!(res, Err(AppError::Store(StoreError::Backend { .. }))),
        "{res:?}"
    );
}

pub fn panicking_closures_leave_the_store_usable(new: &New) {
    let (_d, store) = new();
    let f = fid(DOC + 1);
    let res = catch_unwind(AssertUnwindSafe(|| {
        write(&store, |tx| -> R<()> {
            tx.insert_file(&file(f, FileKind::Document, "half done", None))?;
            panic!("closure panicked mid-transaction");
        })
    }));
    assert!(res.is_err());
    let res = catch_unwind(AssertUnwindSafe(|| {
        read(&store, |_| -> R<()> { panic!("reader panicked") })
    }));
    assert!(res.is_err());
    assert_eq!(
        rd(&store, |tx| tx.file(f)),
        None,
        "the panicked write was rolled back"
    );
    wr(&store, |tx| {
        tx.insert_file(&file(f, FileKind::Document, "second try", None))
    });
    assert_eq!(
        rd(&store, |tx| tx.file(f)).unwrap().description,
        "second try"
    );
}

pub fn concurrent_writers_are_serialized_and_readers_see_snapshots(new: &New) {
    let (_d, store) = new();
    let store = Arc::new(store);
    let threads: Vec<_> = (0..8u128)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                for i in 0..50u128 {
                    let f = file(fid(DOC + t * 1000 + i), FileKind::Document, "x", None);
                    wr(&store, |tx| tx.insert_file(&f));
                    // Within one read the snapshot does not move, whatever
                    // the other threads commit meanwhile.
                    let (a, b) = rd(&store, |tx| Ok((tx.counts()?.files, tx.counts()?.files)));
                    assert_eq!(a, b);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(rd(&store, |tx| tx.counts()).files, 400);
}

/// The service checks then acts inside one write (a quota, a cap, a
/// budget): that is safe only if writers are serialised. Eight threads
/// each add one to a counter 25 times by reading and writing it back;
/// no increment may be lost.
pub fn concurrent_read_modify_writes_lose_no_update(new: &New) {
    let (_d, store) = new();
    let h = wr(&store, |tx| add_handler(tx, 1, None));
    let store = &*store;
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..25 {
                    wr(store, |tx| {
                        let n = tx.handler_hops(h)?;
                        tx.set_handler_hops(h, n + 1)
                    });
                }
            });
        }
    });
    assert_eq!(rd(store, |tx| tx.handler_hops(h)), 200);
}
