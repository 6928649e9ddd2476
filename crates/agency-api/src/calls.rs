//! Typed calls between agents on the wire: what the
//! MCP tools `agent_call` and `agent_reply` answer, and the
//! machine-readable issues of a value that breaks a verb's schema.

use agency_core::{CallId, ConversationId, HandlerId, MessageId};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One way a value breaks a JSON Schema, machine-readable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SchemaIssue {
    /// JSON Pointer into the value (`/text`; empty: the whole value).
    pub instance_path: String,
    /// The JSON Schema keyword broken (`required`, `type`, …).
    pub keyword: String,
    pub message: String,
}

/// `agent_call`: the request was sent (as mail to the callee).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallSent {
    pub request_id: CallId,
    /// Wait for the reply with `mail_wait {conversation}`.
    pub conversation_id: ConversationId,
    /// The mail that carried the request.
    pub message: MessageId,
    pub callee: HandlerId,
    /// Calls in the chain up to and including this one.
    pub hops: u32,
    /// Nested calls the callee may still make while serving this one.
    pub steps_left: u32,
}

/// `agent_reply`: the answer was accepted and sent to the caller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallReplied {
    pub request_id: CallId,
    pub conversation_id: ConversationId,
    /// The mail that carried the reply.
    pub message: MessageId,
    /// `response` or `error`.
    #[serde(rename = "type")]
    pub kind: String,
}

/// A call as its caller or callee sees it (`agent_call` with `wait`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallView {
    pub request_id: CallId,
    pub conversation_id: ConversationId,
    pub verb: String,
    /// The callee's agent name.
    pub agent: String,
    /// `pending`, `answered` or `failed`.
    pub status: String,
    /// The validated output, once answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<Value>,
    /// The callee's error, when it answered with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply_message: Option<MessageId>,
}
