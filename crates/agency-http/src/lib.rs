//! HTTP plumbing every listener of the daemon shares: the JSON error body
//! and the map from a service error to its status ([`answer`]), the
//! identity guards ([`guard`]: loopback `Host`/`Origin`, the admin token,
//! agents' tokens) and the clock of each agent's last authenticated call
//! ([`Activity`]) that the agent guard touches.
//!
//! Invariant: identity only. Nothing here decides a permission; the
//! guards hand the caller's identity to handlers, which ask the service.

mod activity;
pub mod answer;
pub mod events;
pub mod guard;

pub use activity::Activity;
pub use answer::{Answer, BadRequest, call, error, limited, parse, service_error};
pub use guard::{
    AdminHash, AgentGuard, ListenerPort, admin_only, agent_only, agent_only_with, bearer,
    loopback_only,
};
