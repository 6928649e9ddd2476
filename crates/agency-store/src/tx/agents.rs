//! [`AgentTx`]: agents (one run of a handler): rows, their bearer tokens
//! and their process groups.

use agency_core::{AgentId, HandlerId, Timestamp};

use super::R;
use crate::model::{AgentProcessRow, AgentRow, HandlerRow, TokenRow};

/// Agents (one run of a handler): rows, their bearer tokens and their
/// process groups.
pub trait AgentTx {
    /// Fails with `StoreError::Unique` if the handler already has a live agent.
    fn insert_agent(&mut self, a: &AgentRow) -> R<()>;
    fn agent(&mut self, id: AgentId) -> R<Option<AgentRow>>;
    /// Agent `id` and the handler it works for, in one read: every call an
    /// agent makes is authenticated with both.
    fn agent_with_handler(&mut self, id: AgentId) -> R<Option<(AgentRow, HandlerRow)>>;
    /// Mark a live agent ended; returns false if it was not live.
    fn end_agent(&mut self, id: AgentId, at: Timestamp, reason: &str) -> R<bool>;
    /// Live agents of the given handlers, ordered by id.
    fn live_agents_of(&mut self, handlers: &[HandlerId]) -> R<Vec<AgentRow>>;
    /// Every live agent, ordered by id.
    fn live_agents(&mut self) -> R<Vec<AgentRow>>;
    /// Most recent agents (live or ended), newest first.
    fn recent_agents(&mut self, limit: usize) -> R<Vec<AgentRow>>;
    /// Fails with `StoreError::Unique` if the hash exists.
    fn insert_token(&mut self, t: &TokenRow) -> R<()>;
    fn token(&mut self, hash: &str) -> R<Option<TokenRow>>;
    /// The token with `hash`, revoked or not, with its agent and that
    /// agent's handler, in one read (every request of an agent presents
    /// its token); none if any of the three is missing.
    fn token_caller(&mut self, hash: &str) -> R<Option<(TokenRow, AgentRow, HandlerRow)>>;
    /// Revoke every live token of an agent; returns how many.
    fn revoke_tokens_of(&mut self, agent: AgentId, at: Timestamp) -> R<u64>;
    /// Insert or replace the process group recorded for an agent.
    fn put_agent_process(&mut self, r: &AgentProcessRow) -> R<()>;
    /// The process groups recorded for agents still live, by agent.
    fn live_agent_processes(&mut self) -> R<Vec<AgentProcessRow>>;
}
