//! Row types: what the store keeps, in domain types. Backends convert these
//! to and from their own column types.

use agency_core::access::FileKind;
use agency_core::{
    AgentId, CapabilityId, FileId, HandlerId, Level, MailTarget, MessageId, OutcomeId,
    OutcomeStatus, Resource, Timestamp,
};

use crate::blob::BlobId;
pub use agency_core::status::{ApprovalStatus, CapOrigin, HandlerStatus, KbAction};
pub use agency_core::usage::{BudgetLimits, BudgetPause, BudgetSpend, TokenUsage, UsageTotals};

/// A KB file's identity and metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileRow {
    pub id: FileId,
    pub kind: FileKind,
    pub description: String,
    /// For state documents and audit logs: the handler they belong to.
    pub owner: Option<HandlerId>,
    pub created_at: Timestamp,
    /// `None` for the user or Agency itself.
    pub created_by: Option<HandlerId>,
    /// Number of the latest version (versions are `1..=latest_version`).
    pub latest_version: i64,
}

/// One version of a KB file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionRow {
    pub file: FileId,
    pub version: i64,
    pub hash: BlobId,
    pub size: i64,
    pub created_at: Timestamp,
    pub handler: Option<HandlerId>,
    pub agent: Option<AgentId>,
}

/// One entry of a KB file's access log. `handler == None` is the user (or
/// Agency itself when `agent` is also `None` and the action is a system write).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KbAuditRow {
    pub file: FileId,
    pub at: Timestamp,
    pub handler: Option<HandlerId>,
    pub agent: Option<AgentId>,
    pub action: KbAction,
    pub version: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutcomeRow {
    pub id: OutcomeId,
    pub title: String,
    pub description: String,
    pub status: OutcomeStatus,
    /// Blocked reason, or completion/closing rationale.
    pub status_reason: Option<String>,
    pub priority: i64,
    /// The root outcome: never completed, never "work".
    pub perpetual: bool,
    /// A handler's "Process Inbox" outcome, made by mail delivery.
    pub process_inbox: bool,
    pub responsible: HandlerId,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// One line of an outcome's audit history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutcomeEventRow {
    pub outcome: OutcomeId,
    pub at: Timestamp,
    /// `None` for the user or Agency.
    pub handler: Option<HandlerId>,
    pub agent: Option<AgentId>,
    pub action: String,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandlerRow {
    /// Equal to the handler's root outcome id.
    pub id: HandlerId,
    /// `None`: the user is the boss (the root handler).
    pub boss: Option<HandlerId>,
    pub status: HandlerStatus,
    pub state_doc: FileId,
    pub audit_log: FileId,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// A capability to insert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewCapability {
    pub holder: HandlerId,
    pub resource: Resource,
    pub level: Level,
    pub delegatable: bool,
    /// Revoked when this outcome is completed or closed.
    pub scope: Option<OutcomeId>,
    /// Revoked when that capability is revoked.
    pub derived_from: Option<CapabilityId>,
    /// `None`: the user or Agency.
    pub granted_by: Option<HandlerId>,
    pub origin: CapOrigin,
    pub created_at: Timestamp,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapabilityRow {
    pub id: CapabilityId,
    pub holder: HandlerId,
    pub resource: Resource,
    pub level: Level,
    pub delegatable: bool,
    pub scope: Option<OutcomeId>,
    pub derived_from: Option<CapabilityId>,
    pub granted_by: Option<HandlerId>,
    pub origin: CapOrigin,
    pub created_at: Timestamp,
    pub revoked_at: Option<Timestamp>,
}

/// Which capabilities to revoke; every capability derived from a selected
/// one (transitively) is revoked with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RevokeSelector {
    /// Live capabilities scoped to this outcome.
    ScopedTo(OutcomeId),
    /// Live capabilities held by any of these handlers.
    HeldBy(Vec<HandlerId>),
    /// Live mail capabilities whose target is one of these handlers.
    MailTo(Vec<HandlerId>),
    /// These capabilities.
    Ids(Vec<CapabilityId>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageRow {
    pub id: MessageId,
    /// The KB file holding the body.
    pub file: FileId,
    pub from: MailTarget,
    pub to: MailTarget,
    /// A short line for inbox listings.
    pub subject: String,
    pub created_at: Timestamp,
    pub deliver_at: Timestamp,
    pub delivered_at: Option<Timestamp>,
    pub acked_at: Option<Timestamp>,
    /// Why a deferred message was dropped when it fell due instead of being
    /// delivered (its `delivered_at`/`acked_at` are then the time it was
    /// dropped, which closes it; views show it as not delivered).
    pub dropped_reason: Option<String>,
    /// The message this one answers (delivered to its sender; migration 17).
    pub in_reply_to: Option<MessageId>,
    /// Written by Agency itself (a notice), in the name of `from`
    /// (migration 23): listings show it as from "agency".
    pub notice: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentRow {
    pub id: AgentId,
    pub handler: HandlerId,
    pub started_at: Timestamp,
    pub ended_at: Option<Timestamp>,
    /// Why it ended (exited, force_stopped, reaped, …).
    pub end_reason: Option<String>,
}

/// One entry of a handler's audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEntryRow {
    pub handler: HandlerId,
    pub at: Timestamp,
    /// `None` for entries Agency writes itself.
    pub agent: Option<AgentId>,
    pub summary: String,
}

/// A KB file that may be visible to a handler, with the facts needed to
/// decide its level (the decision itself is `agency_core::kb_access`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KbCandidate {
    pub file: FileRow,
    /// Highest live capability level the handler holds on the file.
    pub cap: Option<Level>,
    /// The file is a state document or audit log owned by the handler.
    pub owned: bool,
    /// The file is a state document or audit log of a direct underling.
    pub of_underling: bool,
    /// The file is an outcome in the handler's area (descendant of its root
    /// or ancestor of it).
    pub outcome_in_area: bool,
}

/// Counts for status displays.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreCounts {
    pub handlers_active: i64,
    pub outcomes_open: i64,
    pub agents_live: i64,
    pub files: i64,
    /// Active handlers marked stalled (no agent is started for them until
    /// new mail arrives).
    pub handlers_stalled: i64,
}

/// An agent's bearer token, stored by hash only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenRow {
    /// Hex BLAKE3 hash of the token.
    pub hash: String,
    pub agent: AgentId,
    pub handler: HandlerId,
    /// The agent's workspace directory, where `path` arguments resolve.
    pub workspace: Option<String>,
    pub created_at: Timestamp,
    pub revoked_at: Option<Timestamp>,
}

/// The kinds of id the CLI may abbreviate to a unique prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IdKind {
    Handler,
    Outcome,
    File,
    Agent,
    Message,
    /// A message an outside party (or `agency ask`) sent to an agency.
    OrgMessage,
    /// An agency's API key.
    OrgKey,
    Memory,
    MemoryCompaction,
    /// A lesson a pipeline learned.
    Lesson,
}

/// The process group of a spawned agent, as the supervisor recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentProcessRow {
    pub agent: AgentId,
    /// The group's id (the pid of its leader, the runtime's process).
    pub pgid: i64,
    /// The leader's start time in clock ticks since boot: with `pgid` it
    /// tells this process from a later one that reused the number.
    pub started: i64,
}

/// What the supervisor records about one agent's run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentRunRow {
    pub agent: AgentId,
    /// `builtin`, `claude-code`, …
    pub runtime: String,
    /// Hash of the exact system prompt the agent got.
    pub prompt_hash: String,
    pub exit_status: Option<i64>,
    pub tool_calls: Option<i64>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    /// The transcript, kept in the blob store.
    pub transcript: Option<BlobId>,
    /// `agency_core::prompt::PROMPT_VERSION` of the prompt it got.
    pub prompt_version: Option<i64>,
    /// How the run ended when that was not normal (crashed, killed,
    /// stalled, reaped, restarted for new MCP servers); `None` when it
    /// ended normally or has not ended.
    pub ended_how: Option<String>,
}

impl AgentRunRow {
    /// The record of a run just spawned: nothing about its end yet.
    pub fn spawned(agent: AgentId, runtime: &str, prompt_hash: &str) -> AgentRunRow {
        AgentRunRow {
            agent,
            runtime: runtime.to_owned(),
            prompt_hash: prompt_hash.to_owned(),
            exit_status: None,
            tool_calls: None,
            input_tokens: None,
            output_tokens: None,
            transcript: None,
            prompt_version: None,
            ended_how: None,
        }
    }
}

/// An agent with its run record (none for an attached MCP client, or a
/// run the daemon never got to record).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentWithRun {
    pub agent: AgentRow,
    pub run: Option<AgentRunRow>,
}

/// One model call forwarded by the daemon's gateway, with its usage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelCallRow {
    pub at: Timestamp,
    pub handler: HandlerId,
    pub agent: AgentId,
    /// The `[models.NAME]` it went to.
    pub upstream: String,
    /// `anthropic` or `openai`.
    pub api: String,
    /// The model the request named.
    pub model: String,
    pub stream: bool,
    /// The upstream's HTTP status (0: not reached).
    pub status: i64,
    pub usage: TokenUsage,
    /// From the price table at the time of the call.
    pub cost_micro_usd: i64,
    /// No price was known for `model`: `cost_micro_usd` is 0, not free.
    pub unpriced: bool,
    /// Charged at its reservation: the answer's final usage was never read.
    pub estimated: bool,
}

/// The budget set on one handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetRow {
    pub handler: HandlerId,
    pub limits: BudgetLimits,
    pub set_at: Timestamp,
    /// The boss that carved it out of its own budget on delegation;
    /// `None`: the user set it.
    pub carved_by: Option<HandlerId>,
    /// Set when a limit was reached, until a limit is raised or the user
    /// resumes the subtree.
    pub paused: Option<BudgetPause>,
    /// One bit per kind whose 80% notice was shown to an agent.
    pub warned: i64,
}

/// The worst case of one model call in flight, held until it settles.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetReservationRow {
    pub at: Timestamp,
    /// The calling agent's handler (the reservation counts against it and
    /// every ancestor, as part of their subtrees).
    pub handler: HandlerId,
    pub agent: AgentId,
    pub tokens: i64,
    pub micro_usd: i64,
}

/// The sum of reservations in flight over some handlers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReservedTotals {
    pub calls: i64,
    pub tokens: i64,
    pub micro_usd: i64,
}

/// One approval request: a tool call of a handler's agent that the policy
/// (or an `each_use` capability) said to ask about, bound to the handler,
/// the tool and the BLAKE3 hash of the arguments' canonical JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalRow {
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
