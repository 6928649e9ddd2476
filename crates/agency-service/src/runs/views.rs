//! Reading agent runs: listing a handler's runs, one run, its transcript,
//! and how the previous run of a handler ended (told to the next agent).
//!
//! Who may see what: the user sees every run. An agent sees the runs of
//! its own handler and of its direct underlings (a boss diagnosing a
//! stuck underling), as run records only. Transcripts are the user's
//! alone: they hold the results of every tool call, i.e. content of files
//! the run could read, which a boss (or a later agent of the same handler,
//! after a capability was revoked) may not.

pub use agency_api::{PreviousRun, RunView};
use agency_core::{AgentId, HandlerId, Principal, Timestamp};
use agency_store::{AgentWithRun, Tx};

use crate::Result;
use crate::error::ServiceError;
use crate::runs::{RunOutcome, RunReport};
use crate::service::{Caller, Service, System, authenticate};

/// How many pushes one run view lists (the audit log has them all).
pub const MAX_PUSHES_SHOWN: usize = 100;

/// The view of one agent's run.
fn run_view(r: AgentWithRun, now: Timestamp) -> RunView {
    {
        let AgentWithRun { agent: a, run } = r;
        let live = a.ended_at.is_none();
        let end = a.ended_at.unwrap_or(now);
        let run = run.as_ref();
        RunView {
            agent: a.id,
            handler: a.handler,
            started_at: a.started_at,
            ended_at: a.ended_at,
            end_reason: a.end_reason,
            runtime_ms: (end.0 - a.started_at.0).max(0),
            live,
            // A run the daemon recorded after this column existed has a
            // prompt version; without one, "no ended_how" proves nothing.
            normal: run
                .filter(|r| !live && r.prompt_version.is_some())
                .map(|r| r.ended_how.is_none()),
            ended_how: run.and_then(|r| r.ended_how.clone()),
            runtime: run.map(|r| r.runtime.clone()),
            prompt_version: run.and_then(|r| r.prompt_version),
            prompt_hash: run.map(|r| r.prompt_hash.clone()),
            exit_status: run.and_then(|r| r.exit_status),
            tool_calls: run.and_then(|r| r.tool_calls),
            input_tokens: run.and_then(|r| r.input_tokens),
            output_tokens: run.and_then(|r| r.output_tokens),
            transcript: run.and_then(|r| r.transcript.as_ref().map(|b| b.as_str().to_owned())),
            pushes: Vec::new(),
        }
    }
}

impl Service {
    /// Runs of a handler (or, for the user with `None`, of every handler),
    /// newest first; page with `before` (the last `started_at` seen). An
    /// agent may name its own handler (the default) or a direct underling.
    pub fn runs(
        &self,
        who: Principal,
        handler: Option<HandlerId>,
        before: Option<Timestamp>,
        limit: Option<usize>,
    ) -> Result<Vec<RunView>> {
        let limit = self.cfg.limits.page(limit);
        let now = self.now();
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            let handler = match (&caller, handler) {
                (Caller::User, h) => h,
                (Caller::Handler { row, .. }, h) => Some(h.unwrap_or(row.id)),
            };
            if let Some(h) = handler {
                may_see_runs_of(tx, &caller, h)?;
            }
            let rows = tx.runs(handler.as_ref().map(std::slice::from_ref), before, limit)?;
            Ok(rows.into_iter().map(|r| run_view(r, now)).collect())
        })
    }

    /// One run, for the user or an agent that may see its handler's runs.
    pub fn run(&self, who: Principal, agent: AgentId) -> Result<RunView> {
        let now = self.now();
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            let a = tx
                .agent(agent)?
                .ok_or_else(|| ServiceError::not_found("agent run", agent))?;
            // Someone who may not see the run learns nothing, not even
            // that it exists.
            may_see_runs_of(tx, &caller, a.handler)
                .map_err(|_| ServiceError::not_found("agent run", agent))?;
            let run = tx.agent_run(agent)?;
            let handler = a.handler;
            let mut view = run_view(AgentWithRun { agent: a, run }, now);
            view.pushes = tx
                .log_entries_of_agent(
                    handler,
                    agent,
                    crate::repo_push::PUSH_PREFIX,
                    MAX_PUSHES_SHOWN,
                )?
                .into_iter()
                .map(|e| e.summary)
                .collect();
            Ok(view)
        })
    }

    /// What a run was told when it started: its system prompt and first
    /// message. User only, like transcripts.
    pub fn run_prompt(&self, who: Principal, agent: AgentId) -> Result<agency_api::RunPrompt> {
        let (prompt, first) = self.read(|tx| {
            if !authenticate(tx, who)?.is_user() {
                return Err(ServiceError::denied(
                    "failed to read a run's prompt: only the user may; an agent reads its own in its context",
                ));
            }
            match tx.run_prompt(agent)? {
                None => Err(ServiceError::not_found("agent run", agent)),
                Some((Some(p), Some(f))) => Ok((p, f)),
                Some(_) => Err(ServiceError::invalid(format!(
                    "failed to read the prompt of agent {agent}: none was kept (an attached client, or a run from before prompts were kept)"
                ))),
            }
        })?;
        let text =
            |b| -> Result<String> { Ok(String::from_utf8_lossy(&self.blobs.get(b)?).into_owned()) };
        Ok(agency_api::RunPrompt {
            agent,
            system_prompt: text(&prompt)?,
            first_message: text(&first)?,
        })
    }

    /// A run's transcript as JSON events, one per line the runtime wrote (a
    /// line that is not JSON comes back as `{"unparsed": LINE}`, so nothing
    /// is dropped). User only, like [`Service::run_transcript`].
    pub fn run_transcript_events(
        &self,
        who: Principal,
        agent: AgentId,
    ) -> Result<agency_api::Transcript> {
        let bytes = self.run_transcript(who, agent)?;
        let events = String::from_utf8_lossy(&bytes)
            .lines()
            .filter_map(crate::runs::follow::transcript_event)
            .collect();
        Ok(agency_api::Transcript {
            agent,
            bytes: bytes.len(),
            events,
        })
    }

    /// A run's transcript, as the runtime wrote it (JSONL for the built-in
    /// loop, stream-json for Claude Code). User only: see the module doc.
    pub fn run_transcript(&self, who: Principal, agent: AgentId) -> Result<Vec<u8>> {
        self.run_transcript_stored(who, agent)?.ok_or_else(|| {
            ServiceError::invalid(format!(
                "failed to read the transcript of agent {agent}: none was recorded (the run is live: `agency transcript {agent} --follow` shows it as it goes; or it was killed before writing one, or is an attached client)"
            ))
        })
    }
}

/// [`Service::previous_run_abnormal`] inside a transaction (the spawn's
/// preparation reads it in its one transaction).
pub(crate) fn previous_run_abnormal(
    tx: &mut dyn Tx,
    handler: HandlerId,
) -> Result<Option<PreviousRun>> {
    let Some(last) = tx.last_ended_run(handler)? else {
        return Ok(None);
    };
    let how = match &last.run {
        Some(run) => run.ended_how.clone(),
        // No run record: the daemon never got to record the spawn
        // (it died first). Its end reason says what happened.
        None => last
            .agent
            .end_reason
            .clone()
            .filter(|r| r.starts_with("reaped") || r.starts_with("spawn failed")),
    };
    Ok(how.map(|ended_how| PreviousRun {
        agent: last.agent.id,
        started_at: last.agent.started_at,
        ended_at: last.agent.ended_at,
        ended_how,
    }))
}

/// The user sees every handler's runs; a handler its own and its direct
/// underlings'. Anything else is refused like a missing handler.
fn may_see_runs_of(tx: &mut dyn Tx, caller: &Caller, h: HandlerId) -> Result<()> {
    let row = tx
        .handler(h)?
        .ok_or_else(|| ServiceError::not_found("handler", h))?;
    match caller {
        Caller::User => Ok(()),
        Caller::Handler { row: me, .. } if row.id == me.id || row.boss == Some(me.id) => Ok(()),
        Caller::Handler { .. } => Err(ServiceError::not_found("handler", h)),
    }
}

/// How a run ended, when not normally: what the next agent is told.
/// `outcome` is known when the supervisor reports the end (not for reaped
/// agents, which are abnormal anyway).
pub(crate) fn ended_how(report: &RunReport, outcome: Option<RunOutcome>) -> Option<String> {
    let status = report
        .exit_status
        .map_or(String::new(), |s| format!(", exit status {s}"));
    let reason = if report.reason.is_empty() {
        "ended"
    } else {
        report.reason.as_str()
    };
    if !report.normal {
        return Some(format!("{reason}{status}"));
    }
    // Told to exit for a new MCP configuration, or stopped by a budget
    // (the built-in runtime's `budget: …`): it ended as it should, but
    // its work was interrupted all the same.
    if report.reason.starts_with("restarted") || report.reason.starts_with("budget:") {
        return Some(reason.to_owned());
    }
    match outcome {
        Some(o) if o.has_work && !o.made_progress => Some(format!(
            "{reason}{status} while work remained, without progress (no KB write, no outcome change)"
        )),
        _ => None,
    }
}

impl System {
    /// Supervisor: keep what a starting run is told (its system prompt and
    /// first message), for `agency run AGENT --prompt`. The blobs are put
    /// first, so a row never points at a missing one.
    pub fn agent_record_prompt(&self, agent: AgentId, prompt: &str, first: &str) -> Result<()> {
        let p = self.blobs.put(prompt.as_bytes())?;
        let f = self.blobs.put(first.as_bytes())?;
        self.write_lazy(|op| {
            if !op.tx.set_run_prompt(agent, &p, &f)? {
                return Err(ServiceError::not_found("agent run", agent));
            }
            Ok(())
        })
    }
}

impl System {
    /// Daemon: how the most recently ended agent of a handler ended, when
    /// that was not normally; decided from the stored run records, so it
    /// survives a daemon restart (reaped agents count).
    pub fn previous_run_abnormal(&self, handler: HandlerId) -> Result<Option<PreviousRun>> {
        self.read(|tx| previous_run_abnormal(tx, handler))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(reason: &str, normal: bool, status: Option<i64>) -> RunReport {
        RunReport {
            reason: reason.to_owned(),
            normal,
            exit_status: status,
            ..RunReport::default()
        }
    }

    #[test]
    fn ended_how_names_every_abnormal_end() {
        let ok = RunOutcome {
            made_progress: true,
            has_work: true,
        };
        let idle = RunOutcome {
            made_progress: false,
            has_work: true,
        };
        assert_eq!(ended_how(&report("exited", true, Some(0)), Some(ok)), None);
        assert_eq!(
            ended_how(&report("killed", false, None), Some(ok)).as_deref(),
            Some("killed")
        );
        assert_eq!(
            ended_how(&report("exited", false, Some(3)), Some(ok)).as_deref(),
            Some("exited, exit status 3")
        );
        assert!(
            ended_how(
                &report("restarted: its MCP servers changed", true, Some(0)),
                Some(ok)
            )
            .is_some_and(|s| s.starts_with("restarted"))
        );
        assert!(
            ended_how(&report("exited", true, Some(0)), Some(idle))
                .is_some_and(|s| s.contains("without progress"))
        );
        assert!(ended_how(&report("reaped: the daemon restarted", false, None), None).is_some());
    }
}
