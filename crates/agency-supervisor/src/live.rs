//! The runs that are live now, for their followers (`agency transcript RUN
//! --follow`, `agency logs RUN --follow`): per agent, its run directory
//! (where the runtime writes `transcript.jsonl`, read with [`tail`]) and
//! its output as it is captured ([`LiveOutput`]).
//!
//! The supervisor adds a run when its process starts and holds the
//! [`LiveGuard`] until the run is recorded; dropping it marks the run
//! ended and removes it, so a follower that sees the end finds the stored
//! record already there. The registry decides nothing: who may follow is
//! the service's to say.
//!
//! [`tail`]: crate::tail

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agency_core::AgentId;
use tokio::sync::watch;

use crate::agent_log::LiveOutput;
use crate::tail::TranscriptTail;

/// Every live run the supervisor started.
#[derive(Debug)]
pub struct LiveRuns {
    runs: Mutex<HashMap<AgentId, Arc<LiveRun>>>,
    /// Bumped when a run is added or removed.
    changed: watch::Sender<u64>,
}

/// One live run, as its followers see it.
#[derive(Debug)]
pub struct LiveRun {
    pub agent: AgentId,
    run_dir: PathBuf,
    output: Option<LiveOutput>,
    ended: watch::Receiver<bool>,
}

/// Held by the supervisor while the run lives; dropped once it is
/// recorded.
#[derive(Debug)]
pub struct LiveGuard {
    runs: Arc<LiveRuns>,
    agent: AgentId,
    ended: watch::Sender<bool>,
}

impl LiveRuns {
    pub fn new() -> Arc<LiveRuns> {
        Arc::new(LiveRuns {
            runs: Mutex::new(HashMap::new()),
            changed: watch::Sender::new(0),
        })
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<AgentId, Arc<LiveRun>>> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The live run of `agent`, if the supervisor runs it now.
    pub fn get(&self, agent: AgentId) -> Option<Arc<LiveRun>> {
        self.map().get(&agent).cloned()
    }

    /// Changes each time a run is added or removed.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// A run started: followers find it until the guard is dropped.
    pub fn add(
        self: &Arc<Self>,
        agent: AgentId,
        run_dir: PathBuf,
        output: Option<LiveOutput>,
    ) -> LiveGuard {
        let (ended, rx) = watch::channel(false);
        self.map().insert(
            agent,
            Arc::new(LiveRun {
                agent,
                run_dir,
                output,
                ended: rx,
            }),
        );
        self.changed.send_modify(|n| *n += 1);
        LiveGuard {
            runs: self.clone(),
            agent,
            ended,
        }
    }
}

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.runs.map().remove(&self.agent);
        self.ended.send_replace(true);
        self.runs.changed.send_modify(|n| *n += 1);
    }
}

impl LiveRun {
    /// Its transcript, to be read as it grows.
    pub fn transcript(&self) -> TranscriptTail {
        TranscriptTail::new(&self.run_dir)
    }

    /// Its captured output (none for a run whose output is not captured).
    pub fn output(&self) -> Option<&LiveOutput> {
        self.output.as_ref()
    }

    /// Whether the run has ended and been recorded.
    pub fn has_ended(&self) -> bool {
        *self.ended.borrow()
    }

    /// Completes when the run has ended and been recorded.
    pub async fn ended(&self) {
        let mut rx = self.ended.clone();
        // An error: the guard is gone, which is the end too.
        let _ = rx.wait_for(|e| *e).await;
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_run_is_found_until_its_guard_drops_and_then_reads_as_ended() {
        let runs = LiveRuns::new();
        let agent = AgentId(uuid::Uuid::new_v4());
        let mut changes = runs.changes();
        assert!(runs.get(agent).is_none());
        let guard = runs.add(agent, PathBuf::from("/nonexistent"), None);
        assert!(changes.has_changed().unwrap());
        changes.mark_unchanged();
        let run = runs.get(agent).unwrap();
        assert!(!run.has_ended());
        let waiting = tokio::spawn({
            let run = run.clone();
            async move { run.ended().await }
        });
        drop(guard);
        waiting.await.unwrap();
        assert!(run.has_ended());
        assert!(runs.get(agent).is_none());
        assert!(changes.has_changed().unwrap());
    }
}
