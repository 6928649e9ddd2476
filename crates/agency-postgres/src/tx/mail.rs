//! [`MailTx`] on PostgreSQL: mail envelopes, scheduling (due / next due),
//! inboxes and outboxes whole and in pages, the sender's quota count and
//! the retention queries (mail acknowledged long ago, and the KB files it
//! carried).
//!
//! Pages compare `(time, id)` as a row value against the cursor row, so
//! equal timestamps page correctly; counts stop at the caller's limit (a
//! quota of N costs at most N index entries, the indexes are in
//! `schema_v1.sql`).

use agency_core::{FileId, MailTarget, MessageId, Timestamp};
use agency_store::model::MessageRow;
use agency_store::tx::MailTx;
use agency_store::tx::R;

use crate::PgTx;
use crate::convert::*;

/// Served by the partial index `messages_due (deliver_at, id)`.
const DUE_MESSAGES: &str = concat!(
    "SELECT ",
    message_cols!(),
    " FROM messages WHERE delivered_at IS NULL AND deliver_at <= $1 ORDER BY deliver_at, id LIMIT $2"
);

/// Served by the partial index `messages_inbox (to_party, delivered_at, id)`.
const INBOX: &str = concat!(
    "SELECT ",
    message_cols!(),
    " FROM messages WHERE to_party = $1 AND acked_at IS NULL AND delivered_at IS NOT NULL
      ORDER BY delivered_at, id LIMIT $2"
);

impl MailTx for PgTx<'_> {
    fn insert_message(&mut self, m: &MessageRow) -> R<()> {
        execute(
            self.conn,
            concat!(
                "INSERT INTO messages (",
                message_cols!(),
                ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
            ),
            &[
                &m.id.to_string(),
                &m.file.to_string(),
                &target_text(m.from),
                &target_text(m.to),
                &m.subject,
                &m.created_at.0,
                &m.deliver_at.0,
                &m.delivered_at.map(|t| t.0),
                &m.acked_at.map(|t| t.0),
                &m.dropped_reason,
                &opt_text(m.in_reply_to),
                &flag(m.notice),
            ],
            || format!("insert message {}", m.id),
        )
        .map(drop)
    }

    fn message(&mut self, id: MessageId) -> R<Option<MessageRow>> {
        query_opt(
            self.conn,
            concat!("SELECT ", message_cols!(), " FROM messages WHERE id = $1"),
            &[&id.to_string()],
            || format!("read message {id}"),
            message_row,
        )
    }

    fn set_delivered(&mut self, id: MessageId, at: Timestamp) -> R<()> {
        let op = || format!("mark message {id} delivered");
        let n = execute(
            self.conn,
            "UPDATE messages SET delivered_at = $2 WHERE id = $1",
            &[&id.to_string(), &at.0],
            op,
        )?;
        require_row(n, op)
    }

    fn set_acked(&mut self, id: MessageId, at: Timestamp) -> R<()> {
        let op = || format!("mark message {id} acknowledged");
        let n = execute(
            self.conn,
            "UPDATE messages SET acked_at = $2 WHERE id = $1",
            &[&id.to_string(), &at.0],
            op,
        )?;
        require_row(n, op)
    }

    /// Close a deferred message without delivering it, keeping why.
    fn set_dropped(&mut self, id: MessageId, at: Timestamp, reason: &str) -> R<()> {
        let op = || format!("mark message {id} dropped");
        let n = execute(
            self.conn,
            "UPDATE messages SET delivered_at = $2, acked_at = $2, dropped_reason = $3 WHERE id = $1",
            &[&id.to_string(), &at.0, &reason],
            op,
        )?;
        require_row(n, op)
    }

    fn due_messages(&mut self, now: Timestamp, n: usize) -> R<Vec<MessageRow>> {
        query_rows(
            self.conn,
            DUE_MESSAGES,
            &[&now.0, &limit(n)],
            || format!("list messages due at {now}"),
            message_row,
        )
    }

    fn next_due(&mut self) -> R<Option<Timestamp>> {
        let v: Option<i64> = query_value(
            self.conn,
            "SELECT MIN(deliver_at) FROM messages WHERE delivered_at IS NULL",
            &[],
            || "find the next message due".to_owned(),
        )?;
        Ok(v.map(Timestamp))
    }

    fn inbox(&mut self, to: MailTarget, n: usize) -> R<Vec<MessageRow>> {
        let to = target_text(to);
        query_rows(
            self.conn,
            INBOX,
            &[&to, &limit(n)],
            || format!("read the inbox of {to}"),
            message_row,
        )
    }

    fn inbox_count(&mut self, to: MailTarget) -> R<i64> {
        let to = target_text(to);
        query_value(
            self.conn,
            "SELECT COUNT(*) FROM messages WHERE to_party = $1 AND acked_at IS NULL AND delivered_at IS NOT NULL",
            &[&to],
            || format!("count the inbox of {to}"),
        )
    }

    fn inbox_after(
        &mut self,
        to: MailTarget,
        after: Option<MessageId>,
        n: usize,
    ) -> R<Vec<MessageRow>> {
        let to = target_text(to);
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                message_cols!(),
                " FROM messages WHERE to_party = $1 AND acked_at IS NULL AND delivered_at IS NOT NULL
                    AND ($2::TEXT IS NULL OR (delivered_at, id) > (SELECT delivered_at, id FROM messages WHERE id = $2))
                  ORDER BY delivered_at, id LIMIT $3"
            ),
            &[&to, &opt_text(after), &limit(n)],
            || format!("read a page of the inbox of {to}"),
            message_row,
        )
    }

    /// The last `n` messages delivered to `to`, acknowledged or not (a
    /// dropped one was never delivered), newest first; served by the partial
    /// index `messages_received`.
    fn received(&mut self, to: MailTarget, n: usize) -> R<Vec<MessageRow>> {
        let to = target_text(to);
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                message_cols!(),
                " FROM messages WHERE to_party = $1 AND delivered_at IS NOT NULL
                    AND dropped_reason IS NULL
                  ORDER BY delivered_at DESC, id DESC LIMIT $2"
            ),
            &[&to, &limit(n)],
            || format!("list the mail delivered to {to}"),
            message_row,
        )
    }

    fn outbox(&mut self, from: MailTarget, n: usize) -> R<Vec<MessageRow>> {
        let from = target_text(from);
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                message_cols!(),
                " FROM messages WHERE from_party = $1 ORDER BY created_at DESC, id DESC LIMIT $2"
            ),
            &[&from, &limit(n)],
            || format!("read the outbox of {from}"),
            message_row,
        )
    }

    fn outbox_before(
        &mut self,
        from: MailTarget,
        before: Option<MessageId>,
        n: usize,
    ) -> R<Vec<MessageRow>> {
        let from = target_text(from);
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                message_cols!(),
                " FROM messages WHERE from_party = $1
                    AND ($2::TEXT IS NULL OR (created_at, id) < (SELECT created_at, id FROM messages WHERE id = $2))
                  ORDER BY created_at DESC, id DESC LIMIT $3"
            ),
            &[&from, &opt_text(before), &limit(n)],
            || format!("read a page of the outbox of {from}"),
            message_row,
        )
    }

    fn pending_mail_from(&mut self, from: MailTarget, n: usize) -> R<usize> {
        let from = target_text(from);
        query_value::<i64>(
            self.conn,
            "SELECT COUNT(*) FROM (SELECT 1 FROM messages
               WHERE from_party = $1 AND delivered_at IS NULL LIMIT $2) AS pending",
            &[&from, &limit(n)],
            || format!("count the undelivered mail of {from}"),
        )
        .map(count)
    }

    fn acked_messages_before(
        &mut self,
        before: Timestamp,
        after: Option<(Timestamp, MessageId)>,
        n: usize,
    ) -> R<Vec<MessageRow>> {
        let (at, id) = match after {
            Some((at, id)) => (at.0, id.to_string()),
            None => (i64::MIN, String::new()),
        };
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                message_cols!(),
                " FROM messages
                  WHERE acked_at IS NOT NULL AND acked_at < $1 AND (acked_at, id) > ($2, $3)
                  ORDER BY acked_at, id LIMIT $4"
            ),
            &[&before.0, &at, &id, &limit(n)],
            || format!("list mail acknowledged before {}", before.0),
            message_row,
        )
    }

    fn delete_message(&mut self, id: MessageId) -> R<()> {
        let op = || format!("delete message {id}");
        let n = execute(
            self.conn,
            "DELETE FROM messages WHERE id = $1",
            &[&id.to_string()],
            op,
        )?;
        require_row(n, op)
    }

    fn delete_messages_carrying(&mut self, file: FileId) -> R<usize> {
        execute(
            self.conn,
            "DELETE FROM messages WHERE file = $1",
            &[&file.to_string()],
            || format!("delete the messages that carry KB file {file}"),
        )
    }

    fn file_in_unexpired_mail(&mut self, file: FileId, before: Timestamp) -> R<bool> {
        query_value(
            self.conn,
            "SELECT EXISTS (SELECT 1 FROM messages
               WHERE file = $1 AND (acked_at IS NULL OR acked_at >= $2))",
            &[&file.to_string(), &before.0],
            || format!("check the mail that carries KB file {file}"),
        )
    }
}
