//! Daemon-side records of agents' process groups: written at each spawn,
//! read at the next start to stop what a crashed daemon left running
//! before those agents are reaped.

use agency_core::AgentId;
use agency_store::AgentProcessRow;

use crate::Result;
use crate::error::ServiceError;
use crate::service::Service;

impl Service {
    /// Daemon: record the process group of a spawned agent (`started`: its
    /// leader's start time, which guards against a reused pid).
    pub fn agent_record_process(&self, agent: AgentId, pgid: u32, started: u64) -> Result<()> {
        self.write(|op| {
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
