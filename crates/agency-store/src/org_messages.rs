//! Rows of talking to an agency from outside
//! (migration 17): API keys, the messages outside parties sent and their
//! replies, and where an agency's messages go. Who may do what, and what a
//! message says, are the service's (`agency-service`'s `org_messages.rs`
//! and `org_keys.rs`); these are plain rows.

use agency_core::{ConversationId, MessageId, OrgKeyId, OrgMessageId, Timestamp};
use serde::{Deserialize, Serialize};

/// An agency's API key. The secret is never stored: `key_hash` is the
/// BLAKE3 hex of it, `prefix` its first characters for display.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrgKeyRow {
    pub id: OrgKeyId,
    pub agency: String,
    pub key_hash: String,
    pub prefix: String,
    pub created_at: Timestamp,
    pub revoked_at: Option<Timestamp>,
}

/// Where a message from outside stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrgMessageStatus {
    /// Delivered to the executive handler; no reply yet.
    Pending,
    /// The executive handler replied (`reply_text`).
    Answered,
    /// It will never be answered (kept for the store's format; nothing
    /// sets it yet).
    Failed,
}

impl OrgMessageStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            OrgMessageStatus::Pending => "pending",
            OrgMessageStatus::Answered => "answered",
            OrgMessageStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<OrgMessageStatus> {
        Some(match s {
            "pending" => OrgMessageStatus::Pending,
            "answered" => OrgMessageStatus::Answered,
            "failed" => OrgMessageStatus::Failed,
            _ => return None,
        })
    }
}

/// One message an outside party sent to an agency.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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
