//! Mail as clients see it: message views and bodies.

use agency_core::{FileId, MailTarget, MessageId, Timestamp};
use serde::{Deserialize, Serialize};

/// A message body: inline text, or an existing KB file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum MailBody {
    Text {
        subject: Option<String>,
        text: String,
    },
    File {
        file: FileId,
        subject: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageView {
    pub id: MessageId,
    pub from: MailTarget,
    pub to: MailTarget,
    pub subject: String,
    pub file: FileId,
    pub created_at: Timestamp,
    pub deliver_at: Timestamp,
    pub delivered_at: Option<Timestamp>,
    pub acked_at: Option<Timestamp>,
    /// A deferred message that failed its delivery check when it fell due
    /// (its sender lost the right to send it or to pass its attachment on)
    /// was dropped then, for this reason, and never delivered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped_reason: Option<String>,
    /// The body, for inbox reads, when it fits the page's inline budget.
    pub body: Option<String>,
    /// The body's size in bytes (inbox reads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_size: Option<i64>,
    /// The body was too large to carry inline: read `file` with `kb_read`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub body_truncated: bool,
    /// The message this one answers (one its sender had received).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_reply_to: Option<MessageId>,
    /// A notice Agency itself wrote (a stall, an approval, a budget
    /// reached…), sent in the name of `from`: shown as from "agency".
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_agency: bool,
}

/// One message waiting for a warm agent: enough to tell it what came.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MailHeader {
    pub id: MessageId,
    pub from: MailTarget,
    pub subject: String,
}
