//! The Agency daemon: one process per home that owns the store and serves
//! MCP to agents (`/mcp`, per-agent bearer tokens, on 127.0.0.1) and the
//! REST API to the user's CLI (`/v1`, the admin token, on the Unix socket
//! `daemon.sock` in the home only).
//!
//! The daemon authenticates callers and hands their `Principal` to the
//! service layer; it decides no permission itself. It also runs agents
//! (the scheduler and supervisor, the runtimes), reads secrets at start and
//! hands them only to the launchers of the extra MCP servers a handler may
//! use, and keeps the repo cache. The home and its configuration are read
//! by `agency-config`.

mod activity;
mod agent_log;
mod beneath;
pub mod claude;
mod confine;
pub mod egress;
mod error;
mod gateway;
mod http_auth;
pub mod launch;
pub mod logging;
pub mod mcp_guard;
mod mcp_proxy;
mod mcp_stdio;
pub mod memory_embed;
pub mod models;
mod org_tools;
mod process;
mod rate_limit;
pub mod reload;
pub mod rest;
mod retention;
pub mod runtime;
mod server;
mod supervisor;
pub mod tool_check;
mod warm;

pub use error::DaemonError;
pub use server::{Daemon, serve};

/// The home [`Daemon::start`] serves (configuration and its reading are
/// `agency-config`'s).
pub use agency_config::Home;
