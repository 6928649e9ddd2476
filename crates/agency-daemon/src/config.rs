//! `agency.toml`: the daemon's configuration. Unknown keys are refused so a
//! typo never silently does nothing.

use std::path::Path;

use agency_core::Limits;
use serde::{Deserialize, Serialize};

use crate::error::DaemonError;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    pub server: ServerConfig,
    pub limits: LimitsConfig,
    pub agents: AgentsConfig,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// TCP port on 127.0.0.1; 0 picks a free one (written to `daemon.json`).
    pub port: u16,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Largest KB file or message body accepted, in bytes.
    pub max_file_bytes: usize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_file_bytes: Limits::default().max_file_bytes,
        }
    }
}

/// How the daemon runs agents.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentsConfig {
    /// `none` (agents are not started; attach clients with `agency token
    /// mint`) or `command` (the program in `[agents.command]`).
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
    pub command: CommandConfig,
    pub builtin: BuiltinConfig,
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
            command: CommandConfig::default(),
            builtin: BuiltinConfig::default(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CommandConfig {
    pub program: String,
    pub args: Vec<String>,
}

/// The built-in runtime: `agency agent` against an LLM HTTP API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BuiltinConfig {
    /// The `agency` binary to run; empty means the running executable.
    pub program: String,
    /// `anthropic` (Messages API) or `openai` (chat completions: OpenAI,
    /// Ollama, vLLM, llama.cpp server).
    pub api: String,
    /// The API server's root URL, e.g. `https://api.anthropic.com`.
    pub base_url: String,
    pub model: String,
    /// Name of the environment variable holding the API key (empty: none).
    pub api_key_env: String,
    /// Model calls per agent before it is told to save state and stop.
    pub max_turns: u32,
    /// Input plus output tokens per agent before the same.
    pub max_total_tokens: u64,
    pub max_output_tokens: u32,
}

impl Default for BuiltinConfig {
    fn default() -> Self {
        BuiltinConfig {
            program: String::new(),
            api: "anthropic".to_owned(),
            base_url: String::new(),
            model: String::new(),
            api_key_env: String::new(),
            max_turns: 50,
            max_total_tokens: 1_000_000,
            max_output_tokens: 8192,
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
        let cfg: Config = toml::from_str(text).map_err(|e| DaemonError::Config {
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
                if b.base_url.is_empty() || b.model.is_empty() {
                    return Err(bad(
                        "agents.runtime = \"builtin\" needs agents.builtin.base_url and agents.builtin.model"
                            .to_owned(),
                    ));
                }
                if !matches!(b.api.as_str(), "anthropic" | "openai") {
                    return Err(bad(format!(
                        "agents.builtin.api = {:?} is not \"anthropic\" or \"openai\"",
                        b.api
                    )));
                }
            }
            other => {
                return Err(bad(format!(
                    "agents.runtime = {other:?} is not one of \"none\", \"command\", \"builtin\""
                )));
            }
        }
        if cfg.agents.max_concurrent == 0 || cfg.agents.stall_after_exits == 0 {
            return Err(bad(
                "agents.max_concurrent and agents.stall_after_exits must be at least 1".to_owned(),
            ));
        }
        Ok(cfg)
    }

    pub fn limits(&self) -> Limits {
        Limits {
            max_file_bytes: self.limits.max_file_bytes,
            ..Limits::default()
        }
    }
}

/// The commented configuration `agency init` writes.
pub(crate) const TEMPLATE: &str = r#"# Agency configuration. Every key is optional; the values shown are the
# defaults. Unknown keys are refused.

[server]
# TCP port on 127.0.0.1 (Agency never listens on other interfaces).
# 0 picks a free port; the chosen address is written to daemon.json
# in this directory for the CLI to find.
port = 0

[limits]
# Largest Knowledge Base file or message body accepted, in bytes.
max_file_bytes = 8388608

[agents]
# "none": agents are not started (attach MCP clients with `agency token
# mint`); "command": run [agents.command] for each agent, with its token,
# MCP URL and prompt in AGENCY_TOKEN, AGENCY_MCP_URL, AGENCY_PROMPT_FILE.
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

[agents.command]
program = ""
args = []

# runtime = "builtin": our own agent loop (`agency agent`) against an LLM API.
[agents.builtin]
api = "anthropic"          # or "openai" (OpenAI, Ollama, vLLM, llama.cpp server)
base_url = ""              # e.g. "https://api.anthropic.com" or "http://127.0.0.1:11434"
model = ""
api_key_env = ""           # name of the environment variable holding the key
max_turns = 50
max_total_tokens = 1000000
max_output_tokens = 8192
program = ""               # the agency binary; empty = this executable
"#;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn template_parses_to_defaults() {
        assert_eq!(
            Config::parse(Path::new("t"), TEMPLATE).unwrap(),
            Config::default()
        );
    }

    #[test]
    fn bad_configs_are_refused_with_the_file_named() {
        for bad in [
            "[server]\nprot = 1\n",
            "[limits]\nmax_file_bytes = 0\n",
            "server = 3",
            "[agents]\nruntime = \"magic\"\n",
            "[agents]\nruntime = \"command\"\n",
            "[agents]\nmax_concurrent = 0\n",
            "[agents]\nruntime = \"builtin\"\n",
            "[agents]\nruntime = \"builtin\"\n[agents.builtin]\nbase_url = \"http://x\"\nmodel = \"m\"\napi = \"gemini\"\n",
            "[server]\nport = 70000\n",
        ] {
            let e = Config::parse(Path::new("/h/agency.toml"), bad)
                .unwrap_err()
                .to_string();
            assert!(e.contains("/h/agency.toml"), "{e}");
        }
    }
}
