//! The Agency home and its configuration: where the home is and what it
//! holds ([`Home`]), `agency.toml` parsed and checked ([`Config`] and its
//! sections, the template `agency init` writes), the secrets it declares
//! (read where a caller asks, kept out of logs), and [`live::Live`], a
//! setting `agency reload` may replace while the daemon runs.
//!
//! Reading the configuration checks every value, so that a mistake stops
//! the daemon before anything starts; messages name the file and the key.
//! This crate starts no server, runs no agent and sends nothing over the
//! network: the daemon and the CLI do that with what it returns.

pub mod api_limits;
pub mod claude_tools;
mod config;
mod error;
pub mod home;
pub mod live;
mod live_part;
pub mod mcp_manifest;
pub mod mcp_servers;
pub mod memory;
pub mod models;
pub mod sandbox;
pub mod secrets;
pub mod store;
pub mod telemetry;
pub mod template;
pub mod upstreams;
pub mod watch;

pub use config::{
    AgentsConfig, BuiltinConfig, ClaudeCodeConfig, CommandConfig, Config, LimitsConfig, LogConfig,
    ReposCacheConfig, RetentionConfig, ServerConfig,
};
pub use error::ConfigError;
pub use home::{DaemonInfo, Home, InitReport};
pub use sandbox::SandboxConfig;
