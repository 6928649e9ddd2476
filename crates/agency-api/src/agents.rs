//! `GET /v1/agents`: the live agents and the most recent runs.

use agency_core::{AgentId, HandlerId, Timestamp};
use serde::{Deserialize, Serialize};

/// `GET /v1/agents`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AgentsView {
    pub live: Vec<Agent>,
    pub recent: Vec<Agent>,
}

/// One agent: a run of a handler's agent process (or a minted token).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Agent {
    pub id: AgentId,
    pub handler: HandlerId,
    pub started_at: Timestamp,
    pub ended_at: Option<Timestamp>,
    /// Why it ended (exited, force_stopped, reaped, …).
    pub end_reason: Option<String>,
}

/// A freshly minted token: shown once, never stored in clear.
#[derive(Clone, Serialize, Deserialize)]
pub struct MintedToken {
    pub token: String,
    pub agent: AgentId,
    pub handler: HandlerId,
}

/// A handler's model upstream: its own, and the one its agents get.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HandlerModel {
    pub handler: HandlerId,
    /// Set on this handler (`None`: inherited or the runtime's).
    pub own: Option<String>,
    /// What its agents use: its own, else its nearest boss's (`None`: the
    /// runtime's `upstream`).
    pub effective: Option<String>,
    /// Where `effective` was set (this handler or a boss).
    pub set_on: Option<HandlerId>,
}

/// One run's captured output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunLog {
    pub agent: AgentId,
    pub handler: HandlerId,
    /// Whether output was captured (false for runs that ended before the
    /// daemon kept logs, or were reaped after a daemon restart).
    pub captured: bool,
    /// The output as text (invalid UTF-8 replaced). Agent output is
    /// untrusted: print it with control characters made visible.
    pub text: String,
}

/// `GET /v1/runs/{agent}/log/stream`: one piece of a followed run's output
/// (the data of one Server-Sent Event; `agency logs RUN --follow --json`
/// prints one a line). Redacted like the stored log; untrusted text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunLogChunk {
    pub agent: AgentId,
    pub text: String,
}

/// The last event (`event: end`) of a followed run's stream: the run has
/// ended and everything it wrote was sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FollowEnd {
    pub agent: AgentId,
    /// What the follower should know, e.g. that no transcript was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// A handler's keep-warm time: the settings and the one that holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeepWarmView {
    pub handler: HandlerId,
    /// The user's setting (`0`: off).
    pub user_ms: Option<u64>,
    /// Its organisation's `memory.keepWarm`.
    pub org_ms: Option<u64>,
    /// Whether it is an organisation's executive handler.
    pub executive: bool,
    /// What its agents get (`0`: they exit when their work is done).
    pub effective_ms: u64,
    /// Where `effective_ms` comes from.
    pub source: KeepWarmSource,
}

impl std::fmt::Debug for MintedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the secret itself (logs end up in places).
        f.debug_struct("MintedToken")
            .field("agent", &self.agent)
            .field("handler", &self.handler)
            .finish_non_exhaustive()
    }
}

/// One agent run as the interfaces show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunView {
    pub agent: AgentId,
    pub handler: HandlerId,
    pub started_at: Timestamp,
    pub ended_at: Option<Timestamp>,
    /// Why it ended (exited, killed, stalled: …, reaped: …).
    pub end_reason: Option<String>,
    /// Wall-clock milliseconds from start to end (to now while live).
    pub runtime_ms: i64,
    pub live: bool,
    /// `Some(true)` ended normally, `Some(false)` not (see `ended_how`),
    /// `None` still live or unknown (an attached client, an old record).
    pub normal: Option<bool>,
    /// How it ended when that was not normal.
    pub ended_how: Option<String>,
    /// The runtime (`builtin`, `claude-code`, `command`); `None` for an
    /// attached MCP client.
    pub runtime: Option<String>,
    pub prompt_version: Option<i64>,
    pub prompt_hash: Option<String>,
    pub exit_status: Option<i64>,
    pub tool_calls: Option<i64>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    /// The transcript's blob (user only: `agency transcript`).
    pub transcript: Option<String>,
    /// The branches this run had the daemon push (`repo_push`), as their
    /// audit-log lines, oldest first; at most `MAX_PUSHES_SHOWN`. Filled
    /// in for one run only (a listing stays one query).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pushes: Vec<String>,
}

/// How the previous agent of a handler ended, for the next one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PreviousRun {
    pub agent: AgentId,
    pub started_at: Timestamp,
    pub ended_at: Option<Timestamp>,
    pub ended_how: String,
}

/// Where a handler's keep-warm time comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum KeepWarmSource {
    /// `agency keep-warm` set it for this handler.
    #[serde(rename = "user")]
    User,
    /// The organisation's agent declares it (`memory.keepWarm`).
    #[serde(rename = "org")]
    Org,
    /// `agents.keep_warm_executive_ms`: the handler is an executive.
    #[serde(rename = "executive default")]
    ExecutiveDefault,
    /// `agents.keep_warm_ms`.
    #[serde(rename = "default")]
    Default,
}
