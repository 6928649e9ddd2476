//! [`OrgMessageTx`] on PostgreSQL.
#![allow(unused_variables)]

use agency_core::{MessageId, Timestamp};
use agency_store::org_messages::{OrgKeyRow, OrgMessageRow};
use agency_store::tx::OrgMessageTx;
use agency_store::tx::R;

use crate::PgTx;
use crate::convert::unported;

impl OrgMessageTx for PgTx<'_> {
    fn insert_org_key(&mut self, key: &OrgKeyRow) -> R<()> {
        Err(unported("insert_org_key"))
    }
    fn org_key(&mut self, id: agency_core::OrgKeyId) -> R<Option<OrgKeyRow>> {
        Err(unported("org_key"))
    }
    fn org_key_by_hash(&mut self, key_hash: &str) -> R<Option<OrgKeyRow>> {
        Err(unported("org_key_by_hash"))
    }
    fn org_keys(&mut self, agency: Option<&str>) -> R<Vec<OrgKeyRow>> {
        Err(unported("org_keys"))
    }
    fn revoke_org_key(&mut self, id: agency_core::OrgKeyId, at: Timestamp) -> R<bool> {
        Err(unported("revoke_org_key"))
    }
    fn insert_org_message(&mut self, m: &OrgMessageRow) -> R<()> {
        Err(unported("insert_org_message"))
    }
    fn org_message(&mut self, id: agency_core::OrgMessageId) -> R<Option<OrgMessageRow>> {
        Err(unported("org_message"))
    }
    fn org_message_by_mail(&mut self, mail: MessageId) -> R<Option<OrgMessageRow>> {
        Err(unported("org_message_by_mail"))
    }
    fn org_conversation(
        &mut self,
        conversation: agency_core::ConversationId,
        n: usize,
    ) -> R<Vec<OrgMessageRow>> {
        Err(unported("org_conversation"))
    }
    fn org_messages_recent(&mut self, agency: Option<&str>, n: usize) -> R<Vec<OrgMessageRow>> {
        Err(unported("org_messages_recent"))
    }
    fn org_messages_pending_of_key(&mut self, key: agency_core::OrgKeyId) -> R<u64> {
        Err(unported("org_messages_pending_of_key"))
    }
    fn set_org_message_answered(
        &mut self,
        id: agency_core::OrgMessageId,
        reply: &str,
        reply_message: MessageId,
        at: Timestamp,
    ) -> R<bool> {
        Err(unported("set_org_message_answered"))
    }
}
