//! [`RunTx`] on PostgreSQL.
#![allow(unused_variables)]

use agency_core::{AgentId, HandlerId, Timestamp};
use agency_store::blob::BlobId;
use agency_store::model::{AgentRunRow, AgentWithRun};
use agency_store::tx::R;
use agency_store::tx::RunTx;

use crate::PgTx;
use crate::convert::unported;

impl RunTx for PgTx<'_> {
    fn put_agent_run(&mut self, r: &AgentRunRow) -> R<()> {
        Err(unported("put_agent_run"))
    }
    fn agent_run(&mut self, agent: AgentId) -> R<Option<AgentRunRow>> {
        Err(unported("agent_run"))
    }
    fn set_agent_run_log(&mut self, agent: AgentId, log: &BlobId) -> R<bool> {
        Err(unported("set_agent_run_log"))
    }
    fn agent_run_log(&mut self, agent: AgentId) -> R<Option<BlobId>> {
        Err(unported("agent_run_log"))
    }
    fn set_run_prompt(&mut self, agent: AgentId, prompt: &BlobId, first: &BlobId) -> R<bool> {
        Err(unported("set_run_prompt"))
    }
    fn run_prompt(&mut self, agent: AgentId) -> R<Option<(Option<BlobId>, Option<BlobId>)>> {
        Err(unported("run_prompt"))
    }
    fn runs(
        &mut self,
        handlers: Option<&[HandlerId]>,
        before: Option<Timestamp>,
        limit: usize,
    ) -> R<Vec<AgentWithRun>> {
        Err(unported("runs"))
    }
    fn last_ended_run(&mut self, handler: HandlerId) -> R<Option<AgentWithRun>> {
        Err(unported("last_ended_run"))
    }
    fn agent_made_progress(&mut self, agent: AgentId) -> R<bool> {
        Err(unported("agent_made_progress"))
    }
    fn agent_logged(&mut self, agent: AgentId) -> R<bool> {
        Err(unported("agent_logged"))
    }
    fn set_stalled(&mut self, handler: HandlerId, at: Timestamp, reason: &str) -> R<()> {
        Err(unported("set_stalled"))
    }
    fn clear_stalled(&mut self, handler: HandlerId) -> R<bool> {
        Err(unported("clear_stalled"))
    }
    fn stalled(&mut self, handler: HandlerId) -> R<Option<(Timestamp, String)>> {
        Err(unported("stalled"))
    }
}
