//! The operations of Agency: every one is a permission check plus one store
//! transaction that includes its audit records.
//!
//! This is the only layer that decides who may do what (asking
//! `agency_core` for the rules, with facts read inside the same
//! transaction). Interfaces — MCP, REST, CLI — are thin adapters that pass
//! the caller's [`Principal`](agency_core::Principal), which they derive from
//! the caller's token; nothing here reads identity from anywhere else.
//!
//! Operations no caller asks for (the daemon's scheduler, supervisor,
//! metering, retention, reloads) are methods of [`System`], the handle
//! [`ServiceBuilder::build`] returns once; interfaces acting for a caller
//! are given the [`Service`] alone.
//!
//! Methods take `&self` and block on the store; async callers run them on a
//! blocking thread. Domain events are published after commit on
//! [`Service::subscribe`].

mod access;
mod agents;
mod approvals;
mod audit;
mod budgets;
mod builder;
mod calls;
mod clock;
mod declared;
mod duration;
mod egress;
mod error;
mod event_log;
mod events;
mod gc;
mod kb;
pub mod lessons;
mod mail;
mod mcp_pins;
mod memory;
mod models;
mod orgs;
mod pages;
mod permissions;
pub mod pipelines;
mod problems;
mod quotas;
mod read_audit;
mod render;
mod repo_push;
mod runs;
mod service;
mod tree;
mod views;
mod warm;
pub mod wire;

pub use agency_store::OrgAgentStatus;
pub use agency_store::OrgMessageStatus;
pub use agency_store::PinChangeStatus;
pub use agency_store::{ApprovalRow, ApprovalStatus};
pub use agency_store::{BudgetLimits, BudgetPause, BudgetRow, BudgetSpend, ReservedTotals};
pub use agency_store::{
    CompactionStatus, MemoryChangeRow, MemoryCompactionRow, MemoryCounts, MemoryState,
};
pub use agency_store::{ModelCallRow, TokenUsage, UsageTotals};
pub use agents::leases::{HeldLease, LeaseSpec};
pub use agents::spawn::{FIRST_MESSAGE_SUBJECTS, PreparedSpawn, SpawnRequest};
pub use agents::tokens::{MintedToken, TokenIdentity};
pub use approvals::{Admission, ApprovalView, EACH_USE, ToolCallRequest, args_hash};
pub use budgets::metering::{
    CostNode, MAX_COST_HANDLERS, MeterBatch, ModelCallRequest, ModelCallResult, ModelReservation,
};
pub use budgets::{BudgetNode, PauseReport, ResumeReport};
pub use builder::ServiceBuilder;
pub use calls::{CallAnswer, CallRequest, DEFAULT_STEPS, MAX_STEPS};
pub use clock::{Clock, ManualClock, SystemClock};
pub use egress::EgressDecision;
pub use error::ServiceError;
pub use event_log::EventQuery;
pub use event_log::steps::{ToolStep, args_digest};
pub use events::Event;
pub use gc::GcReport;
pub use mcp_pins::{McpPinChange, McpPinView, McpPinsReport, PinVerdict, PinnedTool};
pub use memory::compact::CondenseReport;
pub use memory::recall::{RECALL_HEADING, RECALL_MAX};
pub use memory::{
    CompactionView, MAX_MEMORY_BYTES, MAX_MEMORY_TAGS, MEMORY_KINDS, MemorySearch, MemoryStatus,
    MemoryView,
};
pub use models::HandlerModel;
pub use orgs::keys::{MintedOrgKey, OrgCaller, OrgKeyView};
pub use orgs::messages::{
    MAX_ORG_MESSAGE_BYTES, OrgMessageView, PENDING_RETRY_AFTER_SECS, THREAD_BYTES, THREAD_TURNS,
};
pub use orgs::plan::{AgentAction, AgentChange, CapAction, CapChange, OrgPlan};
pub use orgs::tools::{AGENCY_MCP_TOOL_NAMES, MAX_TOOL_TIMEOUT_MS};
pub use orgs::{OrgAgentView, OrgDown, OrgView};
pub use problems::TickReport;
pub use repo_push::RepoPush;
pub use runs::follow::{RunFollow, transcript_event};
pub use runs::logs::RunLog;
pub use runs::views::{PreviousRun, RunView};
pub use runs::{RunOutcome, RunReport};
pub use service::settings::{
    Declared, Embedder, MemoryConfig, OrgApiLimits, Retention, ServiceConfig, Watch,
};
pub use service::{Service, System};
pub use tree::reopen::ReopenReport;
pub use views::*;
pub use warm::{KeepWarmDefaults, KeepWarmSetting, KeepWarmView, MAX_KEEP_WARM_MS, MailHeader};

pub type Result<T, E = ServiceError> = std::result::Result<T, E>;
