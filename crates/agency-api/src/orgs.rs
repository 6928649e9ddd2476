//! Organisations: their agents, keys, plans and messages from outside.

use crate::PausedView;
use agency_core::status::{HandlerStatus, OrgAgentStatus, OrgMessageStatus};
use agency_core::{AgentId, ConversationId, HandlerId, Level, OrgKeyId, OrgMessageId, Timestamp};
use serde::{Deserialize, Serialize};

/// A freshly minted key: the secret is shown once, never stored.
#[derive(Clone, Serialize, Deserialize)]
pub struct MintedOrgKey {
    pub id: OrgKeyId,
    pub agency: String,
    pub key: String,
    pub prefix: String,
}

/// A key as listed: never its secret nor its hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrgKeyView {
    pub id: OrgKeyId,
    pub agency: String,
    pub prefix: String,
    pub created_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<Timestamp>,
}

/// One message to an agency as its sender sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrgMessageView {
    pub id: OrgMessageId,
    pub agency: String,
    pub conversation: ConversationId,
    pub status: OrgMessageStatus,
    /// What the outside party wrote: in the user's listing
    /// (`agency conversations`) only; its sender knows it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The executive handler's answer, once it came.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    pub created_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_at: Option<Timestamp>,
    /// Pending while the agency is paused by its budget: no agent answers
    /// until the user raises the limit or resumes it. Only the fact: which
    /// budget and how much was spent are the user's business, not an
    /// outside caller's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
}

/// One agent of an applied organisation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrgAgentView {
    pub agent: String,
    pub agency: String,
    pub title: String,
    pub handler: HandlerId,
    pub executive: bool,
    pub status: OrgAgentStatus,
    /// The handler's status (a standing handler may be stopped by hand).
    pub handler_status: Option<HandlerStatus>,
    pub runtime: Option<String>,
    /// The paused budget that holds this agent's handler, if one does.
    #[serde(default)]
    pub paused: Option<PausedView>,
}

/// One applied organisation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrgView {
    pub name: String,
    /// The top agency's executive agent's handler: the organisation's
    /// messages go there.
    pub executive: HandlerId,
    pub model_hash: String,
    pub applied_at: Timestamp,
    /// Set while it is down.
    pub retired_at: Option<Timestamp>,
    /// The paused budget that holds its executive handler (so nothing
    /// answers its messages), if one does.
    #[serde(default)]
    pub paused: Option<PausedView>,
    pub agents: Vec<OrgAgentView>,
}

/// What `agency down` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrgDown {
    pub org: String,
    /// Handlers deactivated (the organisation's and those they delegated to).
    pub handlers: Vec<HandlerId>,
    /// Agents ended (the daemon stops their processes).
    pub agents_to_kill: Vec<AgentId>,
}

/// What `agency up` does (or would do) to one agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentAction {
    Create,
    Update,
    Unchanged,
    /// Stood up before, retired since (removed, or `agency down`): it comes
    /// back with its handler, state document and history.
    Reactivate,
    Retire,
}

/// One agent in a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentChange {
    pub agent: String,
    pub agency: String,
    pub title: String,
    pub action: AgentAction,
    /// For `update` and `reactivate`: the fields of its definition that
    /// differ from the last applied one.
    pub fields: Vec<String>,
    /// `None` until created.
    pub handler: Option<HandlerId>,
    /// Its boss agent; `None`: the root handler (or retired).
    pub boss: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CapAction {
    Added,
    Removed,
}

/// One capability in a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapChange {
    /// An agent name, or `""` for the root handler.
    pub holder: String,
    /// `tool:NAME`, `egress:HOST`, `mcp_server:NAME`, `repo:NAME`, or
    /// `mail:@Agent` / `mail:@root` (messaging).
    pub resource: String,
    pub level: Level,
    pub change: CapAction,
    /// `tool`, `tool egress` (a tool's declared egress), `capability`,
    /// `reporting line` or `connection`.
    pub why: String,
}

/// The plan of `agency up` (and, applied, what it did).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrgPlan {
    pub org: String,
    /// True when nothing was written (`--plan`).
    pub plan_only: bool,
    /// Whether applying changes anything.
    pub changed: bool,
    /// The top executive agent's handler (`None` until created).
    pub executive: Option<HandlerId>,
    pub agents: Vec<AgentChange>,
    pub capabilities: Vec<CapChange>,
    pub warnings: Vec<String>,
}

impl std::fmt::Debug for MintedOrgKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MintedOrgKey")
            .field("id", &self.id)
            .field("agency", &self.agency)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}
