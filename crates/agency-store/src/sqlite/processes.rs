//! The process groups of spawned agents (pgid and the leader's start
//! time), read back at a restart to stop what a crashed daemon left.

use rusqlite::{Connection, params};

use super::convert::*;
use crate::model::AgentProcessRow;

pub(crate) fn put_agent_process(c: &Connection, r: &AgentProcessRow) -> R<()> {
    execute(
        c,
        "INSERT INTO agent_processes (agent, pgid, started) VALUES (?1, ?2, ?3)
         ON CONFLICT (agent) DO UPDATE SET pgid = ?2, started = ?3",
        params![r.agent.to_string(), r.pgid, r.started],
        || format!("record the process group of agent {}", r.agent),
    )
    .map(drop)
}

pub(crate) fn live_agent_processes(c: &Connection) -> R<Vec<AgentProcessRow>> {
    query_rows(
        c,
        "SELECT p.agent, p.pgid, p.started FROM agent_processes p
         JOIN agents a ON a.id = p.agent WHERE a.ended_at IS NULL ORDER BY p.agent",
        [],
        || "list the process groups of live agents".to_owned(),
        |r| {
            Ok(AgentProcessRow {
                agent: col_id(r, 0, "process agent")?,
                pgid: col(r, 1, "process group")?,
                started: col(r, 2, "process start time")?,
            })
        },
    )
}
