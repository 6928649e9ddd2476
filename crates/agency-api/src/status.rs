//! `GET /v1/status`: the daemon, its home and a count of what it holds.

use agency_core::{HandlerId, Timestamp};
use serde::{Deserialize, Serialize};

/// `GET /v1/status`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StatusView {
    pub version: String,
    pub home: String,
    pub addr: String,
    pub pid: u32,
    pub root_handler: Option<HandlerId>,
    pub counts: Counts,
    /// `agents.runtime`: `none` means no agent is ever started, so nothing
    /// answers mail until one is configured.
    #[serde(default)]
    pub runtime: String,
    /// Whether agents run confined: `on`, `off` (`agents.sandbox = "off"`,
    /// agents run unconfined) or `unavailable: CAUSE` (none can start).
    #[serde(default)]
    pub sandbox: String,
    /// With the sandbox on: the limits every agent runs under and what
    /// keeps each; empty otherwise.
    #[serde(default)]
    pub limits: Vec<LimitView>,
    /// Every paused budget: no agent starts in its handler's subtree until
    /// the user raises the limit or resumes it.
    #[serde(default)]
    pub paused: Vec<PausedView>,
    /// On a store several daemons share: this daemon's name as a lease
    /// owner (`host:home`); absent on a store of its own.
    #[serde(default)]
    pub lease_owner: Option<String>,
    /// On a shared store: every daemon holding handlers' leases now, by
    /// owner (this one included when it holds any).
    #[serde(default)]
    pub daemons: Vec<DaemonLeasesView>,
}

/// One daemon's unexpired leases on a shared store (`StatusView::daemons`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DaemonLeasesView {
    /// The daemon, as a lease owner: `host:home`.
    pub owner: String,
    /// Handlers whose work it holds.
    pub handlers: i64,
    /// When the last of its leases expires unless renewed (the database's
    /// clock, ms since the Unix epoch).
    pub expires_at: Timestamp,
}

/// How much the home holds (`StatusView::counts`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub handlers_active: i64,
    pub outcomes_open: i64,
    pub agents_live: i64,
    pub files: i64,
    /// Active handlers marked stalled (no agent is started for them until
    /// new mail arrives).
    #[serde(default)]
    pub handlers_stalled: i64,
}

/// A paused budget that holds a handler (its own or one above it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PausedView {
    /// The handler whose budget is paused (the handler itself or an
    /// ancestor): what `agency resume` and `agency budget set` name.
    pub by: HandlerId,
    /// Which limit was reached, or [`PAUSED_BY_USER`] (and the user's
    /// note) for `agency pause`.
    pub reason: String,
    pub since: Timestamp,
}

/// The reason of a pause made by hand (`agency pause`) starts with this; a
/// note may follow after `: `.
pub const PAUSED_BY_USER: &str = "paused by the user";

impl PausedView {
    /// Whether the user paused it by hand (rather than a reached limit).
    pub fn by_hand(&self) -> bool {
        self.reason.starts_with(PAUSED_BY_USER)
    }
}

/// One resource limit of every confined agent (`StatusView::limits`):
/// how much, of what, for which processes, kept by what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitView {
    pub resource: LimitResource,
    /// In the unit `resource` names.
    pub value: u64,
    pub scope: LimitScope,
    /// What keeps it: `cgroup v1 memory`, `cgroup v2 pids`,
    /// `RLIMIT_DATA`, …
    pub enforced_by: String,
}

/// What a [`LimitView`] bounds, with its unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitResource {
    MemoryMib,
    Processes,
    CpuSeconds,
    FileSizeMib,
    OpenFiles,
}

/// Whom a [`LimitView`] bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitScope {
    /// The agent and all its descendants together.
    AgentTree,
    /// Each process alone.
    Process,
}

impl LimitView {
    /// `memory 8192 MiB per agent tree (cgroup v1 memory)`.
    pub fn describe(&self) -> String {
        let v = self.value;
        let what = match self.resource {
            LimitResource::MemoryMib => format!("memory {v} MiB"),
            LimitResource::Processes => format!("processes {v}"),
            LimitResource::CpuSeconds => format!("CPU time {v} s"),
            LimitResource::FileSizeMib => format!("file size {v} MiB"),
            LimitResource::OpenFiles => format!("open files {v}"),
        };
        let scope = match self.scope {
            LimitScope::AgentTree => "per agent tree",
            LimitScope::Process => "per process",
        };
        format!("{what} {scope} ({})", self.enforced_by)
    }
}
