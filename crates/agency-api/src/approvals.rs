//! Approvals: the tool calls agents ask about.

use agency_core::status::ApprovalStatus;
use agency_core::{AgentId, HandlerId, Timestamp};
use serde::{Deserialize, Serialize};

/// A tool call an agent is about to make (the body of `/agent/tool-check`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRequest {
    /// Namespaced tool name: `bash`, `claude:Bash`, `mcp:SERVER/TOOL`,
    /// `repo_push`, …
    pub tool: String,
    #[serde(default)]
    pub args: serde_json::Value,
    /// The tool's read-only annotation, when it has one.
    #[serde(default)]
    pub read_only: Option<bool>,
}

/// One approval request: a tool call of a handler's agent that the policy
/// (or an `each_use` capability) said to ask about, bound to the handler,
/// the tool and the BLAKE3 hash of the arguments' canonical JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    pub id: agency_core::policy::ApprovalId,
    pub handler: HandlerId,
    /// The agent whose call raised the request.
    pub agent: AgentId,
    pub tool: String,
    pub args_hash: String,
    /// The arguments as canonical JSON.
    pub args: String,
    /// Why the call was flagged.
    pub reason: String,
    pub status: ApprovalStatus,
    /// Approved for every identical call of this handler, not just one.
    pub always: bool,
    pub created_at: Timestamp,
    pub decided_at: Option<Timestamp>,
    /// Who decided ("user").
    pub decided_by: Option<String>,
    pub deny_reason: Option<String>,
    pub consumed_at: Option<Timestamp>,
}
