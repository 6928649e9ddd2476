//! The Process Inbox outcome: a handler with unread mail has one open
//! (a child of its root), so that it has work and gets an agent; mail
//! opens it on delivery, acknowledging the last message completes it.

use agency_core::{HandlerId, OutcomeId, OutcomeStatus};
use agency_store::OutcomeRow;

use crate::Result;
use crate::render::{Author, SYSTEM_ACTION};
use crate::service::Op;
use crate::tree::outcomes::insert_outcome;

/// Give the handler an open Process Inbox outcome (a child of its root) if
/// it has none, so that it has work and gets an agent.
pub(crate) fn ensure_process_inbox(op: &mut Op<'_>, h: HandlerId) -> Result<()> {
    if op.tx.open_process_inbox(h)?.is_some() {
        return Ok(());
    }
    let row = OutcomeRow {
        id: OutcomeId::new_random(),
        title: "Process inbox".to_owned(),
        description: "Read every message in the inbox, turn each into outcomes or state, and acknowledge it. Completes when the inbox is empty.".to_owned(),
        status: OutcomeStatus::Open,
        status_reason: None,
        priority: 100,
        perpetual: false,
        process_inbox: true,
        responsible: h,
        created_at: op.now,
        updated_at: op.now,
    };
    insert_outcome(
        op,
        &row,
        &[h.root()],
        Author::default(),
        &format!("{SYSTEM_ACTION}created"),
        "mail arrived".to_owned(),
    )
}
