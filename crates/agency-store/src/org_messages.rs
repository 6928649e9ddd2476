//! Rows of talking to an agency from outside
//! (migration 17): API keys, the messages outside parties sent and their
//! replies, and where an agency's messages go. Who may do what, and what a
//! message says, are the service's (`agency-service`'s `org_messages.rs`
//! and `org_keys.rs`); these are plain rows.

pub use agency_core::status::OrgMessageStatus;
use agency_core::{ConversationId, MessageId, OrgKeyId, OrgMessageId, Timestamp};

/// An agency's API key. The secret is never stored: `key_hash` is the
/// BLAKE3 hex of it, `prefix` its first characters for display.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrgKeyRow {
    pub id: OrgKeyId,
    pub agency: String,
    pub key_hash: String,
    pub prefix: String,
    pub created_at: Timestamp,
    pub revoked_at: Option<Timestamp>,
}

/// One message an outside party sent to an agency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrgMessageRow {
    pub id: OrgMessageId,
    pub agency: String,
    pub conversation: ConversationId,
    /// The mail that carried it from the user to the executive handler;
    /// a reply names this in its `in_reply_to`.
    pub mail_message_id: MessageId,
    /// What the outside party wrote.
    pub text: String,
    pub reply_text: Option<String>,
    pub reply_message_id: Option<MessageId>,
    pub status: OrgMessageStatus,
    pub created_at: Timestamp,
    pub answered_at: Option<Timestamp>,
    /// The agency API key that sent it; `None` for the user.
    pub key_id: Option<OrgKeyId>,
}
