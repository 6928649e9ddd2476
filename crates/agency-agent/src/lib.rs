//! Agency's built-in agent runtime: the loop that runs ONE agent, an LLM
//! conversation whose tools are Agency's MCP tools and the workspace tools
//! the loop runs itself ([`WORKSPACE_TOOLS`]: `bash`, `read_file`,
//! `write_file`, `edit_file`, `glob`, `grep`), which act in the workspace
//! (the current directory at start, or `workspace`).
//!
//! The daemon's supervisor starts it as a subprocess (`agency agent
//! --config FILE`), passing an [`AgentConfig`] JSON file and the secrets in
//! environment variables the file names; it reads the [`RunSummary`] back
//! from `result_path` and the process exit code ([`RunSummary::exit_code`]).
//!
//! It speaks the Anthropic Messages API and any OpenAI-compatible
//! chat-completions API (OpenAI, Ollama, vLLM, llama.cpp server), always
//! streaming, through Agency's SSE parser (`agency-sse`) over reqwest and
//! lenient JSON reading, and Agency's MCP tools through rmcp's streamable-HTTP
//! client with the agent's bearer token.
//!
//! ```no_run
//! # async fn demo() -> Result<(), agency_agent::AgentError> {
//! let cfg = agency_agent::load_config("agent.json")?;
//! let summary = agency_agent::run(&cfg).await?;
//! std::process::exit(summary.exit_code());
//! # }
//! ```
//!
//! A configuration file (every field is documented on [`AgentConfig`];
//! `api_key_env`, `max_output_tokens`, `transcript_path`, `result_path`,
//! `retry`, `request_timeout_secs`, `mcp_servers`, `workspace_tools` and
//! `workspace` may be omitted):
//!
//! ```json
//! {
//!   "api": "anthropic",
//!   "base_url": "https://api.anthropic.com",
//!   "model": "claude-sonnet-4-5",
//!   "api_key_env": "ANTHROPIC_API_KEY",
//!   "max_turns": 50,
//!   "max_total_tokens": 2000000,
//!   "max_output_tokens": 8192,
//!   "mcp_url": "http://127.0.0.1:7420/mcp",
//!   "mcp_token_env": "AGENCY_TOKEN",
//!   "system_prompt": "…the agent prompt…",
//!   "initial_message": "You have unblocked work. Start with mail_inbox.",
//!   "transcript_path": "/home/me/.agency/run/A/transcript.jsonl",
//!   "result_path": "/home/me/.agency/run/A/result.json",
//!   "retry": {"max_attempts": 5, "initial_backoff_ms": 1000, "max_backoff_ms": 60000},
//!   "request_timeout_secs": 300,
//!   "workspace_tools": ["bash", "read_file", "write_file", "edit_file", "glob", "grep"]
//! }
//! ```
//!
//! Token accounting: every call re-sends the whole conversation, and each
//! call's reported input tokens are added up, so `max_total_tokens` bounds
//! what the run is billed, not the size of the context.
//!
//! Module map: `config` (the file), `anthropic` / `openai` (request
//! bodies and stream assembly), `client` (HTTP, retries, backoff), `mcp`
//! (MCP tools), `tools` (workspace tools), `run` (the loop and limits),
//! `transcript` (JSONL events, secret redaction), `summary` (the result).

mod anthropic;
mod client;
mod config;
mod error;
mod mcp;
mod model;
mod openai;
mod run;
mod summary;
mod tools;
mod transcript;
mod warm;

pub use config::{AgentConfig, Api, RetryConfig, load_config};
pub use error::{AgentError, ConfigError, McpError};
pub use run::{CALLS_AFTER_LIMIT, LIMIT_NOTICE, Secrets, run, run_with, run_with_secrets};
pub use summary::{Ended, RunSummary};
pub use tools::{WORKSPACE_TOOLS, WorkspaceTool, workspace_tool_list};
pub use warm::MailWaiter;
