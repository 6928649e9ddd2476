//! Agency's types on the wire: what the REST API answers, what the CLI
//! prints with `--json` and what MCP tools return to agents. The daemon
//! and the MCP endpoint convert the service's views into these types
//! (`agency-service`'s `wire` module) and the CLI reads them back; nothing
//! here knows the store or the service, so renaming a column or a view's
//! field cannot change what clients and agents read. A change here is a
//! change of the API: the golden tests in `agency-daemon/tests/suite/golden`
//! show it.

mod agents;
mod approvals;
mod budgets;
mod calls;
mod dashboard;
mod events;
mod kb;
mod lessons;
mod mail;
mod mcp;
mod mcp_pins;
mod memory;
mod open_enum;
mod orgs;
mod pipelines;
mod problems;
mod records;
mod replies;
mod status;
mod tree;

pub use agents::{
    Agent, AgentsView, FollowEnd, HandlerModel, KeepWarmSource, KeepWarmView, MintedToken,
    PreviousRun, RunLog, RunLogChunk, RunView,
};
pub use approvals::{Approval, ToolCallRequest};
pub use budgets::{Budget, BudgetNode, CostNode, HandlerCost, PauseReport, ResumeReport};
pub use calls::{CallReplied, CallSent, CallView, SchemaIssue};
pub use dashboard::{
    CostBreakdown, CostRow, DashboardLogin, DashboardSession, HandlerTitle, NeedsYou, OrgCard,
    OrgPage, PausedSubtree, RunDetail, StalledHandler,
};
pub use events::{Event, EventKind, EventsPage};
pub use kb::{FileInfo, FileMeta, FileText, KbAuditEntry, VersionInfo};
pub use lessons::{
    LessonCounters, LessonDetail, LessonEvent, LessonScope, LessonVersion, LessonView,
    LessonsExport,
};
pub use mail::{MailBody, MailHeader, MessageView};
pub use mcp::{
    AuditPage, AuditSubmitted, CapabilityList, ContentEncoding, Granted, HandlerOutcomes,
    InboxPage, KbAuditLog, KbCreated, KbFileContent, KbFilesPage, KbHistoryPage, MailAcked,
    MailScheduled, MailSent, MailWait, MemoryForgotten, MemoryHit, MemoryHits, MemoryStored,
    OutcomeChains, OutcomeCreated, OutcomeHistoryPage, RepoCloned, RepoPushed, RunsPage,
};
pub use mcp_pins::{McpPinChange, McpPinView, McpPinsReport, PinState};
pub use memory::{
    Compaction, CompactionView, CondenseReport, MemoryChange, MemoryChangeKind, MemoryCounts,
    MemoryStatus, MemoryView,
};
pub use orgs::{
    AgentAction, AgentChange, CapAction, CapChange, MintedOrgKey, OrgAgentView, OrgDown,
    OrgKeyView, OrgMessageView, OrgPlan, OrgView,
};
pub use pipelines::{
    PipelineRunSummary, PipelineRunView, PipelineScore, PipelineStageView, RunLessonEvent,
};
pub use problems::{Problem, ProblemKind};
pub use records::{FsckProblem, FsckReport, GcReport};
pub use replies::{
    Acked, CapabilitiesRevoked, CapabilityGranted, FileCreated, KeyRevoked, ReloadChange,
    ReloadStatus, ReloadView, Resolved, RunPrompt, Sent, ShuttingDown, TokenRevoked, ToolCheck,
    ToolDecision, ToolDone, Transcript,
};
pub use status::{
    Counts, DaemonLeasesView, LimitResource, LimitScope, LimitView, PAUSED_BY_USER, PausedView,
    StatusView,
};
pub use tree::{
    AuditEntry, Capability, Delegation, FinishReport, GrantRequest, HandlerView, HistoryEvent,
    LogEntry, NewOutcome, Outcome, OutcomeAction, OutcomeBrief, OutcomeEvent, OutcomeUpdate,
    OutcomeView, Page, ReopenReport, StopReport, Subtree,
};
