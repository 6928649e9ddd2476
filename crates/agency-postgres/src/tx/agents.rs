//! [`AgentTx`] on PostgreSQL.
#![allow(unused_variables)]

use agency_core::{AgentId, HandlerId, Timestamp};
use agency_store::model::{AgentProcessRow, AgentRow, TokenRow};
use agency_store::tx::AgentTx;
use agency_store::tx::R;

use crate::PgTx;
use crate::convert::unported;

impl AgentTx for PgTx<'_> {
    fn insert_agent(&mut self, a: &AgentRow) -> R<()> {
        Err(unported("insert_agent"))
    }
    fn agent(&mut self, id: AgentId) -> R<Option<AgentRow>> {
        Err(unported("agent"))
    }
    fn end_agent(&mut self, id: AgentId, at: Timestamp, reason: &str) -> R<bool> {
        Err(unported("end_agent"))
    }
    fn live_agents_of(&mut self, handlers: &[HandlerId]) -> R<Vec<AgentRow>> {
        Err(unported("live_agents_of"))
    }
    fn live_agents(&mut self) -> R<Vec<AgentRow>> {
        Err(unported("live_agents"))
    }
    fn recent_agents(&mut self, limit: usize) -> R<Vec<AgentRow>> {
        Err(unported("recent_agents"))
    }
    fn insert_token(&mut self, t: &TokenRow) -> R<()> {
        Err(unported("insert_token"))
    }
    fn token(&mut self, hash: &str) -> R<Option<TokenRow>> {
        Err(unported("token"))
    }
    fn revoke_tokens_of(&mut self, agent: AgentId, at: Timestamp) -> R<u64> {
        Err(unported("revoke_tokens_of"))
    }
    fn put_agent_process(&mut self, r: &AgentProcessRow) -> R<()> {
        Err(unported("put_agent_process"))
    }
    fn live_agent_processes(&mut self) -> R<Vec<AgentProcessRow>> {
        Err(unported("live_agent_processes"))
    }
}
