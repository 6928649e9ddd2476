//! [`CallTx`] on PostgreSQL: typed calls between agents (`agent_calls`).

use agency_core::{CallId, ConversationId, HandlerId, MessageId, Timestamp};
use agency_store::StoreError;
use agency_store::calls::{CallRow, CallStatus};
use agency_store::tx::CallTx;
use agency_store::tx::R;
use tokio_postgres::Row;

use crate::PgTx;
use crate::convert::*;

macro_rules! call_cols {
    () => {
        "id, conversation, parent, caller, caller_agent, callee, org, agent, verb, \
         hops, steps_left, request_message, reply_message, reply, status, created_at, answered_at"
    };
}

fn call_row(r: &Row) -> R<CallRow> {
    let status: String = col(r, 14, "call status")?;
    Ok(CallRow {
        id: col_id(r, 0, "call id")?,
        conversation: col_id(r, 1, "call conversation")?,
        parent: col_opt_id(r, 2, "call parent")?,
        caller: col_id(r, 3, "call caller")?,
        caller_agent: col_id(r, 4, "call caller agent")?,
        callee: col_id(r, 5, "call callee")?,
        org: col(r, 6, "call org")?,
        agent: col(r, 7, "call agent")?,
        verb: col(r, 8, "call verb")?,
        hops: col(r, 9, "call hops")?,
        steps_left: col(r, 10, "call steps_left")?,
        request_message: col_id(r, 11, "call request message")?,
        reply_message: col_opt_id(r, 12, "call reply message")?,
        reply: col(r, 13, "call reply")?,
        status: CallStatus::parse(&status)
            .ok_or_else(|| StoreError::corrupt("call status", status))?,
        created_at: col_ts(r, 15, "call created_at")?,
        answered_at: col_opt_ts(r, 16, "call answered_at")?,
    })
}

impl CallTx for PgTx<'_> {
    fn insert_call(&mut self, c: &CallRow) -> R<()> {
        execute(
            self.conn,
            concat!(
                "INSERT INTO agent_calls (",
                call_cols!(),
                ") VALUES \
                 ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)"
            ),
            &[
                &c.id.to_string(),
                &c.conversation.to_string(),
                &opt_text(c.parent),
                &c.caller.to_string(),
                &c.caller_agent.to_string(),
                &c.callee.to_string(),
                &c.org,
                &c.agent,
                &c.verb,
                &i64::from(c.hops),
                &i64::from(c.steps_left),
                &c.request_message.to_string(),
                &opt_text(c.reply_message),
                &c.reply,
                &c.status.as_str(),
                &c.created_at.0,
                &c.answered_at.map(|t| t.0),
            ],
            || format!("insert call {} of verb {}", c.id, c.verb),
        )
        .map(drop)
    }

    fn call(&mut self, id: CallId) -> R<Option<CallRow>> {
        query_opt(
            self.conn,
            concat!("SELECT ", call_cols!(), " FROM agent_calls WHERE id = $1"),
            &[&id.to_string()],
            || format!("read call {id}"),
            call_row,
        )
    }

    fn calls_in_conversation(&mut self, conversation: ConversationId, n: usize) -> R<Vec<CallRow>> {
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                call_cols!(),
                " FROM agent_calls WHERE conversation = $1
                 ORDER BY created_at, id LIMIT $2"
            ),
            &[&conversation.to_string(), &limit(n)],
            || format!("list the calls of conversation {conversation}"),
            call_row,
        )
    }

    fn newest_open_call_to(&mut self, callee: HandlerId) -> R<Option<CallRow>> {
        query_opt(
            self.conn,
            concat!(
                "SELECT ",
                call_cols!(),
                " FROM agent_calls WHERE callee = $1 AND status = 'pending'
                 ORDER BY created_at DESC, id DESC LIMIT 1"
            ),
            &[&callee.to_string()],
            || format!("find the newest open call to handler {callee}"),
            call_row,
        )
    }

    /// Take one step off a call that has any left; the steps it has left
    /// after, or `None` if it had none (or there is no such call).
    fn spend_call_step(&mut self, id: CallId) -> R<Option<u32>> {
        query_opt(
            self.conn,
            "UPDATE agent_calls SET steps_left = steps_left - 1 WHERE id = $1 AND steps_left > 0
             RETURNING steps_left",
            &[&id.to_string()],
            || format!("spend a step of call {id}"),
            |r| col(r, 0, "call steps_left"),
        )
    }

    fn answer_call(
        &mut self,
        id: CallId,
        status: CallStatus,
        reply_message: MessageId,
        reply: &str,
        at: Timestamp,
    ) -> R<bool> {
        let n = execute(
            self.conn,
            "UPDATE agent_calls SET status = $2, reply_message = $3, reply = $4, answered_at = $5
             WHERE id = $1 AND status = 'pending'",
            &[
                &id.to_string(),
                &status.as_str(),
                &reply_message.to_string(),
                &reply,
                &at.0,
            ],
            || format!("answer call {id}"),
        )?;
        Ok(n == 1)
    }
}
