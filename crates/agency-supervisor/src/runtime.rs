//! Agent runtimes: how one agent process is started. A runtime turns a
//! [`SpawnSpec`] into a command and, after exit, reads back what the agent
//! reported (usage, transcript). The supervisor does the rest (process
//! group, workspace, token, waiting, killing).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use agency_core::{AgentId, HandlerId};
use agency_service::RunReport;
use tokio::process::Command;

use crate::beneath::AgentFile;
use agency_config::ConfigError;
use agency_config::mcp_servers::AGENCY_SERVER;
use agency_config::models::Api;
use agency_config::upstreams::{ModelRoute, ModelRoutes};

/// Everything a runtime needs to start one agent.
#[derive(Clone)]
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
    /// Per extra server, the single-use nonce its launcher presents to
    /// `POST /launch/NAME` (never logged).
    pub launch_nonces: BTreeMap<String, String>,
    /// The daemon's egress proxy, given to the agent as `HTTP(S)_PROXY`
    /// with its token as the password (`None`: no proxy variables).
    pub egress_proxy: Option<SocketAddr>,
    /// The model upstream the agent's handler was given (`agency model
    /// set`, inherited from the nearest boss that has one); `None`: the
    /// runtime's `upstream`.
    pub upstream: Option<String>,
    /// How long the agent stays alive after its work is done, waiting for
    /// mail (0: it exits). The built-in loop gets it in its
    /// configuration; the other runtimes ignore it.
    pub keep_warm_ms: u64,
}

impl std::fmt::Debug for SpawnSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The token and the nonces are credentials: never in a log line.
        f.debug_struct("SpawnSpec")
            .field("handler", &self.handler)
            .field("agent", &self.agent)
            .field("mcp_url", &self.mcp_url)
            .field("workspace", &self.workspace)
            .field("run_dir", &self.run_dir)
            .field("mcp_servers", &self.mcp_servers)
            .field("egress_proxy", &self.egress_proxy)
            .field("upstream", &self.upstream)
            .field("keep_warm_ms", &self.keep_warm_ms)
            .finish_non_exhaustive()
    }
}

/// The variables an agent process (and an extra MCP server) takes from its
/// parent's environment: what programs need to be found, to format text
/// and to trust the local certificate authorities (paths to public
/// certificates), nothing that could be a credential. `PATH` is the
/// daemon's own, so that the agent finds the programs the user has
/// installed. (Proxy variables may carry a password in their URL: give
/// them explicitly, e.g. in `agents.claude_code.env`.)
pub const INHERITED_ENV: &[&str] = &[
    "PATH",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "TZ",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
];

/// Used when the daemon itself has no `PATH`.
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Start `cmd` from an empty environment: [`INHERITED_ENV`] from the
/// daemon, a `HOME` and `TMPDIR` of the agent's own (inside its private run
/// directory, deleted after exit), and `AGENCY_AGENT` (the agent's id: the
/// mark by which a restarted daemon recognises a process as its own). The
/// runtime then adds exactly what it needs. Provider keys, `SSH_AUTH_SOCK`,
/// the sources of `[secrets]` and everything else the daemon's environment
/// holds never reach an agent.
pub fn clean_env(cmd: &mut Command, spec: &SpawnSpec) -> Result<(), ConfigError> {
    let home = spec.run_dir.join("home");
    let tmp = spec.run_dir.join("tmp");
    for d in [&home, &tmp] {
        std::fs::create_dir_all(d).map_err(|e| ConfigError::io("create", d, e))?;
    }
    cmd.env_clear();
    for k in INHERITED_ENV {
        if let Some(v) = std::env::var_os(k) {
            cmd.env(k, v);
        }
    }
    if std::env::var_os("PATH").is_none() {
        cmd.env("PATH", DEFAULT_PATH);
    }
    cmd.env("HOME", home)
        .env("TMPDIR", tmp)
        .env("AGENCY_AGENT", spec.agent.to_string());
    if let Some(addr) = spec.egress_proxy {
        for (k, v) in proxy_env(addr, &spec.token) {
            cmd.env(k, v);
        }
    }
    Ok(())
}

/// Hosts agents reach directly, not through the egress proxy: the daemon's
/// own listeners (MCP) are on loopback.
pub const NO_PROXY: &str = "127.0.0.1,localhost,::1";

/// The proxy variables an agent gets: both spellings,
/// as programs disagree on which they read (curl reads only the lowercase
/// `http_proxy`). The agent's token is the proxy password: it is already
/// the agent's, and it names the agent to the proxy.
pub fn proxy_env(addr: SocketAddr, token: &str) -> Vec<(&'static str, String)> {
    let url = format!("http://agent:{token}@{addr}");
    let mut env: Vec<(&'static str, String)> =
        ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"]
            .into_iter()
            .map(|k| (k, url.clone()))
            .collect();
    env.extend(["NO_PROXY", "no_proxy"].map(|k| (k, NO_PROXY.to_owned())));
    env
}

impl SpawnSpec {
    /// The daemon's model gateway for upstream `name`, on the listener the
    /// agent already reaches for MCP (`http://127.0.0.1:PORT/model/NAME`).
    pub fn gateway_url(&self, name: &str) -> String {
        let root = self.mcp_url.strip_suffix("/mcp").unwrap_or(&self.mcp_url);
        format!("{root}/model/{name}")
    }

    /// The variables a program that is not Agency's own gets to reach its
    /// model through the gateway: the SDKs' usual base URL and key
    /// variables, the key being the agent's own token (the gateway takes it
    /// as `x-api-key` or `Authorization: Bearer`), never a provider key.
    pub fn gateway_env(&self, route: &ModelRoute) -> Vec<(&'static str, String)> {
        let url = self.gateway_url(&route.upstream);
        let mut env = vec![
            ("AGENCY_MODEL_UPSTREAM", route.upstream.clone()),
            ("AGENCY_MODEL_API", route.api.as_str().to_owned()),
            ("AGENCY_MODEL_URL", url.clone()),
        ];
        if let Some(m) = &route.model {
            env.push(("AGENCY_MODEL", m.clone()));
        }
        match route.api {
            Api::Anthropic => env.extend([
                ("ANTHROPIC_BASE_URL", url),
                ("ANTHROPIC_API_KEY", self.token.clone()),
            ]),
            Api::OpenAi => env.extend([
                ("OPENAI_BASE_URL", format!("{url}/v1")),
                ("OPENAI_API_KEY", self.token.clone()),
            ]),
        }
        env
    }

    /// The stdio entry that starts extra server `name` through the
    /// launcher. It carries the agent's token (already in the agent's own
    /// configuration) and the spawn's single-use launch nonce for that
    /// server, never a secret: the launcher fetches those, once.
    fn launcher_entry(&self, name: &str, with_token: bool) -> serde_json::Value {
        let mut env = serde_json::Map::new();
        env.insert("AGENCY_MCP_URL".into(), self.mcp_url.clone().into());
        if with_token {
            env.insert("AGENCY_TOKEN".into(), self.token.clone().into());
        }
        if let Some(nonce) = self.launch_nonces.get(name) {
            env.insert("AGENCY_LAUNCH_NONCE".into(), nonce.clone().into());
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
    fn command(&self, spec: &SpawnSpec) -> Result<Command, ConfigError>;
    /// After exit: what the agent reported (usage, transcript), if anything.
    fn collect(&self, spec: &SpawnSpec) -> RunReport;
    /// Programs the command starts besides its own (Claude Code's CLI,
    /// run through `/bin/sh`): the sandbox lets the agent read them.
    fn programs(&self) -> Vec<String> {
        Vec::new()
    }
    /// Whether its agents stay warm when their handler's keep-warm time
    /// says so (`SpawnSpec::keep_warm_ms`); otherwise they are started
    /// with 0 and exit when their work is done.
    fn keeps_warm(&self) -> bool {
        false
    }
}

/// A configured command: the agent's token, MCP URL and prompt reach it in
/// the environment (`AGENCY_TOKEN`, `AGENCY_MCP_URL`, `AGENCY_PROMPT_FILE`,
/// `AGENCY_MESSAGE_FILE`, `AGENCY_HANDLER`, `AGENCY_AGENT`), and its whole
/// MCP configuration (Agency's server and the extra ones) in the file
/// `AGENCY_MCP_CONFIG` names; nothing else of the daemon's environment but
/// [`INHERITED_ENV`]. With a model upstream (`agents.command.upstream`
/// or the handler's own) it also gets the gateway in the SDKs' variables
/// ([`SpawnSpec::gateway_env`]). Used for custom agents and in tests.
#[derive(Debug, Clone)]
pub struct CommandRuntime {
    pub program: String,
    pub args: Vec<String>,
    pub routes: ModelRoutes,
}

impl Runtime for CommandRuntime {
    fn name(&self) -> &str {
        "command"
    }

    fn command(&self, spec: &SpawnSpec) -> Result<Command, ConfigError> {
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
        clean_env(&mut cmd, spec)?;
        cmd.args(&self.args)
            .current_dir(&spec.workspace)
            .env("AGENCY_MESSAGE_FILE", message)
            .env("AGENCY_TOKEN", &spec.token)
            .env("AGENCY_MCP_URL", &spec.mcp_url)
            .env("AGENCY_PROMPT_FILE", prompt)
            .env("AGENCY_MCP_CONFIG", mcp)
            .env("AGENCY_HANDLER", spec.handler.to_string());
        if let Some(route) = self.routes.route(spec.upstream.as_deref()) {
            cmd.envs(spec.gateway_env(&route));
        }
        Ok(cmd)
    }

    fn collect(&self, spec: &SpawnSpec) -> RunReport {
        RunReport {
            transcript: read_transcript(&spec.run_dir),
            ..RunReport::default()
        }
    }
}

/// Our own agent loop: `agency agent --config FILE`, the configuration
/// written into the run directory, the token in `AGENCY_TOKEN` (never in a
/// file). Its model is the daemon's gateway, with the token as the key: no
/// provider key and nothing of the daemon's environment but
/// [`INHERITED_ENV`] reaches it.
#[derive(Debug, Clone)]
pub struct BuiltinRuntime {
    pub program: PathBuf,
    pub cfg: agency_config::BuiltinConfig,
    pub routes: ModelRoutes,
}

impl Runtime for BuiltinRuntime {
    fn name(&self) -> &str {
        "builtin"
    }

    /// The loop waits in `mail_wait` itself, with no model call.
    fn keeps_warm(&self) -> bool {
        true
    }

    fn command(&self, spec: &SpawnSpec) -> Result<Command, ConfigError> {
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
        // Through the model gateway, the agent's token is its model key.
        let route =
            self.routes
                .route(spec.upstream.as_deref())
                .ok_or_else(|| ConfigError::Invalid {
                    path: PathBuf::from("agency.toml"),
                    message: "agents.builtin needs an upstream, a [models.NAME]".to_owned(),
                })?;
        let config = serde_json::json!({
            "api": route.api.as_str(),
            "base_url": spec.gateway_url(&route.upstream),
            "model": route.model.as_deref().unwrap_or(&b.model),
            "api_key_env": "AGENCY_TOKEN",
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
            "workspace_tools": b.tools,
            "keep_warm_ms": spec.keep_warm_ms,
        });
        let path = write_private(&spec.run_dir, "agent.json", config.to_string().as_bytes())?;
        let mut cmd = Command::new(&self.program);
        clean_env(&mut cmd, spec)?;
        cmd.arg("agent")
            .arg("--config")
            .arg(path)
            .current_dir(&spec.workspace)
            .env("AGENCY_TOKEN", &spec.token);
        Ok(cmd)
    }

    fn collect(&self, spec: &SpawnSpec) -> RunReport {
        let mut report = RunReport {
            transcript: read_transcript(&spec.run_dir),
            ..RunReport::default()
        };
        // result.json is written once at exit; its absence means the process
        // was killed before it could finish. A few numbers: anything larger
        // than a page is not one.
        let result: Option<serde_json::Value> = match crate::beneath::read_bounded(
            &spec.run_dir.join("result.json"),
            RESULT_MAX_BYTES,
            0,
        ) {
            AgentFile::Bytes(b) if b.len() < RESULT_MAX_BYTES => serde_json::from_slice(&b).ok(),
            _ => None,
        };
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

/// The most of a transcript kept from its start and its end: bounded like
/// run logs, since the agent writes it and could make it any size (300
/// MiB was read whole and kept for good).
pub const TRANSCRIPT_HEAD_BYTES: usize = 1 << 20;
pub const TRANSCRIPT_TAIL_BYTES: usize = 15 << 20;
/// The largest `result.json` read.
const RESULT_MAX_BYTES: usize = 64 << 10;

/// The run's `transcript.jsonl`, written by the agent: read without
/// following a symlink or blocking on a FIFO, head and tail bounded
/// (`beneath.rs`). A file refused is logged and not kept.
pub fn read_transcript(run_dir: &Path) -> Option<Vec<u8>> {
    let path = run_dir.join("transcript.jsonl");
    match crate::beneath::read_bounded(&path, TRANSCRIPT_HEAD_BYTES, TRANSCRIPT_TAIL_BYTES) {
        AgentFile::Bytes(b) => Some(b),
        AgentFile::Missing => None,
        AgentFile::Refused(why) => {
            tracing::warn!(reason = %why, "failed to read an agent's transcript: not kept");
            None
        }
    }
}

/// Write a file only its owner can read (tokens and prompts go there).
pub fn write_private(dir: &Path, name: &str, content: &[u8]) -> Result<PathBuf, ConfigError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(name);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| ConfigError::io("create", &path, e))?;
    f.write_all(content)
        .map_err(|e| ConfigError::io("write", &path, e))?;
    Ok(path)
}
