//! What operations take and return: plain data for the interfaces to
//! serialize.

use agency_core::access::FileKind;
use agency_core::{FileId, Timestamp};
pub use agency_store::{
    AgentRow, AgentRunRow, BlobId, CapOrigin, CapabilityRow, FsckProblem, FsckReport,
    HandlerStatus, KbAction, KbAuditRow, LogEntryRow, OutcomeEventRow, OutcomeRow, StoreCounts,
};

pub use agency_api::{
    Delegation, FileInfo, FinishReport, GrantRequest, HandlerView, HistoryEvent, LogEntry,
    MailBody, MessageView, NewOutcome, OutcomeBrief, OutcomeUpdate, OutcomeView, Page, PausedView,
    StopReport, Subtree, VersionInfo,
};

/// A KB file's content at one version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileContent {
    pub id: FileId,
    pub kind: FileKind,
    pub description: String,
    pub version: i64,
    pub hash: BlobId,
    pub created_at: Timestamp,
    pub content: Vec<u8>,
}

impl FileContent {
    /// The content as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.content).into_owned()
    }
}

/// The brief of an outcome row.
pub fn outcome_brief(o: &OutcomeRow) -> OutcomeBrief {
    {
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
