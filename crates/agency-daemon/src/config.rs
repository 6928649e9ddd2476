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
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CommandConfig {
    pub program: String,
    pub args: Vec<String>,
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
            other => {
                return Err(bad(format!(
                    "agents.runtime = {other:?} is not one of \"none\", \"command\""
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
            "[server]\nport = 70000\n",
        ] {
            let e = Config::parse(Path::new("/h/agency.toml"), bad)
                .unwrap_err()
                .to_string();
            assert!(e.contains("/h/agency.toml"), "{e}");
        }
    }
}
