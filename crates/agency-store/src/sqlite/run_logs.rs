//! The captured output (stdout/stderr) of agent runs: a blob id beside the
//! run record.

use agency_core::AgentId;
use rusqlite::{Connection, params};

use super::convert::*;
use crate::blob::BlobId;
use crate::error::StoreError;

pub(crate) fn set_agent_run_log(c: &Connection, agent: AgentId, log: &BlobId) -> R<bool> {
    execute(
        c,
        "UPDATE agent_runs SET log = ?2 WHERE agent = ?1",
        params![agent.to_string(), log.as_str()],
        || format!("record the output log of agent {agent}"),
    )
    .map(|n| n > 0)
}

pub(crate) fn agent_run_log(c: &Connection, agent: AgentId) -> R<Option<BlobId>> {
    let log: Option<Option<String>> = query_opt(
        c,
        "SELECT log FROM agent_runs WHERE agent = ?1",
        [agent.to_string()],
        || format!("read the output log of agent {agent}"),
        |r| col(r, 0, "run log"),
    )?;
    log.flatten()
        .map(|t| BlobId::parse(&t).ok_or_else(|| StoreError::corrupt("run log blob id", t)))
        .transpose()
}
