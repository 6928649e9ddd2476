//! Runs agents: the scheduler and supervisor ([`Supervisor`], a dispatcher
//! that owns all run state and reacts to messages), the runtimes that build
//! an agent's command ([`runtime`], [`claude`]), the sandbox policy each
//! spawn runs under ([`confine`]), process groups ([`process`]), captured
//! output ([`agent_log`]), the live runs their followers read ([`live`],
//! [`tail`]) and warm agents ([`warm`]).
//!
//! Invariant: every agent process runs in a process group of its own,
//! under the policy [`confine::Confiner`] wrote outside the agent's
//! writable places, and is stopped (grace, then kill) with its handler.
//! What other parts keep per agent (launch nonces, egress keys, stdio
//! servers) they learn of through [`AgentHooks`]; the supervisor sees no
//! HTTP state.

pub mod agent_log;
mod beneath;
pub mod claude;
pub mod confine;
pub mod live;
pub mod process;
pub mod runtime;
mod supervisor;
pub mod tail;
pub mod warm;

pub use live::{LiveRun, LiveRuns};
pub use supervisor::{AgentHooks, LeaseSettings, Reconfigure, Supervisor, SupervisorSetup};
