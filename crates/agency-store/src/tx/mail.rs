//! [`MailTx`]: mail: messages, delivery and acknowledgement, inboxes and
//! outboxes (whole and in pages), quotas and retention.

use agency_core::{FileId, MailTarget, MessageId, Timestamp};

use super::R;
use crate::model::MessageRow;

/// Mail: messages, delivery and acknowledgement, inboxes and outboxes
/// (whole and in pages), quotas and retention.
pub trait MailTx {
    fn insert_message(&mut self, m: &MessageRow) -> R<()>;
    fn message(&mut self, id: MessageId) -> R<Option<MessageRow>>;
    fn set_delivered(&mut self, id: MessageId, at: Timestamp) -> R<()>;
    fn set_acked(&mut self, id: MessageId, at: Timestamp) -> R<()>;
    /// Close a deferred message that may not be delivered, with the reason.
    fn set_dropped(&mut self, id: MessageId, at: Timestamp, reason: &str) -> R<()>;
    /// Undelivered messages with `deliver_at <= now`, ordered by
    /// (deliver_at, id), at most `limit`.
    fn due_messages(&mut self, now: Timestamp, limit: usize) -> R<Vec<MessageRow>>;
    /// The earliest `deliver_at` among undelivered messages.
    fn next_due(&mut self) -> R<Option<Timestamp>>;
    /// Delivered, unacknowledged messages to `to`, ordered by (delivered_at, id).
    fn inbox(&mut self, to: MailTarget, limit: usize) -> R<Vec<MessageRow>>;
    fn inbox_count(&mut self, to: MailTarget) -> R<i64>;
    /// Like `inbox`, starting after the message `after`.
    fn inbox_after(
        &mut self,
        to: MailTarget,
        after: Option<MessageId>,
        limit: usize,
    ) -> R<Vec<MessageRow>>;
    /// The last `limit` messages delivered to `to`, acknowledged or not,
    /// newest first.
    fn received(&mut self, to: MailTarget, limit: usize) -> R<Vec<MessageRow>>;
    /// Messages sent by `from`, newest first.
    fn outbox(&mut self, from: MailTarget, limit: usize) -> R<Vec<MessageRow>>;
    /// Like `outbox` (newest first), starting after the message `before`.
    fn outbox_before(
        &mut self,
        from: MailTarget,
        before: Option<MessageId>,
        limit: usize,
    ) -> R<Vec<MessageRow>>;
    /// Undelivered messages sent by `from`, counted up to `limit`.
    fn pending_mail_from(&mut self, from: MailTarget, limit: usize) -> R<usize>;
    /// Messages acknowledged before `before`, ordered by (acked_at, id),
    /// after the cursor `after`, at most `limit`.
    fn acked_messages_before(
        &mut self,
        before: Timestamp,
        after: Option<(Timestamp, MessageId)>,
        limit: usize,
    ) -> R<Vec<MessageRow>>;
    fn delete_message(&mut self, id: MessageId) -> R<()>;
    /// Delete every message whose body is `file`; returns how many.
    fn delete_messages_carrying(&mut self, file: FileId) -> R<usize>;
    /// Whether some message carrying `file` is unacknowledged or was
    /// acknowledged at or after `before`.
    fn file_in_unexpired_mail(&mut self, file: FileId, before: Timestamp) -> R<bool>;
}
