//! Agent runs (runtime, prompt hash, exit, usage, transcript), progress
//! detection, and stalled handlers.

use agency_core::{AgentId, HandlerId, Timestamp};
use rusqlite::{Connection, params};

use super::convert::*;
use crate::blob::BlobId;
use crate::error::StoreError;
use crate::model::AgentRunRow;

pub(crate) fn put_agent_run(c: &Connection, r: &AgentRunRow) -> R<()> {
    execute(
        c,
        "INSERT INTO agent_runs (agent, runtime, prompt_hash, exit_status, tool_calls, input_tokens, output_tokens, transcript)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT (agent) DO UPDATE SET runtime = ?2, prompt_hash = ?3, exit_status = ?4, tool_calls = ?5,
             input_tokens = ?6, output_tokens = ?7, transcript = ?8",
        params![
            r.agent.to_string(),
            r.runtime,
            r.prompt_hash,
            r.exit_status,
            r.tool_calls,
            r.input_tokens,
            r.output_tokens,
            r.transcript.as_ref().map(BlobId::as_str),
        ],
        || format!("record the run of agent {}", r.agent),
    )
    .map(drop)
}

pub(crate) fn agent_run(c: &Connection, agent: AgentId) -> R<Option<AgentRunRow>> {
    query_opt(
        c,
        "SELECT agent, runtime, prompt_hash, exit_status, tool_calls, input_tokens, output_tokens, transcript
         FROM agent_runs WHERE agent = ?1",
        [agent.to_string()],
        || format!("read the run of agent {agent}"),
        |r| {
            let transcript: Option<String> = col(r, 7, "run transcript")?;
            Ok(AgentRunRow {
                agent: col_id(r, 0, "run agent")?,
                runtime: col(r, 1, "run runtime")?,
                prompt_hash: col(r, 2, "run prompt hash")?,
                exit_status: col(r, 3, "run exit status")?,
                tool_calls: col(r, 4, "run tool calls")?,
                input_tokens: col(r, 5, "run input tokens")?,
                output_tokens: col(r, 6, "run output tokens")?,
                transcript: transcript
                    .map(|t| BlobId::parse(&t).ok_or_else(|| StoreError::corrupt("transcript blob id", t)))
                    .transpose()?,
            })
        },
    )
}

pub(crate) fn agent_made_progress(c: &Connection, agent: AgentId) -> R<bool> {
    query_value(
        c,
        "SELECT EXISTS (SELECT 1 FROM kb_audit WHERE agent = ?1 AND action IN ('create', 'write'))
             OR EXISTS (SELECT 1 FROM outcome_events WHERE agent = ?1)",
        [agent.to_string()],
        || format!("check the progress of agent {agent}"),
    )
}

pub(crate) fn agent_logged(c: &Connection, agent: AgentId) -> R<bool> {
    query_value(
        c,
        "SELECT EXISTS (SELECT 1 FROM handler_log WHERE agent = ?1)",
        [agent.to_string()],
        || format!("check the audit summary of agent {agent}"),
    )
}

pub(crate) fn set_stalled(c: &Connection, h: HandlerId, at: Timestamp, reason: &str) -> R<()> {
    execute(
        c,
        "INSERT INTO handler_stalls (handler, since, reason) VALUES (?1, ?2, ?3)
         ON CONFLICT (handler) DO UPDATE SET since = ?2, reason = ?3",
        params![h.to_string(), at.0, reason],
        || format!("mark handler {h} stalled"),
    )
    .map(drop)
}

pub(crate) fn clear_stalled(c: &Connection, h: HandlerId) -> R<bool> {
    execute(
        c,
        "DELETE FROM handler_stalls WHERE handler = ?1",
        [h.to_string()],
        || format!("clear the stall of handler {h}"),
    )
    .map(|n| n > 0)
}

pub(crate) fn stalled(c: &Connection, h: HandlerId) -> R<Option<(Timestamp, String)>> {
    query_opt(
        c,
        "SELECT since, reason FROM handler_stalls WHERE handler = ?1",
        [h.to_string()],
        || format!("read the stall of handler {h}"),
        |r| Ok((col_ts(r, 0, "stall since")?, col(r, 1, "stall reason")?)),
    )
}
