//! Agent runtimes: how one agent process is started. A runtime turns a
//! [`SpawnSpec`] into a command and, after exit, reads back what the agent
//! reported (usage, transcript). The supervisor does the rest (process
//! group, workspace, token, waiting, killing).

use std::path::{Path, PathBuf};

use agency_core::{AgentId, HandlerId};
use agency_service::RunReport;
use tokio::process::Command;

use crate::error::DaemonError;
use crate::mcp_servers::AGENCY_SERVER;

/// Everything a runtime needs to start one agent.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    pub handler: HandlerId,
    pub agent: AgentId,
    /// The agent's bearer token for `/mcp` (never logged).
    pub token: String,
    pub mcp_url: String,
    /// The agent's fresh working directory, deleted after exit.
    pub workspace: PathBuf,
    /// A private directory beside the workspace for the runtime's own files
    /// (config, transcript, result); also deleted after exit.
    pub run_dir: PathBuf,
    pub system_prompt: String,
    pub initial_message: String,
    /// The extra MCP servers this agent gets (its handler's capabilities,
    /// declared in `agency.toml`), sorted.
    pub mcp_servers: Vec<String>,
    /// The `agency` binary whose `mcp-launch` starts an extra server.
    pub launcher: PathBuf,
}

impl SpawnSpec {
    /// The stdio entry that starts extra server `name` through the
    /// launcher. It carries the agent's token (already in the agent's own
    /// configuration) and never a secret: the launcher fetches those.
    fn launcher_entry(&self, name: &str, with_token: bool) -> serde_json::Value {
        let mut env = serde_json::Map::new();
        env.insert("AGENCY_MCP_URL".into(), self.mcp_url.clone().into());
        if with_token {
            env.insert("AGENCY_TOKEN".into(), self.token.clone().into());
        }
        serde_json::json!({
            "type": "stdio",
            "command": self.launcher,
            "args": ["mcp-launch", name],
            "env": env,
        })
    }

    /// The agent's MCP configuration in the `mcpServers` format Claude Code
    /// reads: Agency's server over HTTP with the bearer token, then one
    /// stdio entry per extra server.
    pub fn mcp_config(&self) -> serde_json::Value {
        let mut servers = serde_json::Map::new();
        servers.insert(
            AGENCY_SERVER.to_owned(),
            serde_json::json!({
                "type": "http",
                "url": self.mcp_url,
                "headers": { "Authorization": format!("Bearer {}", self.token) },
            }),
        );
        for name in &self.mcp_servers {
            servers.insert(name.clone(), self.launcher_entry(name, true));
        }
        serde_json::json!({ "mcpServers": servers })
    }
}

pub trait Runtime: Send + Sync + std::fmt::Debug {
    /// The name recorded with each agent (`builtin`, `claude-code`, `command`).
    fn name(&self) -> &str;
    /// The command that runs the agent, with the working directory and
    /// environment set. The supervisor adds the process group.
    fn command(&self, spec: &SpawnSpec) -> Result<Command, DaemonError>;
    /// After exit: what the agent reported (usage, transcript), if anything.
    fn collect(&self, spec: &SpawnSpec) -> RunReport;
}

/// A configured command: the agent's token, MCP URL and prompt reach it in
/// the environment (`AGENCY_TOKEN`, `AGENCY_MCP_URL`, `AGENCY_PROMPT_FILE`,
/// `AGENCY_MESSAGE_FILE` (the first message), `AGENCY_HANDLER`,
/// `AGENCY_AGENT`), and its whole MCP configuration
/// (Agency's server and the extra ones) in the file `AGENCY_MCP_CONFIG`
/// names. Used for custom agents and in tests.
#[derive(Debug, Clone)]
pub struct CommandRuntime {
    pub program: String,
    pub args: Vec<String>,
}

impl Runtime for CommandRuntime {
    fn name(&self) -> &str {
        "command"
    }

    fn command(&self, spec: &SpawnSpec) -> Result<Command, DaemonError> {
        let prompt = write_private(&spec.run_dir, "prompt.md", spec.system_prompt.as_bytes())?;
        let mcp = write_private(
            &spec.run_dir,
            "mcp.json",
            spec.mcp_config().to_string().as_bytes(),
        )?;
        // The first user message (what is waiting, how the previous agent
        // ended), as the other runtimes get it.
        let message = write_private(&spec.run_dir, "message.md", spec.initial_message.as_bytes())?;
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .current_dir(&spec.workspace)
            .env("AGENCY_MESSAGE_FILE", message)
            .env("AGENCY_TOKEN", &spec.token)
            .env("AGENCY_MCP_URL", &spec.mcp_url)
            .env("AGENCY_PROMPT_FILE", prompt)
            .env("AGENCY_MCP_CONFIG", mcp)
            .env("AGENCY_HANDLER", spec.handler.to_string())
            .env("AGENCY_AGENT", spec.agent.to_string());
        Ok(cmd)
    }

    fn collect(&self, spec: &SpawnSpec) -> RunReport {
        RunReport {
            transcript: std::fs::read(spec.run_dir.join("transcript.jsonl")).ok(),
            ..RunReport::default()
        }
    }
}

/// Our own agent loop: `agency agent --config FILE`, the configuration
/// written into the run directory, the token in `AGENCY_TOKEN` (never in a
/// file), the API key in the environment variable the configuration names.
#[derive(Debug, Clone)]
pub struct BuiltinRuntime {
    pub program: PathBuf,
    pub cfg: crate::config::BuiltinConfig,
}

impl Runtime for BuiltinRuntime {
    fn name(&self) -> &str {
        "builtin"
    }

    fn command(&self, spec: &SpawnSpec) -> Result<Command, DaemonError> {
        let b = &self.cfg;
        // The agent inherits AGENCY_TOKEN and passes it on to the launchers
        // it starts, so no file holds the token.
        let servers: Vec<serde_json::Value> = spec
            .mcp_servers
            .iter()
            .map(|name| {
                let mut e = spec.launcher_entry(name, false);
                e["name"] = name.clone().into();
                e
            })
            .collect();
        let config = serde_json::json!({
            "api": b.api,
            "base_url": b.base_url,
            "model": b.model,
            "api_key_env": (!b.api_key_env.is_empty()).then_some(&b.api_key_env),
            "max_turns": b.max_turns,
            "max_total_tokens": b.max_total_tokens,
            "max_output_tokens": b.max_output_tokens,
            "mcp_url": spec.mcp_url,
            "mcp_token_env": "AGENCY_TOKEN",
            "system_prompt": spec.system_prompt,
            "initial_message": spec.initial_message,
            "transcript_path": spec.run_dir.join("transcript.jsonl"),
            "result_path": spec.run_dir.join("result.json"),
            "mcp_servers": servers,
        });
        let path = write_private(&spec.run_dir, "agent.json", config.to_string().as_bytes())?;
        let mut cmd = Command::new(&self.program);
        cmd.arg("agent")
            .arg("--config")
            .arg(path)
            .current_dir(&spec.workspace)
            .env("AGENCY_TOKEN", &spec.token);
        Ok(cmd)
    }

    fn collect(&self, spec: &SpawnSpec) -> RunReport {
        let mut report = RunReport {
            transcript: std::fs::read(spec.run_dir.join("transcript.jsonl")).ok(),
            ..RunReport::default()
        };
        // result.json is written once at exit; its absence means the process
        // was killed before it could finish.
        let result: Option<serde_json::Value> = std::fs::read(spec.run_dir.join("result.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        if let Some(r) = result {
            report.tool_calls = r["tool_calls"].as_i64();
            report.input_tokens = r["input_tokens"].as_i64();
            report.output_tokens = r["output_tokens"].as_i64();
            if let Some(ended) = r["ended"].as_str() {
                report.reason = ended.to_owned();
            }
        }
        report
    }
}

/// Write a file only its owner can read (tokens and prompts go there).
pub(crate) fn write_private(
    dir: &Path,
    name: &str,
    content: &[u8],
) -> Result<PathBuf, DaemonError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(name);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| DaemonError::io("create", &path, e))?;
    f.write_all(content)
        .map_err(|e| DaemonError::io("write", &path, e))?;
    Ok(path)
}
