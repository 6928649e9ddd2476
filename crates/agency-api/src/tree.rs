//! Outcomes and handlers as clients see them: briefs, subtrees, the
//! reports of delegating, finishing and stopping, and the requests that
//! create and change them.

use agency_core::status::CapOrigin;
use agency_core::{AgentId, CapabilityId, HandlerId, Level, OutcomeId, OutcomeStatus, Resource};
use agency_core::{OutcomeAccess, Timestamp};
use serde::{Deserialize, Serialize};

use crate::PausedView;
use crate::open_enum::open_enum;
use agency_core::FileId;
use agency_core::status::HandlerStatus;

/// One line about an outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeBrief {
    pub id: OutcomeId,
    pub title: String,
    pub status: OutcomeStatus,
    pub priority: i64,
    pub responsible: HandlerId,
    pub perpetual: bool,
    pub process_inbox: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subtree {
    pub root: OutcomeId,
    pub outcomes: Vec<OutcomeBrief>,
    pub edges: Vec<(OutcomeId, OutcomeId)>,
    /// More descendants exist than were returned.
    pub truncated: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewOutcome {
    pub title: String,
    #[serde(default)]
    pub description: String,
    pub parents: Vec<OutcomeId>,
    #[serde(default)]
    pub priority: i64,
}

/// Fields to change; `None` leaves a field as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeUpdate {
    pub title: Option<String>,
    pub description: Option<String>,
    pub priority: Option<i64>,
    /// `open` or `blocked` (with `reason`).
    pub status: Option<OutcomeStatus>,
    pub reason: Option<String>,
    /// The complete new set of parents.
    pub parents: Option<Vec<OutcomeId>>,
}

/// What completing or closing an outcome did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinishReport {
    pub outcome: OutcomeId,
    pub status: OutcomeStatus,
    pub revoked: Vec<CapabilityId>,
    /// Handlers retired because their root outcome finished.
    pub retired_handlers: Vec<HandlerId>,
    /// Agents whose processes the daemon must now kill.
    pub agents_to_kill: Vec<AgentId>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantRequest {
    pub resource: Resource,
    pub level: Level,
    #[serde(default)]
    pub delegatable: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Delegation {
    pub handler: HandlerId,
    pub capabilities: Vec<CapabilityId>,
    /// Outcomes whose responsible handler moved to the new handler.
    pub outcomes_moved: u64,
    /// The handler existed (deactivated by an earlier force-stop) and was
    /// brought back with its state document and audit log.
    pub reactivated: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopReport {
    /// The stopped handler and every active handler below it.
    pub handlers: Vec<HandlerId>,
    /// Agents whose processes the daemon must now kill.
    pub agents_to_kill: Vec<AgentId>,
    /// The handler that re-owns the reclaimed outcomes.
    pub new_owner: HandlerId,
    pub outcomes_reclaimed: u64,
    pub revoked: Vec<CapabilityId>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandlerView {
    pub id: HandlerId,
    pub boss: Option<HandlerId>,
    pub status: HandlerStatus,
    /// The root outcome's title.
    pub title: String,
    pub state_doc: FileId,
    pub audit_log: FileId,
    pub inbox_depth: i64,
    pub live_agent: Option<AgentId>,
    pub has_work: bool,
    /// Why the handler is marked stalled, if it is: no agent is started
    /// for it until new mail arrives (or it is force-stopped).
    #[serde(default)]
    pub stalled: Option<String>,
    /// The paused budget (its own or one above it) that keeps agents of
    /// this handler from starting, if one does.
    #[serde(default)]
    pub paused: Option<PausedView>,
}

/// One page of a listing bounded in rows and bytes (see `pages.rs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Page<T, C> {
    pub items: Vec<T>,
    /// Pass as `after` to get the next page; `None` when this is the last.
    pub next: Option<C>,
}

/// What reopening an outcome did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReopenReport {
    pub outcome: OutcomeId,
    pub status: OutcomeStatus,
    /// The handler responsible for the outcome now.
    pub responsible: HandlerId,
    /// Outcomes moved from retired handlers to `responsible`.
    pub outcomes_reclaimed: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeEvent {
    pub outcome: OutcomeId,
    pub at: Timestamp,
    /// `None` for the user or Agency.
    pub handler: Option<HandlerId>,
    pub agent: Option<AgentId>,
    pub action: OutcomeAction,
    pub detail: String,
}

open_enum! {
    /// What an outcome history event records ([`OutcomeEvent::action`]);
    /// the detail says more (what changed, the rationale, to whom).
    pub enum OutcomeAction {
        /// Made by an agent or the user, or stood up by `agency up`.
        Created = "created",
        /// Made by Agency itself: the root outcome at bootstrap, a Process
        /// Inbox outcome when mail arrives.
        SystemCreated = "system:created",
        /// Title, description, priority, status or parents changed.
        Updated = "updated",
        /// Its handler asked its boss to verify and complete it.
        CompletionRequested = "completion_requested",
        Completed = "completed",
        Closed = "closed",
        /// Set back to open after it was completed or closed.
        Reopened = "reopened",
        /// Given to a new underling handler.
        Delegated = "delegated",
        /// Taken back by the boss when the handler it was delegated to was
        /// force-stopped.
        Reclaimed = "reclaimed",
        /// A standing agent's root moved under its new boss by `agency up`.
        Moved = "moved",
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capability {
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

/// One entry of a handler's audit log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    pub handler: HandlerId,
    pub at: Timestamp,
    /// `None` for entries Agency writes itself.
    pub agent: Option<AgentId>,
    pub summary: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeView {
    pub outcome: Outcome,
    /// What the caller may do with it.
    pub access: OutcomeAccess,
    /// Immediate parents and children the caller may see.
    pub parents: Vec<OutcomeBrief>,
    pub children: Vec<OutcomeBrief>,
    /// The handler whose root this outcome is, if it was delegated.
    pub handler: Option<HandlerId>,
    /// The newest events (oldest first, at most
    /// `agency_core::render::HISTORY_SHOWN` and the page byte budget);
    /// page through all of them with `outcome_history`.
    pub history: Vec<OutcomeEvent>,
    /// How many events the whole history holds.
    #[serde(default)]
    pub history_total: i64,
}

/// An outcome history event with its sequence number (a paging cursor).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEvent {
    pub seq: i64,
    #[serde(flatten)]
    pub event: OutcomeEvent,
}

/// A handler audit log entry with its sequence number (a paging cursor).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEntry {
    pub seq: i64,
    #[serde(flatten)]
    pub entry: AuditEntry,
}
