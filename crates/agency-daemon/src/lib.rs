//! The Agency daemon, the composition root: one process per home that
//! loads the configuration, opens the service, builds each part (the
//! model gateway, the egress proxy, the tools, the supervisor), mounts
//! their routes behind the identity guards, and owns the order of start-up
//! and shutdown. MCP goes to agents on 127.0.0.1 (`/mcp`, per-agent bearer
//! tokens); the REST API (`/v1`, the admin token) to the user's CLI on the
//! Unix socket `daemon.sock` in the home only.
//!
//! It decides no policy: permissions are the service's, the sandbox policy
//! the supervisor's, the configuration `agency-config`'s.

mod error;
mod hooks;
pub mod logging;
pub mod memory_embed;
mod problems;
mod rate_limit;
pub mod reload;
pub mod rest;
mod retention;
mod server;

pub use error::DaemonError;
pub use server::{Daemon, serve};

/// The home [`Daemon::start`] serves (configuration and its reading are
/// `agency-config`'s).
pub use agency_config::Home;
