//! [`RunTx`]: agent runs: run records, captured output, progress checks and
//! stalls.

use agency_core::{AgentId, HandlerId, Timestamp};

use super::R;
use crate::blob::BlobId;
use crate::model::{AgentRunRow, AgentWithRun};

/// Agent runs: run records, captured output, progress checks and stalls.
pub trait RunTx {
    /// Insert or replace the run record of an agent.
    fn put_agent_run(&mut self, r: &AgentRunRow) -> R<()>;
    fn agent_run(&mut self, agent: AgentId) -> R<Option<AgentRunRow>>;
    /// Attach the captured output of an agent's run (a blob) to its run
    /// record; false if the agent has no run record.
    fn set_agent_run_log(&mut self, agent: AgentId, log: &BlobId) -> R<bool>;
    /// The blob of an agent run's captured output, if one was kept.
    fn agent_run_log(&mut self, agent: AgentId) -> R<Option<BlobId>>;
    /// Keep the system prompt and first message a run was given; false
    /// when the agent has no run record.
    fn set_run_prompt(&mut self, agent: AgentId, prompt: &BlobId, first: &BlobId) -> R<bool>;
    /// The blobs of a run's system prompt and first message (`None`: no
    /// run record; `(None, None)`: none kept).
    fn run_prompt(&mut self, agent: AgentId) -> R<Option<(Option<BlobId>, Option<BlobId>)>>;
    /// Agents with their runs, newest first: of `handlers`, or of every
    /// handler when `None`; only those started before `before`.
    fn runs(
        &mut self,
        handlers: Option<&[HandlerId]>,
        before: Option<Timestamp>,
        limit: usize,
    ) -> R<Vec<AgentWithRun>>;
    /// The most recently ended agent of a handler, with its run.
    fn last_ended_run(&mut self, handler: HandlerId) -> R<Option<AgentWithRun>>;
    /// Whether the agent created or wrote a KB file or changed an outcome.
    fn agent_made_progress(&mut self, agent: AgentId) -> R<bool>;
    /// Whether the agent submitted an audit summary.
    fn agent_logged(&mut self, agent: AgentId) -> R<bool>;
    fn set_stalled(&mut self, handler: HandlerId, at: Timestamp, reason: &str) -> R<()>;
    /// Returns whether the handler was stalled.
    fn clear_stalled(&mut self, handler: HandlerId) -> R<bool>;
    fn stalled(&mut self, handler: HandlerId) -> R<Option<(Timestamp, String)>>;
}
