//! [`OrgMessageTx`]: talking to an agency from outside: API keys and
//! messages with their replies.

use agency_core::{MessageId, Timestamp};

use super::R;
use crate::org_messages::{OrgKeyRow, OrgMessageRow};

/// Talking to an agency from outside: API keys and messages with their replies.
pub trait OrgMessageTx {
    fn insert_org_key(&mut self, key: &OrgKeyRow) -> R<()>;
    fn org_key(&mut self, id: agency_core::OrgKeyId) -> R<Option<OrgKeyRow>>;
    fn org_key_by_hash(&mut self, key_hash: &str) -> R<Option<OrgKeyRow>>;
    /// Keys (of one agency, or all), ordered by agency and age.
    fn org_keys(&mut self, agency: Option<&str>) -> R<Vec<OrgKeyRow>>;
    /// Revoke a live key; whether it was live.
    fn revoke_org_key(&mut self, id: agency_core::OrgKeyId, at: Timestamp) -> R<bool>;
    fn insert_org_message(&mut self, m: &OrgMessageRow) -> R<()>;
    fn org_message(&mut self, id: agency_core::OrgMessageId) -> R<Option<OrgMessageRow>>;
    /// The message from outside that the mail `mail` carried, if any.
    fn org_message_by_mail(&mut self, mail: MessageId) -> R<Option<OrgMessageRow>>;
    /// The last `n` messages of a conversation, oldest first.
    fn org_conversation(
        &mut self,
        conversation: agency_core::ConversationId,
        n: usize,
    ) -> R<Vec<OrgMessageRow>>;
    /// The last `n` messages from outside (of `agency`, or of all),
    /// newest first.
    fn org_messages_recent(&mut self, agency: Option<&str>, n: usize) -> R<Vec<OrgMessageRow>>;
    /// How many messages sent with API key `key` are still pending.
    /// Counted in the transaction that would add one, so that parallel
    /// requests cannot pass the cap together.
    fn org_messages_pending_of_key(&mut self, key: agency_core::OrgKeyId) -> R<u64>;
    /// Record the reply to a pending message; whether it was pending.
    fn set_org_message_answered(
        &mut self,
        id: agency_core::OrgMessageId,
        reply: &str,
        reply_message: MessageId,
        at: Timestamp,
    ) -> R<bool>;
}
