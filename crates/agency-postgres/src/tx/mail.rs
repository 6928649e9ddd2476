//! [`MailTx`] on PostgreSQL.
#![allow(unused_variables)]

use agency_core::{FileId, MailTarget, MessageId, Timestamp};
use agency_store::model::MessageRow;
use agency_store::tx::MailTx;
use agency_store::tx::R;

use crate::PgTx;
use crate::convert::unported;

impl MailTx for PgTx<'_> {
    fn insert_message(&mut self, m: &MessageRow) -> R<()> {
        Err(unported("insert_message"))
    }
    fn message(&mut self, id: MessageId) -> R<Option<MessageRow>> {
        Err(unported("message"))
    }
    fn set_delivered(&mut self, id: MessageId, at: Timestamp) -> R<()> {
        Err(unported("set_delivered"))
    }
    fn set_acked(&mut self, id: MessageId, at: Timestamp) -> R<()> {
        Err(unported("set_acked"))
    }
    fn set_dropped(&mut self, id: MessageId, at: Timestamp, reason: &str) -> R<()> {
        Err(unported("set_dropped"))
    }
    fn due_messages(&mut self, now: Timestamp, limit: usize) -> R<Vec<MessageRow>> {
        Err(unported("due_messages"))
    }
    fn next_due(&mut self) -> R<Option<Timestamp>> {
        Err(unported("next_due"))
    }
    fn inbox(&mut self, to: MailTarget, limit: usize) -> R<Vec<MessageRow>> {
        Err(unported("inbox"))
    }
    fn inbox_count(&mut self, to: MailTarget) -> R<i64> {
        Err(unported("inbox_count"))
    }
    fn inbox_after(
        &mut self,
        to: MailTarget,
        after: Option<MessageId>,
        limit: usize,
    ) -> R<Vec<MessageRow>> {
        Err(unported("inbox_after"))
    }
    fn received(&mut self, to: MailTarget, limit: usize) -> R<Vec<MessageRow>> {
        Err(unported("received"))
    }
    fn outbox(&mut self, from: MailTarget, limit: usize) -> R<Vec<MessageRow>> {
        Err(unported("outbox"))
    }
    fn outbox_before(
        &mut self,
        from: MailTarget,
        before: Option<MessageId>,
        limit: usize,
    ) -> R<Vec<MessageRow>> {
        Err(unported("outbox_before"))
    }
    fn pending_mail_from(&mut self, from: MailTarget, limit: usize) -> R<usize> {
        Err(unported("pending_mail_from"))
    }
    fn acked_messages_before(
        &mut self,
        before: Timestamp,
        after: Option<(Timestamp, MessageId)>,
        limit: usize,
    ) -> R<Vec<MessageRow>> {
        Err(unported("acked_messages_before"))
    }
    fn delete_message(&mut self, id: MessageId) -> R<()> {
        Err(unported("delete_message"))
    }
    fn delete_messages_carrying(&mut self, file: FileId) -> R<usize> {
        Err(unported("delete_messages_carrying"))
    }
    fn file_in_unexpired_mail(&mut self, file: FileId, before: Timestamp) -> R<bool> {
        Err(unported("file_in_unexpired_mail"))
    }
}
