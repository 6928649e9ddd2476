//! Following a run while it runs (`agency transcript RUN --follow`,
//! `agency logs RUN --follow`): who may, and what the follower of a run
//! that has ended is sent instead (the stored record). The streams are the
//! daemon's, which reads the supervisor's live runs; the permission is
//! decided here, before a stream starts.
//!
//! Following is the user's alone, for transcripts and logs alike: a live
//! transcript holds what every tool call of the run returned, and a live
//! log what it printed, before anything of it is stored.

use agency_core::{AgentId, Principal};

use crate::Result;
use crate::error::ServiceError;
use crate::service::{Service, authenticate};

/// One transcript line as an event: the JSON the runtime wrote, or
/// `{"unparsed": LINE}` for a line that is not JSON (nothing is dropped).
/// Blank lines are none.
pub fn transcript_event(line: &str) -> Option<serde_json::Value> {
    if line.trim().is_empty() {
        return None;
    }
    Some(serde_json::from_str(line).unwrap_or_else(|_| serde_json::json!({ "unparsed": line })))
}

/// Where a run a follower asks about is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunFollow {
    /// A process the supervisor started runs it.
    Live,
    /// It ended; its record is stored.
    Ended,
    /// A client attached with a minted token: no process of Agency's, so
    /// no transcript or output to follow.
    Attached,
}

impl Service {
    /// Where agent `agent`'s run is, for someone about to follow it: the
    /// user only; an agent is refused, and a run that does not exist is
    /// not found.
    pub fn run_follow(&self, who: Principal, agent: AgentId) -> Result<RunFollow> {
        self.read(|tx| {
            if !authenticate(tx, who)?.is_user() {
                return Err(ServiceError::denied(
                    "failed to follow a run: only the user may follow a run's transcript or output",
                ));
            }
            let row = tx
                .agent(agent)?
                .ok_or_else(|| ServiceError::not_found("agent run", agent))?;
            Ok(if row.ended_at.is_some() {
                RunFollow::Ended
            } else if tx.agent_run(agent)?.is_none() {
                // A spawn records its run in the transaction that makes
                // the agent; a minted token makes none.
                RunFollow::Attached
            } else {
                RunFollow::Live
            })
        })
    }

    /// A run's stored transcript, `None` when none was recorded (the run is
    /// live, was killed before writing one, or is an attached client).
    /// User only, like [`Service::run_transcript`].
    pub fn run_transcript_stored(&self, who: Principal, agent: AgentId) -> Result<Option<Vec<u8>>> {
        let blob = self.read(|tx| {
            let caller = authenticate(tx, who)?;
            if !caller.is_user() {
                return Err(ServiceError::denied(
                    "failed to read the transcript: only the user may read transcripts (they hold content this handler may no longer read); read the run record with the runs tools instead",
                ));
            }
            let run = tx
                .agent_run(agent)?
                .ok_or_else(|| ServiceError::not_found("agent run", agent))?;
            Ok(run.transcript)
        })?;
        match blob {
            Some(b) => Ok(Some(self.blobs.get(&b)?)),
            None => Ok(None),
        }
    }
}
