//! [`CallTx`]: typed calls between agents and their replies.

use agency_core::{CallId, ConversationId, HandlerId, MessageId, Timestamp};

use super::R;
use crate::calls::{CallRow, CallStatus};

/// Typed calls between agents and their replies.
pub trait CallTx {
    /// `StoreError::Unique` when the id or the request message is taken.
    fn insert_call(&mut self, call: &CallRow) -> R<()>;
    fn call(&mut self, id: CallId) -> R<Option<CallRow>>;
    /// The calls of a conversation, oldest first (at most `limit`).
    fn calls_in_conversation(
        &mut self,
        conversation: ConversationId,
        limit: usize,
    ) -> R<Vec<CallRow>>;
    /// The newest call to `callee` still waiting for its answer.
    fn newest_open_call_to(&mut self, callee: HandlerId) -> R<Option<CallRow>>;
    /// Spend one step of call `id`'s budget: the steps left after, or
    /// `None` when none was left (nothing changes then).
    fn spend_call_step(&mut self, id: CallId) -> R<Option<u32>>;
    /// Close a pending call with its reply; whether it was pending (a
    /// second answer changes nothing and gets `false`).
    fn answer_call(
        &mut self,
        id: CallId,
        status: CallStatus,
        reply_message: MessageId,
        reply: &str,
        at: Timestamp,
    ) -> R<bool>;
}
