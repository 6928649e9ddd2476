//! [`CallTx`] on PostgreSQL.
#![allow(unused_variables)]

use agency_core::{CallId, ConversationId, HandlerId, MessageId, Timestamp};
use agency_store::calls::{CallRow, CallStatus};
use agency_store::tx::CallTx;
use agency_store::tx::R;

use crate::PgTx;
use crate::convert::unported;

impl CallTx for PgTx<'_> {
    fn insert_call(&mut self, call: &CallRow) -> R<()> {
        Err(unported("insert_call"))
    }
    fn call(&mut self, id: CallId) -> R<Option<CallRow>> {
        Err(unported("call"))
    }
    fn calls_in_conversation(
        &mut self,
        conversation: ConversationId,
        limit: usize,
    ) -> R<Vec<CallRow>> {
        Err(unported("calls_in_conversation"))
    }
    fn newest_open_call_to(&mut self, callee: HandlerId) -> R<Option<CallRow>> {
        Err(unported("newest_open_call_to"))
    }
    fn spend_call_step(&mut self, id: CallId) -> R<Option<u32>> {
        Err(unported("spend_call_step"))
    }
    fn answer_call(
        &mut self,
        id: CallId,
        status: CallStatus,
        reply_message: MessageId,
        reply: &str,
        at: Timestamp,
    ) -> R<bool> {
        Err(unported("answer_call"))
    }
}
