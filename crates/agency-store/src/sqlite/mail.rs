//! Mail envelopes: scheduling (due / next due), inboxes and outboxes.

use agency_core::{MailTarget, MessageId, Timestamp};
use rusqlite::{Connection, params};

use super::convert::*;
use crate::model::*;

pub(crate) fn insert_message(c: &Connection, m: &MessageRow) -> R<()> {
    execute(
        c,
        concat!(
            "INSERT INTO messages (",
            message_cols!(),
            ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"
        ),
        params![
            m.id.to_string(),
            m.file.to_string(),
            target_text(m.from),
            target_text(m.to),
            m.subject,
            m.created_at.0,
            m.deliver_at.0,
            m.delivered_at.map(|t| t.0),
            m.acked_at.map(|t| t.0),
            m.dropped_reason,
            m.in_reply_to.map(|i| i.to_string()),
            i64::from(m.notice),
        ],
        || format!("insert message {}", m.id),
    )
    .map(drop)
}

pub(crate) fn message(c: &Connection, id: MessageId) -> R<Option<MessageRow>> {
    query_opt(
        c,
        concat!("SELECT ", message_cols!(), " FROM messages WHERE id = ?1"),
        [id.to_string()],
        || format!("read message {id}"),
        message_row,
    )
}

pub(crate) fn set_delivered(c: &Connection, id: MessageId, at: Timestamp) -> R<()> {
    let op = || format!("mark message {id} delivered");
    let n = execute(
        c,
        "UPDATE messages SET delivered_at = ?2 WHERE id = ?1",
        params![id.to_string(), at.0],
        op,
    )?;
    require_row(n, op)
}

/// Close a deferred message without delivering it, keeping why.
pub(crate) fn set_dropped(c: &Connection, id: MessageId, at: Timestamp, reason: &str) -> R<()> {
    let op = || format!("mark message {id} dropped");
    let n = execute(
        c,
        "UPDATE messages SET delivered_at = ?2, acked_at = ?2, dropped_reason = ?3 WHERE id = ?1",
        params![id.to_string(), at.0, reason],
        op,
    )?;
    require_row(n, op)
}

pub(crate) fn set_acked(c: &Connection, id: MessageId, at: Timestamp) -> R<()> {
    let op = || format!("mark message {id} acknowledged");
    let n = execute(
        c,
        "UPDATE messages SET acked_at = ?2 WHERE id = ?1",
        params![id.to_string(), at.0],
        op,
    )?;
    require_row(n, op)
}

/// Served by the partial index `messages_due (deliver_at, id)`.
pub(crate) const DUE_MESSAGES: &str = concat!(
    "SELECT ",
    message_cols!(),
    " FROM messages WHERE delivered_at IS NULL AND deliver_at <= ?1 ORDER BY deliver_at, id LIMIT ?2"
);

pub(crate) fn due_messages(c: &Connection, now: Timestamp, n: usize) -> R<Vec<MessageRow>> {
    query_rows(
        c,
        DUE_MESSAGES,
        params![now.0, limit(n)],
        || format!("list messages due at {now}"),
        message_row,
    )
}

pub(crate) fn next_due(c: &Connection) -> R<Option<Timestamp>> {
    let v: Option<i64> = query_value(
        c,
        "SELECT MIN(deliver_at) FROM messages WHERE delivered_at IS NULL",
        [],
        || "find the next message due".to_owned(),
    )?;
    Ok(v.map(Timestamp))
}

/// The last `n` messages delivered to `to`, acknowledged or not (a
/// dropped one was never delivered), newest first; served by the partial
/// index `messages_received` (migration 23).
pub(crate) fn received(c: &Connection, to: MailTarget, n: usize) -> R<Vec<MessageRow>> {
    let to = target_text(to);
    query_rows(
        c,
        concat!(
            "SELECT ",
            message_cols!(),
            " FROM messages WHERE to_party = ?1 AND delivered_at IS NOT NULL
                AND dropped_reason IS NULL
              ORDER BY delivered_at DESC, id DESC LIMIT ?2"
        ),
        params![to, limit(n)],
        || format!("list the mail delivered to {to}"),
        message_row,
    )
}

/// Served by the partial index `messages_inbox (to_party, delivered_at, id)`.
pub(crate) const INBOX: &str = concat!(
    "SELECT ",
    message_cols!(),
    " FROM messages WHERE to_party = ?1 AND acked_at IS NULL AND delivered_at IS NOT NULL
      ORDER BY delivered_at, id LIMIT ?2"
);

pub(crate) fn inbox(c: &Connection, to: MailTarget, n: usize) -> R<Vec<MessageRow>> {
    let to = target_text(to);
    query_rows(
        c,
        INBOX,
        params![to, limit(n)],
        || format!("read the inbox of {to}"),
        message_row,
    )
}

pub(crate) fn inbox_count(c: &Connection, to: MailTarget) -> R<i64> {
    let to = target_text(to);
    query_value(
        c,
        "SELECT COUNT(*) FROM messages WHERE to_party = ?1 AND acked_at IS NULL AND delivered_at IS NOT NULL",
        [&to],
        || format!("count the inbox of {to}"),
    )
}

pub(crate) fn outbox(c: &Connection, from: MailTarget, n: usize) -> R<Vec<MessageRow>> {
    let from = target_text(from);
    query_rows(
        c,
        concat!(
            "SELECT ",
            message_cols!(),
            " FROM messages WHERE from_party = ?1 ORDER BY created_at DESC, id DESC LIMIT ?2"
        ),
        params![from, limit(n)],
        || format!("read the outbox of {from}"),
        message_row,
    )
}
