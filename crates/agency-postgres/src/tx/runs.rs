//! [`RunTx`] on PostgreSQL: agent runs (runtime, prompt hash, exit, usage,
//! transcript), progress detection, and stalled handlers.

use agency_core::{AgentId, HandlerId, Timestamp};
use agency_store::StoreError;
use agency_store::blob::BlobId;
use agency_store::model::{AgentRunRow, AgentWithRun};
use agency_store::tx::R;
use agency_store::tx::RunTx;
use tokio_postgres::Row;

use crate::PgTx;
use crate::convert::*;

/// The columns [`run_row`] reads, in order.
macro_rules! run_cols {
    () => {
        "agent, runtime, prompt_hash, exit_status, tool_calls, input_tokens, output_tokens, transcript, prompt_version, ended_how"
    };
}

/// An agent and its run (LEFT JOIN): `agent_cols!()` then [`run_cols`].
macro_rules! agent_with_run_cols {
    () => {
        concat!(
            "a.id, a.handler, a.started_at, a.ended_at, a.end_reason, r.",
            "agent, r.runtime, r.prompt_hash, r.exit_status, r.tool_calls, r.input_tokens, r.output_tokens, r.transcript, r.prompt_version, r.ended_how"
        )
    };
}

/// A run record from the columns of [`run_cols`] starting at `at`; `None`
/// when they are NULL (a LEFT JOIN that found no run).
fn opt_run_row(r: &Row, at: usize) -> R<Option<AgentRunRow>> {
    let agent: Option<String> = col(r, at, "run agent")?;
    agent.map(|_| run_row(r, at)).transpose()
}

fn run_row(r: &Row, at: usize) -> R<AgentRunRow> {
    let transcript: Option<String> = col(r, at + 7, "run transcript")?;
    Ok(AgentRunRow {
        agent: col_id(r, at, "run agent")?,
        runtime: col(r, at + 1, "run runtime")?,
        prompt_hash: col(r, at + 2, "run prompt hash")?,
        exit_status: col(r, at + 3, "run exit status")?,
        tool_calls: col(r, at + 4, "run tool calls")?,
        input_tokens: col(r, at + 5, "run input tokens")?,
        output_tokens: col(r, at + 6, "run output tokens")?,
        transcript: transcript
            .map(|t| BlobId::parse(&t).ok_or_else(|| StoreError::corrupt("transcript blob id", t)))
            .transpose()?,
        prompt_version: col(r, at + 8, "run prompt version")?,
        ended_how: col(r, at + 9, "run ended how")?,
    })
}

fn agent_with_run(r: &Row) -> R<AgentWithRun> {
    Ok(AgentWithRun {
        agent: agent_row(r)?,
        run: opt_run_row(r, 5)?,
    })
}

impl RunTx for PgTx<'_> {
    fn put_agent_run(&mut self, r: &AgentRunRow) -> R<()> {
        execute(
            self.conn,
            "INSERT INTO agent_runs (agent, runtime, prompt_hash, exit_status, tool_calls, input_tokens, output_tokens, transcript,
                 prompt_version, ended_how)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
             ON CONFLICT (agent) DO UPDATE SET runtime = $2, prompt_hash = $3, exit_status = $4, tool_calls = $5,
                 input_tokens = $6, output_tokens = $7, transcript = $8, prompt_version = $9, ended_how = $10",
            &[
                &r.agent.to_string(),
                &r.runtime,
                &r.prompt_hash,
                &r.exit_status,
                &r.tool_calls,
                &r.input_tokens,
                &r.output_tokens,
                &r.transcript.as_ref().map(BlobId::as_str),
                &r.prompt_version,
                &r.ended_how,
            ],
            || format!("record the run of agent {}", r.agent),
        )
        .map(drop)
    }

    fn agent_run(&mut self, agent: AgentId) -> R<Option<AgentRunRow>> {
        query_opt(
            self.conn,
            concat!("SELECT ", run_cols!(), " FROM agent_runs WHERE agent = $1"),
            &[&agent.to_string()],
            || format!("read the run of agent {agent}"),
            |r| run_row(r, 0),
        )
    }

    fn set_agent_run_log(&mut self, agent: AgentId, log: &BlobId) -> R<bool> {
        execute(
            self.conn,
            "UPDATE agent_runs SET log = $2 WHERE agent = $1",
            &[&agent.to_string(), &log.as_str()],
            || format!("record the output log of agent {agent}"),
        )
        .map(|n| n > 0)
    }

    fn agent_run_log(&mut self, agent: AgentId) -> R<Option<BlobId>> {
        let log: Option<Option<String>> = query_opt(
            self.conn,
            "SELECT log FROM agent_runs WHERE agent = $1",
            &[&agent.to_string()],
            || format!("read the output log of agent {agent}"),
            |r| col(r, 0, "run log"),
        )?;
        log.flatten()
            .map(|t| BlobId::parse(&t).ok_or_else(|| StoreError::corrupt("run log blob id", t)))
            .transpose()
    }

    fn set_run_prompt(&mut self, agent: AgentId, prompt: &BlobId, first: &BlobId) -> R<bool> {
        execute(
            self.conn,
            "UPDATE agent_runs SET prompt = $2, first_message = $3 WHERE agent = $1",
            &[&agent.to_string(), &prompt.as_str(), &first.as_str()],
            || format!("record the prompt of agent {agent}"),
        )
        .map(|n| n > 0)
    }

    fn run_prompt(&mut self, agent: AgentId) -> R<Option<(Option<BlobId>, Option<BlobId>)>> {
        let blob = |t: Option<String>| {
            t.map(|t| BlobId::parse(&t).ok_or_else(|| StoreError::corrupt("run prompt blob id", t)))
                .transpose()
        };
        let row: Option<(Option<String>, Option<String>)> = query_opt(
            self.conn,
            "SELECT prompt, first_message FROM agent_runs WHERE agent = $1",
            &[&agent.to_string()],
            || format!("read the prompt of agent {agent}"),
            |r| Ok((col(r, 0, "prompt")?, col(r, 1, "first message")?)),
        )?;
        row.map(|(p, f)| Ok((blob(p)?, blob(f)?))).transpose()
    }

    /// Agents with their runs, newest first: of the given handlers, or of
    /// every handler when `handlers` is `None`; only those started before
    /// `before` (paging: pass the last `started_at` seen). `seq`
    /// (insertion order) breaks ties within a millisecond.
    fn runs(
        &mut self,
        handlers: Option<&[HandlerId]>,
        before: Option<Timestamp>,
        n: usize,
    ) -> R<Vec<AgentWithRun>> {
        let before = before.map_or(i64::MAX, |t| t.0);
        match handlers {
            None => query_rows(
                self.conn,
                concat!(
                    "SELECT ",
                    agent_with_run_cols!(),
                    " FROM agents a LEFT JOIN agent_runs r ON r.agent = a.id WHERE a.started_at < $1",
                    " ORDER BY a.started_at DESC, a.seq DESC LIMIT $2"
                ),
                &[&before, &limit(n)],
                || "list agent runs".to_owned(),
                agent_with_run,
            ),
            Some(hs) => query_rows(
                self.conn,
                concat!(
                    "SELECT ",
                    agent_with_run_cols!(),
                    " FROM agents a LEFT JOIN agent_runs r ON r.agent = a.id",
                    " WHERE a.handler = ANY($1) AND a.started_at < $2",
                    " ORDER BY a.started_at DESC, a.seq DESC LIMIT $3"
                ),
                &[&text_list(hs), &before, &limit(n)],
                || format!("list the agent runs of {} handler(s)", hs.len()),
                agent_with_run,
            ),
        }
    }

    /// The most recently ended agent of a handler, with its run.
    fn last_ended_run(&mut self, h: HandlerId) -> R<Option<AgentWithRun>> {
        query_opt(
            self.conn,
            concat!(
                "SELECT ",
                agent_with_run_cols!(),
                " FROM agents a LEFT JOIN agent_runs r ON r.agent = a.id",
                " WHERE a.handler = $1 AND a.ended_at IS NOT NULL",
                // At most one agent of a handler is live at a time, so the
                // newest one started that has ended is the previous one;
                // seq (insertion order) breaks ties within a millisecond.
                " ORDER BY a.started_at DESC, a.seq DESC LIMIT 1"
            ),
            &[&h.to_string()],
            || format!("read the last run of handler {h}"),
            agent_with_run,
        )
    }

    fn agent_made_progress(&mut self, agent: AgentId) -> R<bool> {
        query_value(
            self.conn,
            "SELECT EXISTS (SELECT 1 FROM kb_audit WHERE agent = $1 AND action IN ('create', 'write'))
                 OR EXISTS (SELECT 1 FROM outcome_events WHERE agent = $1)",
            &[&agent.to_string()],
            || format!("check the progress of agent {agent}"),
        )
    }

    fn agent_logged(&mut self, agent: AgentId) -> R<bool> {
        query_value(
            self.conn,
            "SELECT EXISTS (SELECT 1 FROM handler_log WHERE agent = $1)",
            &[&agent.to_string()],
            || format!("check the audit summary of agent {agent}"),
        )
    }

    fn set_stalled(&mut self, h: HandlerId, at: Timestamp, reason: &str) -> R<()> {
        execute(
            self.conn,
            "INSERT INTO handler_stalls (handler, since, reason) VALUES ($1, $2, $3)
             ON CONFLICT (handler) DO UPDATE SET since = $2, reason = $3",
            &[&h.to_string(), &at.0, &reason],
            || format!("mark handler {h} stalled"),
        )
        .map(drop)
    }

    fn clear_stalled(&mut self, h: HandlerId) -> R<bool> {
        execute(
            self.conn,
            "DELETE FROM handler_stalls WHERE handler = $1",
            &[&h.to_string()],
            || format!("clear the stall of handler {h}"),
        )
        .map(|n| n > 0)
    }

    fn stalled(&mut self, h: HandlerId) -> R<Option<(Timestamp, String)>> {
        query_opt(
            self.conn,
            "SELECT since, reason FROM handler_stalls WHERE handler = $1",
            &[&h.to_string()],
            || format!("read the stall of handler {h}"),
            |r| Ok((col_ts(r, 0, "stall since")?, col(r, 1, "stall reason")?)),
        )
    }
}
