//! Daemon-side records of agents' process groups: written at each spawn,
//! read at the next start to stop what a crashed daemon left running
//! before those agents are reaped.

use agency_core::AgentId;
use agency_store::AgentProcessRow;

use crate::Result;
use crate::error::ServiceError;
use crate::service::System;

impl System {
    /// Daemon: record the process group of a spawned agent (`started`: its
    /// leader's start time, which guards against a reused pid).
    ///
    /// Committed without waiting for the disk (`write_lazy`): the
    /// record lets a restarted daemon stop this group after the daemon
    /// died, which a lazy commit survives (the operating system holds it);
    /// a power loss that could lose it ends the group too. No fsync then
    /// competes with the agent's start.
    pub fn agent_record_process(&self, agent: AgentId, pgid: u32, started: u64) -> Result<()> {
        self.write_lazy(|op| {
            op.tx
                .agent(agent)?
                .ok_or_else(|| ServiceError::not_found("agent", agent))?;
            op.tx.put_agent_process(&AgentProcessRow {
                agent,
                pgid: i64::from(pgid),
                started: i64::try_from(started).unwrap_or(i64::MAX),
            })?;
            Ok(())
        })
    }

    /// Daemon, at start: the process groups of agents still recorded as
    /// live (before `agents_reap` ends them).
    pub fn live_agent_processes(&self) -> Result<Vec<AgentProcessRow>> {
        self.read(|tx| Ok(tx.live_agent_processes()?))
    }
}
