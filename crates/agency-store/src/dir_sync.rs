//! Shared directory fsyncs for blob puts: a put's rename is durable only
//! once its directory is fsynced, and puts that rename in the same window
//! share one round of syncs instead of each paying its own.
//!
//! A put registers its directory after its rename; the first put to find no
//! round running starts one, taking every registration so far, fsyncs each
//! distinct directory among them once, and hands each put the result for
//! its directory. Puts that register while a round runs wait for it and
//! then take the next round. A registration is always taken by a round that
//! starts after it, so the fsync it gets covers its rename; a put returns
//! only after that fsync succeeded.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, ErrorKind};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex, PoisonError};

/// The registrations and results of the rounds.
#[derive(Debug, Default)]
pub(crate) struct DirSyncs {
    state: Mutex<State>,
    round_ended: Condvar,
}

#[derive(Debug, Default)]
struct State {
    next: u64,
    /// Registrations not yet taken by a round: `(ticket, directory)`.
    pending: Vec<(u64, PathBuf)>,
    running: bool,
    /// Results of ended rounds not yet collected, by ticket.
    done: HashMap<u64, Result<(), Failure>>,
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
        st.pending.push((ticket, dir.to_owned()));
        loop {
            if let Some(result) = st.done.remove(&ticket) {
                return result.map_err(|f| f.error());
            }
            if st.running {
                st = self
                    .round_ended
                    .wait(st)
                    .unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            st.running = true;
            let round = std::mem::take(&mut st.pending);
            drop(st);
            let mut results: HashMap<&Path, Result<(), Failure>> = HashMap::new();
            for (_, d) in &round {
                results.entry(d.as_path()).or_insert_with(|| {
                    File::open(d)
                        .and_then(|f| f.sync_all())
                        .map_err(|e| Failure::of(&e))
                });
            }
            st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            for (t, d) in &round {
                let r = results.get(d.as_path()).cloned().unwrap_or(Ok(()));
                st.done.insert(*t, r);
            }
            st.running = false;
            self.round_ended.notify_all();
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
        assert!(syncs.state.lock().unwrap().done.is_empty());
    }
}
