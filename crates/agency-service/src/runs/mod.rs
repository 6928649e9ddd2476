//! Daemon-side records of agent runs: what was spawned (runtime, prompt
//! hash), how it ended (exit status, usage, transcript), whether it made
//! progress, the automatic audit entry for an agent that left none, reaping
//! after a restart, and stalled handlers.

pub(crate) mod follow;
pub(crate) mod logs;
pub(crate) mod views;

use crate::event_log::Record;
use agency_api::EventKind;
use agency_core::{AgentId, HandlerId, MailTarget};
use agency_store::{AgentRow, AgentRunRow};
use serde::{Deserialize, Serialize};

use crate::Result;
use crate::error::ServiceError;
use crate::events::Event;
use crate::render::log;
use crate::render::{Author, render_audit_log_file};
use crate::service::{Caller, Op, Service, System};

/// How one agent run ended, as the supervisor observed it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunReport {
    /// Why it ended: `exited`, `killed`, `stalled`, `force_stopped`, …
    pub reason: String,
    /// False when it crashed, was killed, or failed its runtime's checks.
    pub normal: bool,
    pub exit_status: Option<i64>,
    pub tool_calls: Option<i64>,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    /// The transcript's bytes (JSONL), kept in the blob store.
    #[serde(skip)]
    pub transcript: Option<Vec<u8>>,
    /// The run's captured stdout/stderr, already bounded by the daemon;
    /// kept in the blob store (`agent_run_log` reads it).
    #[serde(skip)]
    pub log: Option<Vec<u8>>,
}

/// What the supervisor needs to decide about respawning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunOutcome {
    /// The agent created or wrote KB files or changed outcomes.
    pub made_progress: bool,
    /// The handler still has work (an open, non-perpetual outcome).
    pub has_work: bool,
}

impl Service {
    /// The run record of an agent (user only).
    pub fn agent_run(&self, who: agency_core::Principal, agent: AgentId) -> Result<AgentRunRow> {
        if !who.is_user() {
            return Err(ServiceError::denied(
                "failed to read an agent run: only the user may",
            ));
        }
        self.read(|tx| {
            tx.agent_run(agent)?
                .ok_or_else(|| ServiceError::not_found("agent run", agent))
        })
    }
}

/// End an agent that no process of ours will report on (a crashed or
/// superseded daemon's), in the caller's transaction.
pub(crate) fn finish_in(op: &mut Op<'_>, row: &AgentRow, report: &RunReport) -> Result<()> {
    finish(op, row, report, None, None)
}

fn finish(
    op: &mut Op<'_>,
    row: &AgentRow,
    report: &RunReport,
    transcript: Option<agency_store::BlobId>,
    outcome: Option<RunOutcome>,
) -> Result<()> {
    let ended = op.tx.end_agent(row.id, op.now, &report.reason)?;
    op.tx.revoke_tokens_of(row.id, op.now)?;
    let mut run = op
        .tx
        .agent_run(row.id)?
        .unwrap_or_else(|| AgentRunRow::spawned(row.id, "unknown", ""));
    // Only the first end counts: a stale report about an agent already
    // ended (e.g. reaped) must not rewrite how it ended.
    if ended {
        run.ended_how = views::ended_how(report, outcome);
    }
    run.exit_status = report.exit_status.or(run.exit_status);
    run.tool_calls = report.tool_calls.or(run.tool_calls);
    run.input_tokens = report.input_tokens.or(run.input_tokens);
    run.output_tokens = report.output_tokens.or(run.output_tokens);
    run.transcript = transcript.or(run.transcript);
    op.tx.put_agent_run(&run)?;
    if !op.tx.agent_logged(row.id)? {
        let how = if report.normal {
            "ended"
        } else {
            "ended abnormally"
        };
        let status = report
            .exit_status
            .map_or(String::new(), |s| format!(", exit status {s}"));
        log(
            op,
            row.handler,
            Some(row.id),
            format!(
                "(written by Agency) agent {} {how} without submitting an audit summary: {}{status}",
                row.id, report.reason
            ),
        )?;
        render_audit_log_file(op, row.handler, Author::default())?;
    }
    if ended {
        op.emit(Event::AgentEnded {
            agent: row.id,
            handler: row.handler,
        });
    }
    Ok(())
}

impl System {
    /// Daemon: record what was spawned for an agent.
    pub fn agent_record_spawn(
        &self,
        agent: AgentId,
        runtime: &str,
        prompt_hash: &str,
        prompt_version: u32,
    ) -> Result<()> {
        self.write(|op| {
            op.tx
                .agent(agent)?
                .ok_or_else(|| ServiceError::not_found("agent", agent))?;
            op.tx.put_agent_run(&AgentRunRow {
                prompt_version: Some(i64::from(prompt_version)),
                ..AgentRunRow::spawned(agent, runtime, prompt_hash)
            })?;
            Ok(())
        })
    }

    /// Daemon: an agent's process ended. Ends the agent (its token dies),
    /// stores usage and transcript, and appends an audit entry saying how it
    /// ended when the agent submitted none.
    pub fn agent_finish(&self, agent: AgentId, report: &RunReport) -> Result<RunOutcome> {
        self.agent_finish_as(agent, report, None)
    }

    /// [`System::agent_finish`] made as the holder of the handler's lease
    /// `token` (several daemons on one store): refused with `LeaseLost`,
    /// nothing recorded, when another daemon took the lease since.
    pub fn agent_finish_as(
        &self,
        agent: AgentId,
        report: &RunReport,
        token: Option<i64>,
    ) -> Result<RunOutcome> {
        let transcript = report
            .transcript
            .as_deref()
            .map(|t| self.blobs.put(t))
            .transpose()?;
        let log = report
            .log
            .as_deref()
            .map(|l| self.blobs.put(l))
            .transpose()?;
        self.write(|op| {
            let row = op
                .tx
                .agent(agent)?
                .ok_or_else(|| ServiceError::not_found("agent", agent))?;
            if let Some(token) = token {
                crate::agents::leases::fence(op, row.handler, token)?;
            }
            let outcome = RunOutcome {
                made_progress: op.tx.agent_made_progress(agent)?,
                has_work: op.tx.has_work(row.handler)?,
            };
            finish(op, &row, report, transcript.clone(), Some(outcome))?;
            if let Some(log) = &log {
                op.tx.set_agent_run_log(agent, log)?;
            }
            Ok(outcome)
        })
    }

    /// Daemon, at start: every agent recorded as live belonged to a process
    /// that is gone. End them, with an audit entry each.
    pub fn agents_reap(&self, reason: &str) -> Result<Vec<AgentRow>> {
        self.write(|op| {
            let live = op.tx.live_agents()?;
            for a in &live {
                let report = RunReport {
                    reason: reason.to_owned(),
                    normal: false,
                    ..RunReport::default()
                };
                finish(op, a, &report, None, None)?;
            }
            Ok(live)
        })
    }

    /// Daemon: stop spawning agents for a handler whose agents keep exiting
    /// without progress, and tell its boss (or the user). New mail to the
    /// handler clears the mark.
    pub fn handler_mark_stalled(&self, handler: HandlerId, reason: &str) -> Result<()> {
        self.cfg.limits.check_reason("stall reason", reason)?;
        self.write(|op| {
            let h = op.tx.handler(handler)?.ok_or_else(|| ServiceError::not_found("handler", handler))?;
            op.tx.set_stalled(handler, op.now, reason)?;
            op.record(
                Record::new(EventKind::HandlerStalled, Some(handler), format!("stalled: {reason}"))
                    .data(serde_json::json!({ "reason": reason })),
            );
            log(op, handler, None, format!("marked stalled: {reason}"))?;
            render_audit_log_file(op, handler, Author::default())?;
            let boss = h.boss.map_or(MailTarget::User, MailTarget::Handler);
            let title = op.tx.outcome(handler.root())?.map(|o| o.title).unwrap_or_default();
            let body = format!(
                "Handler {handler} (\"{title}\") is stalled: {reason}.\n\nAgency stopped starting agents for it. Read its audit log and state document, then write to it with guidance (new mail lets it run again), or force-stop it and reclaim its outcome."
            );
            // Sent in the stalled handler's name, like any report to a boss;
            // no agent of it is live, so the author has no agent id.
            let caller = Caller::Handler { row: h, agent: AgentId(uuid::Uuid::nil()) };
            op.notice(&caller, boss, &format!("Stalled: {title}"), &body);
            Ok(())
        })
    }

    /// Daemon: tell a handler's live agent that its MCP servers changed
    /// (seed 000: it saves its state and exits; the next agent gets the new
    /// configuration). Sent in the handler's own name, to itself, so the
    /// notice stays in its inbox for the next agent to acknowledge.
    pub fn notify_mcp_servers_changed(
        &self,
        handler: HandlerId,
        added: &[String],
        removed: &[String],
    ) -> Result<()> {
        let list = |v: &[String]| {
            if v.is_empty() {
                "none".to_owned()
            } else {
                v.join(", ")
            }
        };
        let body = format!(
            "Your MCP servers changed (added: {}; removed: {}). The running agent must save its state now (state_write, then audit_submit) and exit: the next agent is started with the new MCP configuration. If you are that next agent, your configuration is already current: acknowledge this message and go on.",
            list(added),
            list(removed)
        );
        self.write(|op| {
            let h = op.tx.handler(handler)?.ok_or_else(|| ServiceError::not_found("handler", handler))?;
            log(op, handler, None, format!("MCP servers changed (added: {}; removed: {}); agent told to save state and exit", list(added), list(removed)))?;
            render_audit_log_file(op, handler, Author::default())?;
            let caller = Caller::Handler { row: h, agent: AgentId(uuid::Uuid::nil()) };
            op.notice(&caller, MailTarget::Handler(handler), "MCP servers changed: save state and exit", &body);
            Ok(())
        })
    }

    /// Daemon: whether a handler is marked stalled (and why).
    pub fn handler_stalled(&self, handler: HandlerId) -> Result<Option<String>> {
        self.read(|tx| Ok(tx.stalled(handler)?.map(|(_, r)| r)))
    }
}
