//! `agency.toml`: the daemon's configuration. Unknown keys are refused so a
//! typo never silently does nothing.

use std::collections::BTreeMap;
use std::path::Path;

use agency_core::Limits;
use serde::{Deserialize, Serialize};

use crate::agency_api_config::AgencyApiConfig;
use crate::error::DaemonError;
use crate::mcp_servers::McpServerConfig;
use crate::models::{ModelUpstreamConfig, Price};
use crate::sandbox_config::SandboxConfig;
use crate::secrets::SecretSource;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub server: ServerConfig,
    pub limits: LimitsConfig,
    pub retention: RetentionConfig,
    pub agents: AgentsConfig,
    /// Repositories agents may clone (`repo_clone`), by name: a URL or a
    /// local path. A handler needs a capability on `repo:NAME`.
    pub repos: BTreeMap<String, String>,
    /// Secrets, by name: where each is read from at daemon start.
    pub secrets: BTreeMap<String, SecretSource>,
    /// Extra MCP servers, by name. A handler needs a capability on
    /// `mcp_server:NAME` for its agents to get one.
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
    /// The daemon's log file and agents' captured output.
    pub log: LogConfig,
    /// How the repo cache refreshes its mirrors.
    pub repos_cache: ReposCacheConfig,
    /// What agents may touch besides their own directory, and their
    /// resource limits (`agents.sandbox` switches the sandbox on or off).
    pub sandbox: SandboxConfig,
    /// What bounds outside callers of an agency's API, per key.
    pub agency_api: AgencyApiConfig,
    /// Model upstreams the gateway forwards to, by name (`/model/NAME`).
    pub models: BTreeMap<String, ModelUpstreamConfig>,
    /// Prices per model (USD per million tokens), over the defaults.
    pub prices: BTreeMap<String, Price>,
    /// Each handler's memory (issue 13): recall, condensation, limits and
    /// the optional embeddings endpoint.
    pub memory: crate::memory_config::MemorySettings,
    /// What the daemon warns about at start: deprecated settings it has
    /// rewritten (`models::route_direct_settings`). Not a key of the file.
    #[serde(skip)]
    pub notices: Vec<String>,
}

/// `[log]`: the daemon's log file (`logs/daemon.log` in the home) and the
/// bounds of each agent run's captured stdout/stderr.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// A `tracing` filter (`info`, `debug`, `info,agency_daemon=debug`, …);
    /// `RUST_LOG`, when set, takes precedence.
    pub level: String,
    /// `daemon.log` is rotated (to `daemon.log.1`, …) when it would grow
    /// past this many bytes.
    pub file_max_bytes: u64,
    /// Rotated files kept besides `daemon.log`.
    pub files_kept: u32,
    /// Of an agent run's output, the first this many bytes are kept …
    pub agent_log_head_bytes: usize,
    /// … and the last this many; what lies between is cut, and marked.
    pub agent_log_tail_bytes: usize,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            level: "info".to_owned(),
            file_max_bytes: 10 << 20,
            files_kept: 3,
            agent_log_head_bytes: 64 << 10,
            agent_log_tail_bytes: 1 << 20,
        }
    }
}

/// `[repos_cache]`: how the mirrors behind `repo_clone` are refreshed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReposCacheConfig {
    /// A `git` fetch (or first mirror clone) still running after this many
    /// seconds is killed and the clone fails, naming the repo.
    pub fetch_timeout_secs: u64,
    /// A mirror fetched less than this many seconds ago is cloned from as
    /// it is, without fetching again (0: fetch before every clone).
    pub refresh_interval_secs: u64,
}

impl Default for ReposCacheConfig {
    fn default() -> Self {
        ReposCacheConfig {
            fetch_timeout_secs: 300,
            refresh_interval_secs: 60,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// TCP port on 127.0.0.1; 0 picks a free one at each start (written to
    /// `daemon.json`). `agency init` pins one.
    pub port: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Largest KB file or message body accepted, in bytes.
    pub max_file_bytes: usize,
    /// Quotas per handler (the user is not bound by them).
    pub max_pending_deferred_per_handler: usize,
    pub max_outcomes_per_handler: usize,
    pub max_kb_files_per_handler: usize,
    pub max_handlers_per_subtree: usize,
    pub max_delegation_depth: usize,
    /// Hand-offs (mail between handlers, delegations) in one chain of work
    /// started by a message of the user.
    pub max_handoffs: usize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        let l = Limits::default();
        LimitsConfig {
            max_file_bytes: l.max_file_bytes,
            max_pending_deferred_per_handler: l.max_pending_deferred_per_handler,
            max_outcomes_per_handler: l.max_outcomes_per_handler,
            max_kb_files_per_handler: l.max_kb_files_per_handler,
            max_handlers_per_subtree: l.max_handlers_per_subtree,
            max_delegation_depth: l.max_delegation_depth,
            max_handoffs: l.max_handoffs,
        }
    }
}

impl LimitsConfig {
    /// The quota keys and values, for validation and messages.
    fn quotas(&self) -> [(&'static str, usize); 6] {
        [
            (
                "max_pending_deferred_per_handler",
                self.max_pending_deferred_per_handler,
            ),
            ("max_outcomes_per_handler", self.max_outcomes_per_handler),
            ("max_kb_files_per_handler", self.max_kb_files_per_handler),
            ("max_handlers_per_subtree", self.max_handlers_per_subtree),
            ("max_delegation_depth", self.max_delegation_depth),
            ("max_handoffs", self.max_handoffs),
        ]
    }
}

/// What `agency gc` and the automatic collection remove, and when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetentionConfig {
    /// Acknowledged mail is removed this many days after acknowledgement
    /// (0: kept forever).
    pub acked_mail_days: u32,
    /// A blob no row points at is removed only this long after it was last
    /// written.
    pub blob_grace_minutes: u32,
    /// The daemon collects garbage after start and then every this many
    /// hours (0: only `agency gc`).
    pub gc_interval_hours: u32,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig {
            acked_mail_days: 30,
            blob_grace_minutes: 60,
            gc_interval_hours: 24,
        }
    }
}

/// How the daemon runs agents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentsConfig {
    /// `none` (agents are not started; attach clients with `agency token
    /// mint`), `command` (the program in `[agents.command]`), `builtin`
    /// (`agency agent`, `[agents.builtin]`) or `claude-code` (`claude -p`,
    /// `[agents.claude_code]`).
    pub runtime: String,
    /// Most agents alive at once; handlers waiting for a slot are served
    /// first come, first served.
    pub max_concurrent: usize,
    /// After this many exits in a row without progress while work remains,
    /// the handler is marked stalled and its boss is told.
    pub stall_after_exits: u32,
    /// First respawn delay after an exit without progress; doubles each time.
    pub respawn_backoff_ms: u64,
    pub max_backoff_ms: u64,
    /// Between SIGTERM and SIGKILL when an agent's process group is stopped.
    pub kill_grace_ms: u64,
    /// An agent that makes no MCP call for this long is stopped as stalled
    /// (0: never).
    pub idle_timeout_ms: u64,
    /// After a live agent is told its MCP servers changed, how long it has
    /// to save its state and exit before it is stopped.
    pub config_restart_grace_ms: u64,
    /// The `agency` binary that agents' helper processes run (the builtin
    /// loop, the MCP server launcher); empty means the running executable.
    pub agency_program: String,
    pub command: CommandConfig,
    pub builtin: BuiltinConfig,
    pub claude_code: ClaudeCodeConfig,
    /// `on` (the default): every agent process and extra MCP server runs
    /// confined (`[sandbox]`); a sandbox that cannot be applied keeps the
    /// agent from starting. `off` runs agents unconfined, as the daemon's
    /// user, and `agency status` says so on every call.
    pub sandbox: String,
    /// How long an agent stays alive after its work is done, waiting for
    /// mail without a model call (issue 13 item 6; 0: it exits). A
    /// handler's own setting (`agency keep-warm`, an organisation's
    /// `memory.keepWarm`) wins.
    pub keep_warm_ms: u64,
    /// The same for an organisation's executive handler, which answers
    /// messages from outside and so is kept warm by default (5 minutes).
    pub keep_warm_executive_ms: u64,
}

impl Default for AgentsConfig {
    fn default() -> Self {
        AgentsConfig {
            runtime: "none".to_owned(),
            max_concurrent: 4,
            stall_after_exits: 3,
            respawn_backoff_ms: 500,
            max_backoff_ms: 60_000,
            kill_grace_ms: 3_000,
            idle_timeout_ms: 900_000,
            config_restart_grace_ms: 120_000,
            agency_program: String::new(),
            command: CommandConfig::default(),
            builtin: BuiltinConfig::default(),
            claude_code: ClaudeCodeConfig::default(),
            sandbox: "on".to_owned(),
            keep_warm_ms: 0,
            keep_warm_executive_ms: 300_000,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CommandConfig {
    pub program: String,
    pub args: Vec<String>,
    /// A `[models.NAME]` the command's agents reach through the daemon's
    /// model gateway: they get its URL and their own token as the key
    /// (`ANTHROPIC_BASE_URL` + `ANTHROPIC_API_KEY`, or `OPENAI_BASE_URL` +
    /// `OPENAI_API_KEY`, and `AGENCY_MODEL_URL`). Empty: no model.
    pub upstream: String,
}

/// The built-in runtime: `agency agent` against an LLM HTTP API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BuiltinConfig {
    /// `anthropic` (Messages API) or `openai` (chat completions: OpenAI,
    /// Ollama, vLLM, llama.cpp server).
    pub api: String,
    /// Deprecated (use `upstream`): the API server's root URL, e.g.
    /// `https://api.anthropic.com`; the daemon makes it the implicit
    /// upstream `[models.default]` and the agent reaches it through the
    /// model gateway all the same.
    pub base_url: String,
    pub model: String,
    /// Deprecated: name of the daemon's environment variable holding the
    /// API key (empty: none). With `base_url` it becomes the implicit
    /// upstream `[models.default]`, the key read by the daemon alone.
    pub api_key_env: String,
    /// Model calls per agent before it is told to save state and stop.
    pub max_turns: u32,
    /// Input plus output tokens per agent before the same.
    pub max_total_tokens: u64,
    pub max_output_tokens: u32,
    /// The workspace tools `agency agent` offers the model, from
    /// [`BuiltinConfig::TOOLS`] (default: all; empty: MCP tools only).
    pub tools: Vec<String>,
    /// A `[models.NAME]`: the agent reaches it through the daemon's model
    /// gateway with its own token (`api`, `base_url` and `api_key_env`
    /// are then not used), so no provider key reaches it. A handler's own
    /// model (`agency model set`) takes precedence.
    pub upstream: String,
}

impl BuiltinConfig {
    /// The built-in runtime's workspace tools (`agency_agent::WORKSPACE_TOOLS`;
    /// a test of agency-agent checks that the two lists agree).
    pub const TOOLS: &[&str] = &[
        "bash",
        "read_file",
        "write_file",
        "edit_file",
        "glob",
        "grep",
    ];
}

impl Default for BuiltinConfig {
    fn default() -> Self {
        BuiltinConfig {
            api: "anthropic".to_owned(),
            base_url: String::new(),
            model: String::new(),
            api_key_env: String::new(),
            max_turns: 50,
            max_total_tokens: 1_000_000,
            max_output_tokens: 8192,
            tools: BuiltinConfig::TOOLS
                .iter()
                .map(|t| (*t).to_owned())
                .collect(),
            upstream: String::new(),
        }
    }
}

/// The Claude Code runtime: the `claude` CLI in headless mode (`-p`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClaudeCodeConfig {
    /// The Claude Code CLI to run (looked up in `PATH` if not a path).
    pub program: String,
    /// Passed as `--model` when not empty.
    pub model: String,
    /// Extra environment for the CLI. The CLI starts from an empty
    /// environment: this, the variables every agent gets, and the
    /// gateway's. `ANTHROPIC_BASE_URL` / `ANTHROPIC_API_KEY` here are
    /// deprecated: without `upstream` they become the implicit upstream
    /// `[models.default]` and are not given to the CLI.
    pub env: BTreeMap<String, String>,
    /// Deprecated: the daemon's environment variable holding the key of
    /// the implicit upstream `[models.default]` (read by the daemon only).
    pub api_key_env: String,
    /// Passed as `--max-turns` when above 0.
    pub max_turns: u32,
    /// Claude Code's built-in tools the agent may use besides Agency's MCP
    /// tools (`--tools` and `--allowedTools`); every other built-in tool is
    /// unavailable. Checked by [`crate::claude::check_tools`].
    pub tools: Vec<String>,
    /// A `[models.NAME]` with `api = "anthropic"`: Claude Code gets the
    /// daemon's model gateway as `ANTHROPIC_BASE_URL` and its own token as
    /// `ANTHROPIC_AUTH_TOKEN`, so no provider key reaches it. Empty: the
    /// implicit `[models.default]` (see `env`).
    pub upstream: String,
}

impl Default for ClaudeCodeConfig {
    fn default() -> Self {
        ClaudeCodeConfig {
            program: "claude".to_owned(),
            model: String::new(),
            env: BTreeMap::new(),
            api_key_env: String::new(),
            max_turns: 50,
            tools: crate::claude::DEFAULT_TOOLS
                .iter()
                .map(|t| (*t).to_owned())
                .collect(),
            upstream: String::new(),
        }
    }
}

impl Config {
    pub fn load(path: &Path) -> Result<Config, DaemonError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| DaemonError::io("read configuration", path, e))?;
        Config::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<Config, DaemonError> {
        let mut cfg: Config = toml::from_str(text).map_err(|e| DaemonError::Config {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        if cfg.limits.max_file_bytes == 0 || cfg.limits.max_file_bytes > 1 << 30 {
            return Err(DaemonError::Config {
                path: path.to_owned(),
                message: format!(
                    "limits.max_file_bytes = {} is out of range (1 byte to 1 GiB)",
                    cfg.limits.max_file_bytes
                ),
            });
        }
        let bad = |message: String| DaemonError::Config {
            path: path.to_owned(),
            message,
        };
        match cfg.agents.runtime.as_str() {
            "none" => {}
            "command" if cfg.agents.command.program.is_empty() => {
                return Err(bad(
                    "agents.runtime = \"command\" needs agents.command.program".to_owned(),
                ));
            }
            "command" => {}
            "builtin" => {
                let b = &cfg.agents.builtin;
                if (b.base_url.is_empty() && b.upstream.is_empty()) || b.model.is_empty() {
                    return Err(bad(
                        "agents.runtime = \"builtin\" needs agents.builtin.base_url and agents.builtin.model (or agents.builtin.upstream, a [models.NAME], instead of base_url)"
                            .to_owned(),
                    ));
                }
                if !matches!(b.api.as_str(), "anthropic" | "openai") {
                    return Err(bad(format!(
                        "agents.builtin.api = {:?} is not \"anthropic\" or \"openai\"",
                        b.api
                    )));
                }
                if let Some(t) = b
                    .tools
                    .iter()
                    .find(|t| !BuiltinConfig::TOOLS.contains(&t.as_str()))
                {
                    return Err(bad(format!(
                        "agents.builtin.tools: {t:?} is not one of {}",
                        BuiltinConfig::TOOLS.join(", ")
                    )));
                }
            }
            "claude-code" if cfg.agents.claude_code.program.is_empty() => {
                return Err(bad(
                    "agents.runtime = \"claude-code\" needs agents.claude_code.program".to_owned(),
                ));
            }
            "claude-code" => {}
            other => {
                return Err(bad(format!(
                    "agents.runtime = {other:?} is not one of \"none\", \"command\", \"builtin\", \"claude-code\""
                )));
            }
        }
        // Before the upstreams are checked, so that the one made from the
        // deprecated settings is checked like any other.
        cfg.notices = crate::models::route_direct_settings(&mut cfg).map_err(bad)?;
        crate::mcp_servers::validate(&cfg.mcp_servers, &cfg.secrets).map_err(bad)?;
        // Manifests are read relative to the home, the directory of agency.toml.
        crate::mcp_servers::load_manifests(
            &mut cfg.mcp_servers,
            path.parent().unwrap_or(Path::new("")),
        )
        .map_err(bad)?;
        crate::models::validate(&cfg.models, &cfg.prices, &cfg.secrets).map_err(bad)?;
        crate::models::check_upstreams(&cfg).map_err(bad)?;
        crate::claude::check_tools(&cfg.agents.claude_code.tools).map_err(bad)?;
        crate::memory_config::validate(&cfg.memory, &cfg.secrets).map_err(bad)?;
        for name in cfg.repos.keys() {
            agency_core::validate::check_name("repo", name)
                .map_err(|e| bad(format!("[repos]: {e}")))?;
        }
        if cfg.repos_cache.fetch_timeout_secs == 0 {
            return Err(bad(
                "repos_cache.fetch_timeout_secs must be at least 1".to_owned()
            ));
        }
        crate::logging::check_filter(&cfg.log.level).map_err(|e| {
            bad(format!(
                "log.level = {:?} is not a valid filter: {e}",
                cfg.log.level
            ))
        })?;
        if cfg.log.file_max_bytes < 4096 {
            return Err(bad("log.file_max_bytes must be at least 4096".to_owned()));
        }
        for (key, value) in cfg.limits.quotas() {
            if value == 0 || value > MAX_QUOTA {
                return Err(bad(format!(
                    "limits.{key} = {value} is out of range (1 to {MAX_QUOTA})"
                )));
            }
        }
        if cfg.retention.blob_grace_minutes == 0 {
            return Err(bad(
                "retention.blob_grace_minutes must be at least 1: a blob is written before the row that points at it commits"
                    .to_owned(),
            ));
        }
        if cfg.agents.max_concurrent == 0 || cfg.agents.stall_after_exits == 0 {
            return Err(bad(
                "agents.max_concurrent and agents.stall_after_exits must be at least 1".to_owned(),
            ));
        }
        for (key, ms) in [
            ("keep_warm_ms", cfg.agents.keep_warm_ms),
            ("keep_warm_executive_ms", cfg.agents.keep_warm_executive_ms),
        ] {
            if ms > agency_service::MAX_KEEP_WARM_MS {
                return Err(bad(format!(
                    "agents.{key} = {ms} is out of range (0 to {}, 24 h)",
                    agency_service::MAX_KEEP_WARM_MS
                )));
            }
        }
        crate::sandbox_config::check_switch(&cfg.agents.sandbox).map_err(bad)?;
        // The home is the directory of agency.toml.
        let home = path.parent().unwrap_or(Path::new(""));
        cfg.sandbox.validate(home).map_err(bad)?;
        cfg.agency_api.validate().map_err(bad)?;
        Ok(cfg)
    }

    pub fn limits(&self) -> Limits {
        let l = &self.limits;
        Limits {
            max_file_bytes: l.max_file_bytes,
            max_pending_deferred_per_handler: l.max_pending_deferred_per_handler,
            max_outcomes_per_handler: l.max_outcomes_per_handler,
            max_kb_files_per_handler: l.max_kb_files_per_handler,
            max_handlers_per_subtree: l.max_handlers_per_subtree,
            max_delegation_depth: l.max_delegation_depth,
            max_handoffs: l.max_handoffs,
            ..Limits::default()
        }
    }

    pub fn retention(&self) -> agency_service::Retention {
        agency_service::Retention {
            acked_mail_days: self.retention.acked_mail_days,
            blob_grace: std::time::Duration::from_secs(
                u64::from(self.retention.blob_grace_minutes) * 60,
            ),
        }
    }
}

/// The largest value a quota may be set to (a billion: effectively none).
const MAX_QUOTA: usize = 1_000_000_000;

/// The commented configuration `agency init` writes.
pub(crate) const TEMPLATE: &str = r#"# Agency configuration. Every key is optional; the values shown are the
# defaults. Unknown keys are refused.

[server]
# TCP port on 127.0.0.1 (Agency never listens on other interfaces): agents
# and outside callers of the agency API reach the daemon there. `agency
# init` pins a port that was free, so that restarts keep it; 0 picks a free
# one at each start. The address is written to daemon.json in this
# directory for the CLI to find.
port = 0

[limits]
# Largest Knowledge Base file or message body accepted, in bytes.
max_file_bytes = 8388608
# Quotas per handler, so that a runaway agent cannot fill the store or grow
# the organisation without bound (the user is not bound by them). A refused
# call fails with kind "quota" and names the key to raise here.
# Deferred messages a handler has scheduled that are not yet delivered.
max_pending_deferred_per_handler = 1000
# Outcomes and KB documents a handler may create (ever).
max_outcomes_per_handler = 10000
max_kb_files_per_handler = 10000
# Active handlers in any subtree (the root handler's subtree is the whole
# organisation), and how many levels below the root a handler may be.
max_handlers_per_subtree = 1000
max_delegation_depth = 32
# Bounded loops: hand-offs (a message from one handler to another, or a
# delegation) in one chain of work. The user's message starts a chain at 0;
# each hand-off is one hop more than the hop count of the handler making it
# (the hop count of the last message or delegation it received).
max_handoffs = 500

[retention]
# `agency gc` and the daemon's automatic collection remove acknowledged mail
# this many days after acknowledgement (0: keep it forever), with its body
# unless something else still needs it, and blobs no version points at.
acked_mail_days = 30
# An unreferenced blob is removed only this long after it was written.
blob_grace_minutes = 60
# Collect after the daemon starts and then every this many hours (0: only
# when `agency gc` is run).
gc_interval_hours = 24

[agents]
# "none": agents are not started (attach MCP clients with `agency token
# mint`); "command": run [agents.command] for each agent, with its token,
# MCP URL, prompt and first message in AGENCY_TOKEN, AGENCY_MCP_URL,
# AGENCY_PROMPT_FILE, AGENCY_MESSAGE_FILE (MCP configuration: AGENCY_MCP_CONFIG);
# "builtin": [agents.builtin]; "claude-code": [agents.claude_code].
# Every agent starts from an empty environment: PATH, LANG, LC_*, TZ, a
# HOME and TMPDIR of its own, and what its runtime needs (below); nothing
# else of the daemon's environment reaches it.
runtime = "none"
# Most agents alive at once; waiting handlers are served first come, first served.
max_concurrent = 4
# Exits in a row without progress before a handler is marked stalled.
stall_after_exits = 3
# Respawn delay after an exit without progress (doubles, up to the maximum).
respawn_backoff_ms = 500
max_backoff_ms = 60000
# Between SIGTERM and SIGKILL when an agent's process group is stopped.
kill_grace_ms = 3000
# An agent that makes no MCP call for this long is stopped as stalled (0: never).
idle_timeout_ms = 900000
# An agent told that its MCP servers changed has this long to save its
# state and exit before it is stopped (the next agent gets the new servers).
config_restart_grace_ms = 120000
# The agency binary for agents' helper processes (the builtin loop, the
# launcher of extra MCP servers); empty = this executable.
agency_program = ""
# "on": every agent process (and extra MCP server) runs confined, see
# [sandbox]; if the sandbox cannot be applied the agent does not start.
# "off" runs agents UNCONFINED, as the daemon's user: they can then read
# this home (admin.token, agency.db, other agents' tokens), and
# `agency status` warns on every call. Only for a machine that cannot
# confine, and agents you would trust with your account.
sandbox = "on"
# How long an agent stays alive after its work is done, waiting for mail
# without a model call, so that new mail reaches it at once (0: it exits).
# A warm agent holds one of max_concurrent's slots and gives it up when
# another handler waits for one. `agency keep-warm HANDLER` and an
# organisation's memory.keepWarm set it per handler.
keep_warm_ms = 0
# The same for an organisation's executive handler (5 minutes).
keep_warm_executive_ms = 300000

[agents.command]
program = ""
args = []
# A [models.NAME] its agents reach through the daemon's model gateway: they
# get ANTHROPIC_BASE_URL + ANTHROPIC_API_KEY (or OPENAI_BASE_URL +
# OPENAI_API_KEY) naming the gateway and their own token, and
# AGENCY_MODEL_URL; "" = no model.
upstream = ""

# runtime = "builtin": our own agent loop (`agency agent`). Every agent of
# every runtime reaches its model only through the daemon's model gateway
# ([models.NAME] below), with its own token: no provider key reaches it.
[agents.builtin]
upstream = ""              # a [models.NAME] (a handler's own, `agency model set`, wins)
model = ""
# Deprecated: base_url (+ api, api_key_env, the daemon's variable holding
# the key) become the implicit upstream [models.default], with a warning.
api = "anthropic"
base_url = ""
api_key_env = ""
max_turns = 50
max_total_tokens = 1000000
max_output_tokens = 8192
# The workspace tools it runs itself (in the agent's workspace); [] = none.
tools = ["bash", "read_file", "write_file", "edit_file", "glob", "grep"]

# runtime = "claude-code": the Claude Code CLI, headless (`claude -p`), with
# Agency's MCP server as its only MCP server. It runs with HOME set to a
# private directory and reaches its model only through the daemon's model
# gateway (ANTHROPIC_BASE_URL, its own token as ANTHROPIC_AUTH_TOKEN).
[agents.claude_code]
program = "claude"
model = ""                 # passed as --model when set
max_turns = 50             # passed as --max-turns when above 0
upstream = ""              # an "anthropic" [models.NAME]
# Deprecated: without upstream, api_key_env (the daemon's variable holding
# the key) and env.ANTHROPIC_BASE_URL / env.ANTHROPIC_API_KEY become the
# implicit upstream [models.default] (default https://api.anthropic.com).
api_key_env = ""
# Claude Code's own tools the agent gets besides Agency's (exact names, as
# Claude Code spells them); every other built-in tool is unavailable. Not
# in the default: WebFetch and WebSearch (WebSearch runs at the model
# provider, past Agency's egress rules), Task/Agent (sub-agents Agency does
# not schedule or count). The tools are confined by the agent's sandbox.
tools = ["Bash", "Read", "Edit", "Write", "Glob", "Grep", "NotebookEdit", "TaskOutput", "TaskStop"]
[agents.claude_code.env]   # extra environment, e.g.
# CLAUDE_CODE_MAX_RETRIES = "1"

[log]
# The daemon's log, logs/daemon.log in this home: a tracing filter such as
# "info", "debug" or "info,agency_daemon=debug" (RUST_LOG overrides it).
level = "info"
# daemon.log is rotated to daemon.log.1, .2, … past this size; files kept:
file_max_bytes = 10485760
files_kept = 3
# Each agent run's stdout/stderr is kept with its run (`agency logs RUN`):
# the first and the last bytes, the middle cut and marked.
agent_log_head_bytes = 65536
agent_log_tail_bytes = 1048576

[repos_cache]
# A git fetch of a mirror (repo_clone) still running after this long is
# killed and the clone fails.
fetch_timeout_secs = 300
# A mirror fetched less than this long ago is used as it is (0: always fetch).
refresh_interval_secs = 60

[sandbox]
# With agents.sandbox = "on", an agent (and every process it starts, extra
# MCP servers included) may write only its own directory (workspace, HOME,
# TMPDIR), read the system directories (/usr, /bin, /lib, /etc but its
# secrets), its runtime's program and these toolchains, and open TCP
# connections only to the daemon's ports. Nothing of this home is readable.
# Extra directories to read and execute (absolute; not this home nor a
# directory holding it), e.g. ["/root/.cargo", "/root/.pyenv"]:
toolchains = []
# Extra directories every agent may write (shared by all agents):
read_write = []
# Limits per agent; 0 = none. Processes and memory count the agent and all
# its descendants together; CPU time, file size and open files are per
# process. `agency status` lists the limits in force and what keeps each.
max_processes = 512
# memory_mb, in MiB: unset, 8192 per agent tree where the machine has a
# cgroup memory controller (v2, or v1's memory hierarchy), and per process
# (RLIMIT_DATA) everywhere. Set, it must be kept per tree: without a memory
# controller the daemon refuses to start.
# memory_mb = 8192
cpu_seconds = 3600
file_size_mb = 4096
open_files = 4096

[agency_api]
# Outside callers of POST /v1/agency/messages, per agency API key (the
# user's admin token is not bound): messages per minute on average, and at
# once after a quiet spell; messages not yet answered, at most. Past each,
# 429 with Retry-After. 0 is refused: revoke a key to stop its caller.
messages_per_minute = 30
burst = 10
max_pending_per_key = 20

# Secrets, read once when the daemon starts and kept in memory only (never
# written to the store, logs or agents' files). Exactly one source each:
# [secrets]
# github = { env = "GITHUB_TOKEN" }                  # the daemon's environment
# gmail = { file = "secrets/gmail" }                 # relative to this home
# slack = { command = ["op", "read", "op://vault/slack/token"] }

# Extra MCP servers. An agent gets one only if its handler holds a
# capability on mcp_server:NAME (granted by the user or a boss). Secrets are
# referenced as ${secret:NAME} in env and headers, and reach only the
# server's process, through `agency mcp-launch`:
# [mcp_servers.files]
# command = "mcp-server-filesystem"
# args = ["/srv/shared"]
# env = { API_TOKEN = "${secret:github}" }
# [mcp_servers.github]
# url = "https://api.githubcopilot.com/mcp/"
# headers = { Authorization = "Bearer ${secret:github}" }

# Model upstreams of the daemon's model gateway (/model/NAME on the agents'
# listener), the only way agents reach a model: the runtime's upstream =
# "NAME" (or a handler's own, `agency model set HANDLER NAME`, inherited by
# its underlings) names one; agents use their own token, the key stays in
# the daemon. Every call is metered (`agency cost`) and budgeted. No model
# host is reachable through the egress proxy without a capability.
# [models.main]
# api = "anthropic"                                  # or "openai"
# base_url = "https://api.anthropic.com"
# api_key = "${secret:anthropic}"
# [models.cheap]
# api = "anthropic"
# base_url = "https://api.anthropic.com"
# api_key = "${secret:anthropic}"
# model = "claude-haiku-4-5"   # every call through it uses this model
# reserve_output_tokens = 8192  # reserved for a call without max_tokens (x n)
# request_timeout_secs = 60     # a request body must arrive within it (408)
# agent_request_bytes = 67108864  # request bytes one agent may have in flight (413)
# default_price = { input = 0.0, output = 0.0 }  # for models [prices] lacks;
#                               # without it they are unpriced (refused under --usd)
# Prices in USD per million tokens, over the built-in defaults (matched by
# the longest model-name prefix):
# [prices."claude-sonnet-4-5"]
# input = 3.0
# output = 15.0
# cache_read = 0.3
# cache_write = 3.75

# Each handler's memory (agents' memory_store / memory_search tools).
# [memory]
# recall_tokens = 1000       # memories recalled into an agent's first message (0: none)
# condense_after = 200       # live memories past which the next agent is asked to condense
# max_per_handler = 10000    # live memories one handler may hold
# Semantic search: an OpenAI-compatible embeddings endpoint (without one,
# full-text search alone). The key, if any, is sent only there.
# [memory.embeddings]
# base_url = "http://127.0.0.1:11434/v1"             # e.g. a local Ollama
# model = "nomic-embed-text"
# api_key = ""                                       # or "${secret:NAME}"
# dims = 768                                         # optional check
"#;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "config_tests.rs"]
mod tests;

impl AgentsConfig {
    /// The keep-warm defaults the service applies to a handler without a
    /// setting of its own.
    pub fn keep_warm_defaults(&self) -> agency_service::KeepWarmDefaults {
        agency_service::KeepWarmDefaults {
            default_ms: self.keep_warm_ms,
            executive_ms: self.keep_warm_executive_ms,
        }
    }
}
