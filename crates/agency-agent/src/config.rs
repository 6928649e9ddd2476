//! The agent's configuration: a JSON file written by the daemon's supervisor
//! (or by hand), loaded and validated before anything starts.
//!
//! Secrets never live in the file: it names the environment variables that
//! hold the LLM API key and the agent's MCP bearer token, so the file can be
//! logged, kept and shown without leaking anything.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{AgentError, ConfigError};

/// Which wire protocol the model server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// The Anthropic Messages API: `POST {base_url}/v1/messages`.
    Anthropic,
    /// An OpenAI-compatible chat-completions API (OpenAI, Ollama, vLLM,
    /// llama.cpp server, …): `POST {base_url}/v1/chat/completions`.
    Openai,
}

impl Api {
    pub fn as_str(self) -> &'static str {
        match self {
            Api::Anthropic => "anthropic",
            Api::Openai => "openai",
        }
    }
}

/// Retries of model calls that failed transiently (HTTP 429, 500, 502, 503,
/// 504, 529, connection errors, and errors in the middle of a stream).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetryConfig {
    /// Attempts per model call, the first one included (1 = never retry).
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
    /// The wait before the first retry; it doubles on every further retry.
    #[serde(default = "default_initial_backoff_ms")]
    pub initial_backoff_ms: u64,
    /// The longest wait between two attempts, also the cap on a server's
    /// `retry-after`.
    #[serde(default = "default_max_backoff_ms")]
    pub max_backoff_ms: u64,
}

fn default_max_attempts() -> u32 {
    5
}
fn default_initial_backoff_ms() -> u64 {
    1_000
}
fn default_max_backoff_ms() -> u64 {
    60_000
}
fn default_request_timeout_secs() -> u64 {
    300
}
fn default_max_output_tokens() -> u32 {
    8_192
}

impl Default for RetryConfig {
    fn default() -> Self {
        RetryConfig {
            max_attempts: default_max_attempts(),
            initial_backoff_ms: default_initial_backoff_ms(),
            max_backoff_ms: default_max_backoff_ms(),
        }
    }
}

/// Everything one agent run needs. Loaded from JSON by [`load_config`];
/// unknown fields are refused so a typo cannot silently drop a limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// `"anthropic"` or `"openai"`.
    pub api: Api,
    /// The model server's root URL, e.g. `https://api.anthropic.com`,
    /// `http://127.0.0.1:11434` (Ollama). `/v1/messages` or
    /// `/v1/chat/completions` is appended; a base URL that already ends in
    /// `/v1` (e.g. `https://api.openai.com/v1`) is accepted and the `/v1`
    /// is not doubled. See [`AgentConfig::endpoint`].
    pub base_url: String,
    /// The model name sent with every request.
    pub model: String,
    /// The name of the environment variable holding the API key. Omit it
    /// for servers that need none (Ollama, llama.cpp). The key is sent as
    /// `x-api-key` (Anthropic) or `Authorization: Bearer` (OpenAI).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// The most model calls the run may make before it is asked to save
    /// its state (which may take up to three more calls).
    pub max_turns: u32,
    /// Input plus output tokens summed over all calls; once reached the
    /// model is asked to save its state (up to three more calls).
    pub max_total_tokens: u64,
    /// `max_tokens` of each model call (default 8192).
    #[serde(default = "default_max_output_tokens")]
    pub max_output_tokens: u32,
    /// Agency's MCP endpoint, e.g. `http://127.0.0.1:7420/mcp`.
    pub mcp_url: String,
    /// The name of the environment variable holding the agent's bearer
    /// token for `mcp_url`.
    pub mcp_token_env: String,
    /// The system prompt (Agency's agent prompt).
    pub system_prompt: String,
    /// The first user message.
    pub initial_message: String,
    /// A JSONL file one line per event is appended to (created if absent).
    /// Omitted: no transcript.
    #[serde(default)]
    pub transcript_path: Option<PathBuf>,
    /// Where the [`RunSummary`](crate::RunSummary) JSON is written at exit
    /// (replaced atomically). Omitted: not written.
    #[serde(default)]
    pub result_path: Option<PathBuf>,
    /// Retries of transient model-call failures.
    #[serde(default)]
    pub retry: RetryConfig,
    /// The longest wait for a model server's response headers, for one
    /// MCP tool call, and for the next piece of a streamed answer
    /// (default 300).
    #[serde(default = "default_request_timeout_secs")]
    pub request_timeout_secs: u64,
    /// Extra MCP servers, each a child process speaking MCP on stdio (the
    /// daemon gives `agency mcp-launch NAME`). Their tools are offered to
    /// the model as `NAME__tool`.
    #[serde(default)]
    pub mcp_servers: Vec<StdioServer>,
    /// The workspace tools offered to the model, from
    /// [`WORKSPACE_TOOLS`](crate::WORKSPACE_TOOLS) (default: all of them;
    /// empty: none, MCP tools only).
    #[serde(default = "default_workspace_tools")]
    pub workspace_tools: Vec<String>,
    /// The directory the workspace tools work in: relative paths resolve
    /// against it and `bash` runs there. Omitted: the current directory
    /// when the run starts (the daemon starts the agent in its workspace).
    #[serde(default)]
    pub workspace: Option<PathBuf>,
    /// After its work is done (an answer without tool calls), how long the
    /// run stays alive waiting for mail in Agency's `mail_wait`, with no
    /// model call (warm agents); new mail continues the
    /// conversation. 0 (the default): the run ends.
    #[serde(default)]
    pub keep_warm_ms: u64,
}

fn default_workspace_tools() -> Vec<String> {
    crate::WORKSPACE_TOOLS
        .iter()
        .map(|t| (*t).to_owned())
        .collect()
}

/// One extra MCP server started as a child process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StdioServer {
    /// Letters, digits, `-` and `_`; the prefix of its tools' names.
    pub name: String,
    /// `"stdio"` when given (the `mcpServers` format's field).
    #[serde(default, rename = "type")]
    pub transport: Option<String>,
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// Added to the environment the child inherits.
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
}

/// Load and validate a configuration file.
pub fn load_config(path: impl AsRef<Path>) -> Result<AgentConfig, AgentError> {
    let path = path.as_ref();
    let text = std::fs::read_to_string(path).map_err(|e| AgentError::ReadConfig {
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    let cfg: AgentConfig = serde_json::from_str(&text).map_err(|e| AgentError::ReadConfig {
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    cfg.validate().map_err(|e| AgentError::ReadConfig {
        path: path.to_owned(),
        message: e.to_string(),
    })?;
    Ok(cfg)
}

impl AgentConfig {
    /// Check the values serde cannot: returns the first problem, naming
    /// the field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_url("base_url", &self.base_url)?;
        check_url("mcp_url", &self.mcp_url)?;
        if self.model.trim().is_empty() {
            return Err(ConfigError::Empty("model"));
        }
        if let Some(name) = &self.api_key_env {
            check_env_name("api_key_env", name)?;
        }
        check_env_name("mcp_token_env", &self.mcp_token_env)?;
        if self.max_turns == 0 {
            return Err(ConfigError::Zero("max_turns"));
        }
        if self.max_total_tokens == 0 {
            return Err(ConfigError::Zero("max_total_tokens"));
        }
        if self.max_output_tokens == 0 {
            return Err(ConfigError::Zero("max_output_tokens"));
        }
        if self.initial_message.trim().is_empty() {
            return Err(ConfigError::Empty("initial_message"));
        }
        if self.retry.max_attempts == 0 {
            return Err(ConfigError::Zero("retry.max_attempts"));
        }
        if self.retry.initial_backoff_ms > self.retry.max_backoff_ms {
            return Err(ConfigError::BackoffOrder);
        }
        if self.request_timeout_secs == 0 {
            return Err(ConfigError::Zero("request_timeout_secs"));
        }
        for (i, t) in self.workspace_tools.iter().enumerate() {
            if !crate::WORKSPACE_TOOLS.contains(&t.as_str()) {
                return Err(ConfigError::UnknownTool {
                    tool: t.clone(),
                    known: crate::WORKSPACE_TOOLS.join(", "),
                });
            }
            if self.workspace_tools[..i].contains(t) {
                return Err(ConfigError::ToolTwice(t.clone()));
            }
        }
        if let Some(w) = &self.workspace
            && !w.is_absolute()
        {
            return Err(ConfigError::RelativeWorkspace);
        }
        let mut seen = std::collections::HashSet::new();
        for s in &self.mcp_servers {
            let ok = !s.name.is_empty()
                && !s.name.contains("__")
                && s.name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            if !ok {
                return Err(ConfigError::ServerName(s.name.clone()));
            }
            if !seen.insert(s.name.as_str()) {
                return Err(ConfigError::ServerTwice(s.name.clone()));
            }
            if s.transport.as_deref().is_some_and(|t| t != "stdio") {
                return Err(ConfigError::ServerType {
                    name: s.name.clone(),
                    transport: s.transport.clone().unwrap_or_default(),
                });
            }
            if s.command.trim().is_empty() {
                return Err(ConfigError::ServerCommand(s.name.clone()));
            }
        }
        Ok(())
    }

    /// The URL model calls are posted to. The rule: `base_url` is the
    /// server's root; trailing slashes and one trailing `/v1` are removed,
    /// then `/v1/messages` (Anthropic) or `/v1/chat/completions` (OpenAI)
    /// is appended.
    pub fn endpoint(&self) -> String {
        let root = self.base_url.trim_end_matches('/');
        let root = root.strip_suffix("/v1").unwrap_or(root);
        match self.api {
            Api::Anthropic => format!("{root}/v1/messages"),
            Api::Openai => format!("{root}/v1/chat/completions"),
        }
    }

    pub fn request_timeout(&self) -> Duration {
        Duration::from_secs(self.request_timeout_secs)
    }
}

fn check_url(field: &'static str, url: &str) -> Result<(), ConfigError> {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
        .ok_or(ConfigError::UrlScheme(field))?;
    if rest.is_empty() || rest.starts_with('/') {
        return Err(ConfigError::UrlHost(field));
    }
    if url.chars().any(char::is_whitespace) {
        return Err(ConfigError::UrlWhitespace(field));
    }
    Ok(())
}

fn check_env_name(field: &'static str, name: &str) -> Result<(), ConfigError> {
    // Names, not values: a value pasted here by mistake would end up in
    // files that are not meant to hold secrets, so refuse anything that
    // does not look like a variable name.
    let ok = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(ConfigError::EnvName(field))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::{Value, json};

    fn base() -> Value {
        json!({
            "api": "anthropic",
            "base_url": "http://127.0.0.1:9",
            "model": "m",
            "api_key_env": "KEY",
            "max_turns": 3,
            "max_total_tokens": 1000,
            "mcp_url": "http://127.0.0.1:9/mcp",
            "mcp_token_env": "TOKEN",
            "system_prompt": "s",
            "initial_message": "go",
        })
    }

    fn parse(v: Value) -> Result<AgentConfig, String> {
        let cfg: AgentConfig = serde_json::from_value(v).map_err(|e| e.to_string())?;
        cfg.validate().map_err(|e| e.to_string())?;
        Ok(cfg)
    }

    #[test]
    fn defaults_fill_optional_fields() {
        let cfg = parse(base()).unwrap();
        assert_eq!(cfg.retry, RetryConfig::default());
        assert_eq!(cfg.max_output_tokens, 8192);
        assert_eq!(cfg.request_timeout_secs, 300);
        assert_eq!(cfg.transcript_path, None);
        assert_eq!(cfg.workspace_tools, crate::WORKSPACE_TOOLS);
        assert_eq!(cfg.workspace, None);
    }

    #[test]
    fn validation_table() {
        let cases: &[(&str, Value, &str)] = &[
            ("unknown field", json!({"temperature": 1}), "unknown field"),
            ("bad api", json!({"api": "gemini"}), "unknown variant"),
            (
                "no scheme",
                json!({"base_url": "127.0.0.1:1"}),
                "`base_url`",
            ),
            ("no host", json!({"base_url": "http://"}), "no host"),
            ("mcp url", json!({"mcp_url": "ftp://x"}), "`mcp_url`"),
            ("empty model", json!({"model": " "}), "`model`"),
            (
                "key value",
                json!({"api_key_env": "sk-ant-1"}),
                "`api_key_env`",
            ),
            ("token env", json!({"mcp_token_env": ""}), "`mcp_token_env`"),
            ("zero turns", json!({"max_turns": 0}), "`max_turns`"),
            (
                "zero tokens",
                json!({"max_total_tokens": 0}),
                "`max_total_tokens`",
            ),
            (
                "zero out",
                json!({"max_output_tokens": 0}),
                "`max_output_tokens`",
            ),
            (
                "no message",
                json!({"initial_message": ""}),
                "`initial_message`",
            ),
            (
                "attempts",
                json!({"retry": {"max_attempts": 0}}),
                "`retry.max_attempts`",
            ),
            (
                "backoff order",
                json!({"retry": {"initial_backoff_ms": 10, "max_backoff_ms": 5}}),
                "`retry.initial_backoff_ms`",
            ),
            (
                "retry typo",
                json!({"retry": {"attempts": 2}}),
                "unknown field",
            ),
            (
                "timeout",
                json!({"request_timeout_secs": 0}),
                "`request_timeout_secs`",
            ),
            (
                "unknown workspace tool",
                json!({"workspace_tools": ["bash", "Bash"]}),
                "\"Bash\" is not one of bash, read_file",
            ),
            (
                "workspace tool twice",
                json!({"workspace_tools": ["grep", "grep"]}),
                "appears twice",
            ),
            (
                "relative workspace",
                json!({"workspace": "ws"}),
                "`workspace` must be an absolute path",
            ),
        ];
        for (name, patch, needle) in cases {
            let mut v = base();
            for (k, val) in patch.as_object().unwrap() {
                v[k] = val.clone();
            }
            let err = parse(v).expect_err(name);
            assert!(err.contains(needle), "{name}: {err:?} lacks {needle:?}");
        }
        let mut missing = base();
        missing.as_object_mut().unwrap().remove("mcp_url");
        assert!(parse(missing).unwrap_err().contains("missing field"));
    }

    #[test]
    fn endpoint_appends_v1_once() {
        let mut cfg = parse(base()).unwrap();
        for (base_url, want) in [
            ("http://h:1", "http://h:1/v1/messages"),
            ("http://h:1/", "http://h:1/v1/messages"),
            ("http://h:1/v1", "http://h:1/v1/messages"),
            ("http://h:1/v1/", "http://h:1/v1/messages"),
            ("http://h:1/proxy/v1", "http://h:1/proxy/v1/messages"),
        ] {
            cfg.base_url = base_url.into();
            assert_eq!(cfg.endpoint(), want);
        }
        cfg.api = Api::Openai;
        cfg.base_url = "https://api.openai.com/v1".into();
        assert_eq!(cfg.endpoint(), "https://api.openai.com/v1/chat/completions");
    }

    #[test]
    fn load_config_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("agent.json");
        let err = load_config(&p).unwrap_err().to_string();
        assert!(
            err.starts_with("failed to read agent configuration"),
            "{err}"
        );
        assert!(err.contains("agent.json"), "{err}");
        std::fs::write(&p, base().to_string()).unwrap();
        assert_eq!(load_config(&p).unwrap().model, "m");
    }
}
