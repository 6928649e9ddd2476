//! The small answers of the REST API's actions: what a send, an
//! acknowledgement, a grant, a revocation or a prefix resolution did.
//! Fields are in the order clients have always read them (several of
//! these were JSON objects with sorted keys before they had a type).

use agency_core::{AgentId, CapabilityId, FileId, HandlerId, MessageId, OrgKeyId};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `POST /v1/shutdown`: the daemon is stopping.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShuttingDown {
    pub pid: u32,
    pub shutting_down: bool,
}

/// `POST /v1/mail`: the message sent and the handler it went to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sent {
    pub message: MessageId,
    pub to: HandlerId,
}

/// `POST /v1/inbox/ack`: how many messages were acknowledged now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Acked {
    pub acked: usize,
}

/// `POST /v1/handlers/{id}/capabilities`: the capability granted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapabilityGranted {
    pub capability: CapabilityId,
}

/// `DELETE /v1/capabilities/{id}`: the capability and every one derived
/// from it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapabilitiesRevoked {
    pub revoked: Vec<CapabilityId>,
}

/// `DELETE /v1/tokens/{agent}`: whether a live token was revoked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRevoked {
    pub revoked: bool,
}

/// `DELETE /v1/agency/keys/{id}`: whether a live key was revoked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRevoked {
    pub id: OrgKeyId,
    pub revoked: bool,
}

/// `GET /v1/resolve/{kind}/{prefix}`: the one full id the prefix names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resolved {
    pub id: String,
}

/// `POST /v1/kb`: the new file and its first version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileCreated {
    pub id: FileId,
    pub version: i64,
}

/// `GET /v1/runs/{agent}/transcript`: one event per line of the runtime's
/// JSONL transcript, as the runtime wrote it (a line that is not JSON comes
/// back as `{"unparsed": "<line>"}`, so nothing is dropped).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transcript {
    pub agent: AgentId,
    pub bytes: usize,
    pub events: Vec<Value>,
}

/// `GET /v1/runs/{agent}/prompt`: what a run was told when it started.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunPrompt {
    pub agent: AgentId,
    /// The system prompt, exactly as the runtime got it.
    pub system_prompt: String,
    /// The first user message.
    pub first_message: String,
}

/// `POST /v1/reload` (and SIGHUP): each setting whose value in the files
/// differs from the one in force, and what became of it. Empty: nothing
/// changed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReloadView {
    pub changes: Vec<ReloadChange>,
}

/// One changed setting (`sandbox.toolchains`, `models.main`,
/// `policy.toml`, …).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReloadChange {
    pub setting: String,
    pub status: ReloadStatus,
    /// From when it holds (applied) or why it waits (restart).
    pub note: String,
}

/// Whether a changed setting holds now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReloadStatus {
    #[serde(rename = "applied")]
    Applied,
    /// Read only at start.
    #[serde(rename = "needs a restart")]
    NeedsRestart,
}

impl std::fmt::Display for ReloadStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(match self {
            ReloadStatus::Applied => "applied",
            ReloadStatus::NeedsRestart => "needs a restart",
        })
    }
}

/// `POST /agent/tool-check`: whether a tool call may run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCheck {
    /// The approval request it made or used, if any.
    pub approval: Option<agency_core::policy::ApprovalId>,
    pub decision: ToolDecision,
    /// The text for the agent.
    pub message: String,
    pub reason: String,
}

/// `POST /agent/tool-done`: how a runtime's own tool call ended, as the
/// runtime reports it (Claude Code's `PostToolUse` hook, the built-in
/// loop after a workspace tool). Logged as `tool.ended`: the agent's own
/// word, next to the `tool.called` Agency saw at the call's admission.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDone {
    /// The name the call was admitted under (`bash`, `claude:Bash`).
    pub tool: String,
    /// The call's arguments, digested as at admission (not kept).
    #[serde(default)]
    pub args: Value,
    pub ok: bool,
    /// What went wrong, if it failed (cut to a few hundred characters).
    #[serde(default)]
    pub error: Option<String>,
    /// How long it ran, if the runtime measured it.
    #[serde(default)]
    pub duration_ms: Option<u64>,
    /// The runtime's id of the call, if it has one.
    #[serde(default)]
    pub call_id: Option<String>,
}

/// A tool-check's decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolDecision {
    Allow,
    /// Waits for the user's approval.
    Pending,
    Deny,
}
