//! Shared directory fsyncs for blob puts: a put's rename is durable only
//! once its directory is fsynced, and puts that rename into the same
//! directory in the same window share one fsync instead of each paying its
//! own.
//!
//! Per directory: a put registers after its rename; the first put to find
//! no fsync of that directory running starts one, taking every registration
//! so far, and hands each of them the result. Puts that register while an
//! fsync runs wait for it to end and then take the next one, which starts
//! after their rename and so covers it; a put returns only after such an
//! fsync succeeded. Different directories never wait for each other: their
//! fsyncs run side by side, as they would without grouping (measured: one
//! thread syncing many directories in turn is slower than the threads
//! syncing them at once, each fsync then waiting for its own journal
//! commit).

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, ErrorKind};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, PoisonError};

/// The registrations and results of the fsyncs, by directory.
#[derive(Debug, Default)]
pub(crate) struct DirSyncs {
    state: Mutex<State>,
    ended: Condvar,
}

#[derive(Debug, Default)]
struct State {
    next: u64,
    dirs: HashMap<PathBuf, Dir>,
    /// Results of ended fsyncs not yet collected, by ticket.
    done: HashMap<u64, Result<(), Failure>>,
}

/// One directory with puts waiting for its fsync.
#[derive(Debug, Default)]
struct Dir {
    /// Tickets not yet taken by an fsync.
    pending: Vec<u64>,
    running: bool,
}

/// A failed fsync, kept so that every put it covered gets the same error.
#[derive(Debug, Clone)]
enum Failure {
    Os(i32),
    Other(ErrorKind, String),
}

impl Failure {
    fn of(e: &io::Error) -> Failure {
        match e.raw_os_error() {
            Some(code) => Failure::Os(code),
            None => Failure::Other(e.kind(), e.to_string()),
        }
    }

    fn error(&self) -> io::Error {
        match self {
            Failure::Os(code) => io::Error::from_raw_os_error(*code),
            Failure::Other(kind, message) => io::Error::new(*kind, message.clone()),
        }
    }
}

impl DirSyncs {
    /// Return once `dir` was fsynced after this call began.
    pub(crate) fn sync(&self, dir: &Path) -> io::Result<()> {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let ticket = st.next;
        st.next += 1;
        st.dirs
            .entry(dir.to_owned())
            .or_default()
            .pending
            .push(ticket);
        loop {
            if let Some(result) = st.done.remove(&ticket) {
                return result.map_err(|f| f.error());
            }
            let d = st.dirs.entry(dir.to_owned()).or_default();
            if d.running {
                st = self.ended.wait(st).unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            d.running = true;
            let taken = std::mem::take(&mut d.pending);
            drop(st);
            let result = File::open(dir)
                .and_then(|f| f.sync_all())
                .map_err(|e| Failure::of(&e));
            st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            for t in taken {
                st.done.insert(t, result.clone());
            }
            let d = st.dirs.entry(dir.to_owned()).or_default();
            d.running = false;
            if d.pending.is_empty() {
                st.dirs.remove(dir);
            }
            self.ended.notify_all();
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn concurrent_syncs_all_return_and_a_missing_directory_fails_only_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let syncs = std::sync::Arc::new(DirSyncs::default());
        let handles: Vec<_> = (0..16)
            .map(|i| {
                let syncs = syncs.clone();
                let d = dir.path().join(format!("d{}", i % 4));
                std::fs::create_dir_all(&d).unwrap();
                std::thread::spawn(move || {
                    for _ in 0..20 {
                        syncs.sync(&d).unwrap();
                    }
                })
            })
            .collect();
        let missing = syncs.sync(&dir.path().join("missing")).unwrap_err();
        assert_eq!(missing.kind(), ErrorKind::NotFound);
        for h in handles {
            h.join().unwrap();
        }
        let st = syncs.state.lock().unwrap();
        assert!(st.done.is_empty() && st.dirs.is_empty());
    }
}
