//! `agency.toml`: the daemon's configuration. Unknown keys are refused so a
//! typo never silently does nothing; every value is checked when the file
//! is read, so that a mistake stops the daemon from starting.

use std::collections::BTreeMap;
use std::path::Path;

use agency_core::Limits;
use serde::{Deserialize, Serialize};

use crate::api_limits::AgencyApiConfig;
use crate::error::ConfigError;
use crate::mcp_servers::McpServerConfig;
use crate::models::{ModelUpstreamConfig, Price};
use crate::sandbox::SandboxConfig;
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
    /// Each handler's memory: recall, condensation, limits and
    /// the optional embeddings endpoint.
    pub memory: crate::memory::MemorySettings,
    /// When a stuck signal is a problem, and how often the daemon looks.
    pub watch: crate::watch::WatchConfig,
    /// OpenTelemetry export of the event log (off by default).
    pub telemetry: crate::telemetry::TelemetrySettings,
    /// Where the store lives: the home's SQLite file (default) or a
    /// PostgreSQL database by URL.
    pub store: crate::store::StoreSettings,
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
    /// A `tracing` filter (`info`, `debug`, `info,agency_supervisor=debug`, …);
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

/// Whether `filter` is a valid `tracing` filter directive list (the
/// daemon's logger parses `[log] level` the same way).
fn check_filter(filter: &str) -> Result<(), String> {
    tracing_subscriber::EnvFilter::builder()
        .parse(filter)
        .map(drop)
        .map_err(|e| e.to_string())
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
    /// Events of the event log are removed this many days after they
    /// happened (0: kept forever).
    pub event_days: u32,
    /// The daemon collects garbage after start and then every this many
    /// hours (0: only `agency gc`).
    pub gc_interval_hours: u32,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig {
            acked_mail_days: 30,
            blob_grace_minutes: 60,
            event_days: 30,
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
    /// mail without a model call (0: it exits). A
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
    /// unavailable. Checked by [`crate::claude_tools::check_tools`].
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
            tools: crate::claude_tools::DEFAULT_TOOLS
                .iter()
                .map(|t| (*t).to_owned())
                .collect(),
            upstream: String::new(),
        }
    }
}

impl Config {
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::io("read configuration", path, e))?;
        Config::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<Config, ConfigError> {
        let mut cfg: Config = toml::from_str(text).map_err(|e| ConfigError::Invalid {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        if cfg.limits.max_file_bytes == 0 || cfg.limits.max_file_bytes > 1 << 30 {
            return Err(ConfigError::Invalid {
                path: path.to_owned(),
                message: format!(
                    "limits.max_file_bytes = {} is out of range (1 byte to 1 GiB)",
                    cfg.limits.max_file_bytes
                ),
            });
        }
        let bad = |message: String| ConfigError::Invalid {
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
        crate::claude_tools::check_tools(&cfg.agents.claude_code.tools)
            .map_err(|e| bad(e.to_string()))?;
        crate::memory::validate(&cfg.memory, &cfg.secrets).map_err(bad)?;
        crate::watch::validate(&cfg.watch).map_err(bad)?;
        crate::telemetry::validate(&cfg.telemetry).map_err(bad)?;
        crate::store::validate(&cfg.store).map_err(bad)?;
        for name in cfg.repos.keys() {
            agency_core::validate::check_name("repo", name)
                .map_err(|e| bad(format!("[repos]: {e}")))?;
        }
        if cfg.repos_cache.fetch_timeout_secs == 0 {
            return Err(bad(
                "repos_cache.fetch_timeout_secs must be at least 1".to_owned()
            ));
        }
        check_filter(&cfg.log.level).map_err(|e| {
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
        crate::sandbox::check_switch(&cfg.agents.sandbox).map_err(bad)?;
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
            event_days: self.retention.event_days,
            blob_grace: std::time::Duration::from_secs(
                u64::from(self.retention.blob_grace_minutes) * 60,
            ),
        }
    }
}

/// The largest value a quota may be set to (a billion: effectively none).
const MAX_QUOTA: usize = 1_000_000_000;

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
