//! What operations take and return: plain data for the interfaces to
//! serialize.

use agency_core::access::FileKind;
use agency_core::{
    AgentId, CapabilityId, FileId, HandlerId, Level, MailTarget, MessageId, OutcomeAccess,
    OutcomeId, OutcomeStatus, Resource, Timestamp,
};
pub use agency_store::{
    AgentRow, AgentRunRow, BlobId, CapOrigin, CapabilityRow, FsckProblem, FsckReport,
    HandlerStatus, KbAction, KbAuditRow, LogEntryRow, OutcomeEventRow, OutcomeRow, StoreCounts,
};
use serde::{Deserialize, Serialize};

/// A KB file as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileInfo {
    pub id: FileId,
    pub kind: FileKind,
    pub description: String,
    /// The caller's level.
    pub level: Level,
    pub latest_version: i64,
}

/// A KB file's content at one version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileContent {
    pub id: FileId,
    pub kind: FileKind,
    pub description: String,
    pub version: i64,
    pub hash: BlobId,
    pub created_at: Timestamp,
    #[serde(skip, default)]
    pub content: Vec<u8>,
}

impl FileContent {
    /// The content as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.content).into_owned()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionInfo {
    pub file: FileId,
    pub version: i64,
    pub hash: BlobId,
    pub size: i64,
    pub created_at: Timestamp,
    pub handler: Option<HandlerId>,
    pub agent: Option<AgentId>,
}

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

impl From<&OutcomeRow> for OutcomeBrief {
    fn from(o: &OutcomeRow) -> Self {
        OutcomeBrief {
            id: o.id,
            title: o.title.clone(),
            status: o.status,
            priority: o.priority,
            responsible: o.responsible,
            perpetual: o.perpetual,
            process_inbox: o.process_inbox,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeView {
    pub outcome: OutcomeRow,
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
    pub history: Vec<OutcomeEventRow>,
    /// How many events the whole history holds.
    #[serde(default)]
    pub history_total: i64,
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

/// An outcome history event with its sequence number (a paging cursor).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryEvent {
    pub seq: i64,
    #[serde(flatten)]
    pub event: OutcomeEventRow,
}

/// A handler audit log entry with its sequence number (a paging cursor).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEntry {
    pub seq: i64,
    #[serde(flatten)]
    pub entry: LogEntryRow,
}

/// A paused budget that holds a handler (its own or one above it): the
/// fact `agency handlers`, `orgs`, `status` and outside callers show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PausedView {
    /// The handler whose budget is paused (the handler itself or an
    /// ancestor): what `agency resume` and `agency budget set` name.
    pub by: HandlerId,
    /// Which limit was reached.
    pub reason: String,
    pub since: Timestamp,
}
