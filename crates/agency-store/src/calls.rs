//! Rows of typed calls between agents (migration 28): one per
//! `agent_call`, answered at most once. What a call may carry and who may
//! answer it are the service's (`agency-service`'s `calls/`); these are
//! plain rows.

use agency_core::{AgentId, CallId, ConversationId, HandlerId, MessageId, Timestamp};

/// Where a call stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallStatus {
    /// Sent; the callee has not answered.
    Pending,
    /// The callee answered with an output that matched the verb's schema.
    Answered,
    /// The callee answered with an error instead.
    Failed,
}

impl CallStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CallStatus::Pending => "pending",
            CallStatus::Answered => "answered",
            CallStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<CallStatus> {
        Some(match s {
            "pending" => CallStatus::Pending,
            "answered" => CallStatus::Answered,
            "failed" => CallStatus::Failed,
            _ => return None,
        })
    }
}

/// One typed call of a verb.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRow {
    pub id: CallId,
    pub conversation: ConversationId,
    /// The call the caller was serving when it made this one (a nested
    /// call spends from its step budget).
    pub parent: Option<CallId>,
    pub caller: HandlerId,
    pub caller_agent: AgentId,
    pub callee: HandlerId,
    /// The organisation and agent name whose verb it is.
    pub org: String,
    pub agent: String,
    pub verb: String,
    /// Calls in the chain up to and including this one (1: top level).
    pub hops: u32,
    /// Nested calls the callee may still make while serving this one.
    pub steps_left: u32,
    pub request_message: MessageId,
    pub reply_message: Option<MessageId>,
    /// The answer as JSON: the validated output, or the error.
    pub reply: Option<String>,
    pub status: CallStatus,
    pub created_at: Timestamp,
    pub answered_at: Option<Timestamp>,
}
