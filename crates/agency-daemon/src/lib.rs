//! The Agency daemon: one process per home that owns the store and serves
//! MCP to agents (`/mcp`, per-agent bearer tokens) and the REST API to the
//! user's CLI (`/v1`, the admin token), on 127.0.0.1 only.
//!
//! The daemon authenticates callers and hands their `Principal` to the
//! service layer; it decides no permission itself. (The scheduler and
//! agent supervisor arrive with the agent-runtimes issue.)

mod activity;
pub mod api;
pub mod claude;
mod config;
mod error;
mod home;
mod http_auth;
mod process;
mod repos;
mod rest;
pub mod runtime;
mod server;
mod supervisor;

pub use config::{
    AgentsConfig, BuiltinConfig, ClaudeCodeConfig, CommandConfig, Config, LimitsConfig,
    ServerConfig,
};
pub use error::DaemonError;
pub use home::{DaemonInfo, Home, InitReport};
pub use server::{Daemon, serve};
