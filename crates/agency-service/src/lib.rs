//! The operations of Agency: every one is a permission check plus one store
//! transaction that includes its audit records.
//!
//! This is the only layer that decides who may do what (asking
//! `agency_core` for the rules, with facts read inside the same
//! transaction). Interfaces — MCP, REST, CLI — are thin adapters that pass
//! the caller's [`Principal`](agency_core::Principal), which they derive from
//! the caller's token; nothing here reads identity from anywhere else.
//!
//! Methods take `&self` and block on the store; async callers run them on a
//! blocking thread. Domain events are published after commit on
//! [`Service::subscribe`].

mod access;
mod agents;
mod approvals;
mod area;
mod audit;
mod budgets;
mod budgets_carve;
mod budgets_ledger;
mod clock;
mod declared;
mod egress;
mod error;
mod events;
mod gc;
mod handlers;
mod handoffs;
mod kb;
mod mail;
mod mcp_pins;
mod memory;
mod memory_compact;
mod memory_recall;
mod metering;
mod models;
mod org_apply;
mod org_keys;
mod org_messages;
mod org_plan;
mod org_prompt;
mod org_tools;
mod org_warnings;
mod orgs;
mod outcomes;
mod pages;
mod permissions;
mod processes;
mod quotas;
mod read_audit;
mod render;
mod reopen;
mod repo_push;
mod run_logs;
mod run_views;
mod runs;
mod service;
mod spawn_prep;
mod tokens;
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
pub use approvals::{Admission, ApprovalView, EACH_USE, ToolCallRequest, args_hash};
pub use budgets::{BudgetNode, PausedView, ResumeReport};
pub use clock::{Clock, ManualClock, SystemClock};
pub use declared::Declared;
pub use egress::EgressDecision;
pub use error::ServiceError;
pub use events::Event;
pub use gc::{GcReport, Retention};
pub use mcp_pins::{McpPinChange, McpPinView, McpPinsReport, PinVerdict, PinnedTool};
pub use memory::{
    CompactionView, Embedder, MAX_MEMORY_BYTES, MAX_MEMORY_TAGS, MEMORY_KINDS, MemoryConfig,
    MemorySearch, MemoryStatus, MemoryView,
};
pub use memory_compact::CondenseReport;
pub use memory_recall::{RECALL_HEADING, RECALL_MAX};
pub use metering::{CostNode, ModelCallRequest, ModelCallResult, ModelReservation};
pub use models::HandlerModel;
pub use org_keys::{MintedOrgKey, OrgCaller, OrgKeyView};
pub use org_messages::{
    MAX_ORG_MESSAGE_BYTES, OrgApiLimits, OrgMessageView, PENDING_RETRY_AFTER_SECS, THREAD_BYTES,
    THREAD_TURNS,
};
pub use org_plan::{AgentAction, AgentChange, CapAction, CapChange, OrgPlan};
pub use org_tools::{AGENCY_MCP_TOOL_NAMES, MAX_TOOL_TIMEOUT_MS};
pub use orgs::{OrgAgentView, OrgDown, OrgView};
pub use reopen::ReopenReport;
pub use repo_push::RepoPush;
pub use run_logs::RunLog;
pub use run_views::{PreviousRun, RunView};
pub use runs::{RunOutcome, RunReport};
pub use service::{Service, ServiceConfig};
pub use spawn_prep::{FIRST_MESSAGE_SUBJECTS, PreparedSpawn, SpawnRequest};
pub use tokens::{MintedToken, TokenIdentity};
pub use views::*;
pub use warm::{KeepWarmDefaults, KeepWarmSetting, KeepWarmView, MAX_KEEP_WARM_MS, MailHeader};

pub type Result<T, E = ServiceError> = std::result::Result<T, E>;
