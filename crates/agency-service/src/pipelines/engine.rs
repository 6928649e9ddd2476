//! The engine's side of a run (daemon only, on [`System`]): take the next
//! stage with the context it reads, and record how it ended. A stage that
//! was running when the daemon stopped is handed out again (the engine
//! reruns it); a finished stage never is.

use agency_core::access::FileKind;
use agency_core::status::{PipelineRunStatus, StageStatus};
use agency_core::{FileId, HandlerId, OutcomeStatus, StatusChange};
use agency_org::pipeline::PipelineModel;
use agency_store::{FileRow, PipelineRunRow, PipelineStageRow};
use serde_json::{Map, Value};

use super::check::validate_artifact;
use super::stored_model;
use crate::Result;
use crate::agents::leases::{HeldLease, LeaseSpec, claim, fence};
use crate::error::ServiceError;
use crate::event_log::Record;
use crate::render::{Author, create_file, outcome_event, render_outcome_file};
use crate::service::{Op, System};
use crate::tree::outcomes::finish_outcome;
use agency_api::EventKind;

/// Most bytes of a stage's report (attempts, raw answers) kept; a larger
/// one is cut to its summary.
pub const MAX_REPORT_BYTES: usize = 512 * 1024;

/// What the engine is given to run one stage.
#[derive(Debug)]
pub struct NextStage {
    pub run: HandlerId,
    /// The stage's index in `model.stages`.
    pub idx: usize,
    /// The pipeline as the run started (shared: parsed once per run).
    pub model: std::sync::Arc<PipelineModel>,
    pub level: i64,
    pub live_tools: bool,
    /// `input` and the validated artifacts of the stages this one reads,
    /// by stage name.
    pub context: Map<String, Value>,
    /// For an llm stage: the stage's agent, started in the same
    /// transaction, whose token the engine calls the gateway with; ended
    /// by [`System::pipeline_stage_end`]. `Err`: why none could start (a
    /// paused budget, a limit), which ends the stage.
    pub agent: Option<std::result::Result<agency_api::MintedToken, ServiceError>>,
    /// For the built-in Retriever: what the pipeline's library recalled
    /// for the words of its reads.
    pub recalled: Option<super::Recalled>,
    /// The run's lease, when it was taken under one
    /// ([`System::pipeline_next_as`]): its end is recorded under it.
    pub lease: Option<HeldLease>,
}

/// How a stage ended, as the engine reports it.
#[derive(Debug, Clone)]
pub struct StageEnd {
    pub status: StageStatus,
    /// The output, for `ok` and `repaired` only; validated again here.
    pub artifact: Option<Value>,
    pub attempts: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_micro_usd: i64,
    /// The engine's record of the attempts (raw answers kept for
    /// diagnosis), stored beside the stage.
    pub report: Value,
    /// Why it failed, in one sentence.
    pub error: Option<String>,
    /// The stage's agent, ended with the stage.
    pub agent: Option<agency_core::AgentId>,
}

impl System {
    /// Daemon: runs the engine should carry on now (`running`), oldest
    /// first.
    pub fn pipeline_unfinished(&self) -> Result<Vec<HandlerId>> {
        self.read(|tx| {
            let mut runs = tx.pipeline_runs(true, super::MAX_RUNS_LISTED)?;
            runs.retain(|r| r.status == PipelineRunStatus::Running);
            runs.reverse();
            Ok(runs.into_iter().map(|r| r.id).collect())
        })
    }

    /// Daemon sharing the store with others (the runner's sweep): the
    /// unfinished runs whose lease is free (none, or lapsed) or
    /// `owner`'s, oldest first.
    pub fn pipeline_claimable(&self, owner: &str) -> Result<Vec<HandlerId>> {
        self.read(|tx| {
            let mut runs = tx.pipeline_runs(true, super::MAX_RUNS_LISTED)?;
            runs.retain(|r| r.status == PipelineRunStatus::Running);
            runs.reverse();
            let ids: Vec<HandlerId> = runs.into_iter().map(|r| r.id).collect();
            let now = tx.db_now()?;
            let held: std::collections::HashSet<HandlerId> = tx
                .leases_for(&ids)?
                .into_iter()
                .filter(|l| !crate::agents::leases::claimable_by(l, owner, now))
                .map(|l| l.handler)
                .collect();
            Ok(ids.into_iter().filter(|h| !held.contains(h)).collect())
        })
    }

    /// Daemon: the stage `run` is at, marked running, with its context;
    /// `None` when the run is not `running` (done, failed, waiting for the
    /// user). Every artifact read back is validated again.
    pub fn pipeline_next(&self, run: HandlerId) -> Result<Option<NextStage>> {
        self.pipeline_next_as(run, None)
    }

    /// [`System::pipeline_next`] for a daemon sharing the store: the run's
    /// handler's lease is claimed for `lease.owner` in the same
    /// transaction, and `None` (nothing written) when another daemon
    /// holds it. Taking over a lapsed lease ends the previous owner's
    /// stage agent, so a stage is driven by one daemon at a time.
    pub fn pipeline_next_as(
        &self,
        run: HandlerId,
        lease: Option<&LeaseSpec>,
    ) -> Result<Option<NextStage>> {
        let token = crate::agents::tokens::new_token();
        // Committed without an fsync (like a spawn's record): losing it to
        // a power cut loses nothing a restart would not redo, since a
        // pending stage and a running one are both handed out again.
        let taken = self.write_lazy(|op| {
            let Some(r) = op.tx.pipeline_run(run)? else {
                return Err(ServiceError::not_found("pipeline run", run));
            };
            if r.status != PipelineRunStatus::Running {
                return Ok(None);
            }
            let held = match lease {
                None => None,
                Some(spec) => match claim(op, run, spec)? {
                    None => return Ok(None),
                    Some(token) => Some(HeldLease {
                        handler: run,
                        token,
                    }),
                },
            };
            let model = stored_model(&r)?;
            let mut stages = op.tx.pipeline_stages(run)?;
            let idx = r.stage as usize;
            let (Some(spec), Some(row)) = (model.stages.get(idx), stages.get_mut(idx)) else {
                return Ok(None);
            };
            if row.status == StageStatus::Pending {
                row.status = StageStatus::Running;
                row.started_at = Some(op.now);
                op.tx.update_pipeline_stage(row)?;
                op.record(
                    Record::new(
                        EventKind::PipelineStageStarted,
                        Some(run),
                        format!("stage {} of pipeline {} started", spec.name, r.pipeline),
                    )
                    .outcome(row.outcome)
                    .data(serde_json::json!({"run": run, "stage": spec.name, "idx": idx})),
                );
            }
            // An agent left from a stage that did not end (the engine's
            // own: no other agent runs for a run's handler) ends now.
            for a in op.tx.live_agents_of(&[run])? {
                end_stage_agent(op, run, a.id, "pipeline_stage_abandoned")?;
            }
            let agent = match spec.kind {
                agency_org::pipeline::StageKind::Llm { .. } => Some(
                    crate::agents::tokens::start_with_token(op, run, &token, None)?,
                ),
                _ => None,
            };
            // What the stage reads: (name, artifact file) of earlier stages.
            let mut files = Vec::new();
            for read in &spec.reads {
                if read.stage == "input"
                    || read.stage == agency_org::pipeline::HISTORY
                    || read.stage == agency_org::pipeline::FACTS
                    || files.iter().any(|(n, _)| n == &read.stage)
                {
                    continue;
                }
                let earlier = stages[..idx].iter().find(|s| s.name == read.stage);
                let Some(file) = earlier.and_then(|s| s.artifact) else {
                    return Err(ServiceError::from(agency_store::StoreError::corrupt(
                        "pipeline run",
                        format!(
                            "run {run}: stage {} reads {}, which has no artifact",
                            spec.name, read.stage
                        ),
                    )));
                };
                let f = op
                    .tx
                    .file(file)?
                    .ok_or_else(|| ServiceError::not_found("KB file", file))?;
                let v = op
                    .tx
                    .version(file, f.latest_version)?
                    .ok_or_else(|| ServiceError::not_found("KB file", file))?;
                files.push((read.stage.clone(), v.hash));
            }
            Ok(Some((r, model, idx, files, agent, held)))
        })?;
        let Some((r, model, idx, files, agent, held)) = taken else {
            return Ok(None);
        };
        let mut context = Map::new();
        let input: Value = serde_json::from_str(&r.input).map_err(|e| {
            ServiceError::from(agency_store::StoreError::corrupt(
                "pipeline run input",
                e.to_string(),
            ))
        })?;
        context.insert("input".to_owned(), input);
        for (name, hash) in files {
            let bytes = self.blobs.get(&hash)?;
            let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
                ServiceError::from(agency_store::StoreError::corrupt(
                    "pipeline artifact",
                    format!("stage {name} of run {run}: {e}"),
                ))
            })?;
            let spec = model
                .stages
                .iter()
                .find(|s| s.name == name)
                .ok_or_else(|| ServiceError::not_found("pipeline stage", &name))?;
            validate_artifact(spec, &value)?;
            context.insert(name, value);
        }
        // What the library holds for this stage: read after the stage was
        // taken, so a run ending meanwhile is at most one run less recalled.
        let spec = &model.stages[idx];
        if spec
            .reads
            .iter()
            .any(|rd| rd.stage == agency_org::pipeline::HISTORY)
        {
            let words = super::words_of(context.values());
            let history = self.read(|tx| super::library::history(tx, &r.pipeline, &words))?;
            context.insert(agency_org::pipeline::HISTORY.to_owned(), history);
        }
        // The run's facts, computed from the store (never an answer) for
        // a stage that judges the run.
        if spec
            .reads
            .iter()
            .any(|rd| rd.stage == agency_org::pipeline::FACTS)
        {
            let facts = super::facts::facts_of(self, &r, &model, idx)?;
            context.insert(agency_org::pipeline::FACTS.to_owned(), facts);
        }
        let recalled = match &spec.kind {
            agency_org::pipeline::StageKind::Code { step } if step == "retriever" => {
                let words = super::words_of(
                    spec.reads
                        .iter()
                        .flat_map(|rd| super::values_at(&context, rd)),
                );
                // A write: each lesson recalled is logged with the run.
                Some(self.write(|op| super::library::recall(op, &r.pipeline, run, &words))?)
            }
            _ => None,
        };
        Ok(Some(NextStage {
            run,
            idx,
            model,
            level: r.level,
            live_tools: r.live_tools,
            context,
            agent,
            recalled,
            lease: held,
        }))
    }

    /// Daemon: record how stage `idx` of `run` ended. A succeeded stage's
    /// artifact is validated and stored as a KB file, its outcome
    /// completed, and the run moves on (and is done after its last stage);
    /// a failed stage stores no artifact, blocks its outcome with the
    /// reason, and stops the run there (`paused` when a budget was
    /// reached, else `failed`). Returns the run's status after it.
    pub fn pipeline_stage_end(
        &self,
        run: HandlerId,
        idx: usize,
        end: StageEnd,
    ) -> Result<PipelineRunStatus> {
        self.pipeline_stage_end_as(run, idx, end, None)
    }

    /// [`System::pipeline_stage_end`] as the holder of the run's lease
    /// token `token` (several daemons): refused with `LeaseLost`, changing
    /// nothing, when another daemon took the run over since.
    pub fn pipeline_stage_end_as(
        &self,
        run: HandlerId,
        idx: usize,
        end: StageEnd,
        token: Option<i64>,
    ) -> Result<PipelineRunStatus> {
        self.write(|op| {
            if let Some(token) = token {
                fence(op, run, token)?;
            }
            let Some(mut r) = op.tx.pipeline_run(run)? else {
                return Err(ServiceError::not_found("pipeline run", run));
            };
            let model = stored_model(&r)?;
            let mut stages = op.tx.pipeline_stages(run)?;
            let n = stages.len();
            let (Some(spec), Some(row)) = (model.stages.get(idx), stages.get_mut(idx)) else {
                return Err(ServiceError::not_found("pipeline stage", idx));
            };
            if r.status != PipelineRunStatus::Running
                || r.stage as usize != idx
                || row.status != StageStatus::Running
            {
                return Err(ServiceError::invalid(format!(
                    "failed to end stage {} of pipeline run {run}: the run is {} at stage {} and the stage is {}",
                    spec.name,
                    r.status.as_str(),
                    r.stage,
                    row.status.as_str()
                )));
            }
            if !end.status.is_terminal() {
                return Err(ServiceError::invalid(format!(
                    "failed to end stage {}: {} is not a terminal state",
                    spec.name,
                    end.status.as_str()
                )));
            }
            if let Some(agent) = end.agent {
                end_stage_agent(op, run, agent, "pipeline_stage_ended")?;
            }
            row.status = end.status;
            row.attempts += end.attempts.max(0);
            row.input_tokens += end.input_tokens.max(0);
            row.output_tokens += end.output_tokens.max(0);
            row.cost_micro_usd += end.cost_micro_usd.max(0);
            row.report = Some(bounded_report(&end));
            row.ended_at = Some(op.now);
            let a = Author { handler: None, agent: None };
            if end.status.succeeded() {
                let Some(artifact) = &end.artifact else {
                    return Err(ServiceError::invalid(format!(
                        "failed to end stage {} as {}: it has no artifact",
                        spec.name,
                        end.status.as_str()
                    )));
                };
                validate_artifact(spec, artifact)?;
                let file = FileId::new_random();
                let bytes = serde_json::to_vec_pretty(artifact).map_err(|e| {
                    ServiceError::invalid(format!("failed to store the artifact of stage {}: {e}", spec.name))
                })?;
                create_file(
                    op,
                    FileRow {
                        id: file,
                        kind: FileKind::Document,
                        description: format!(
                            "Artifact of stage {} of pipeline run {run} ({})",
                            spec.name, r.pipeline
                        ),
                        owner: Some(run),
                        created_at: op.now,
                        created_by: None,
                        latest_version: 0,
                    },
                    &bytes,
                    a,
                )?;
                row.artifact = Some(file);
                super::tasks::plan_outcomes(op, run, spec, row.outcome, artifact, file)?;
                let o = op
                    .tx
                    .outcome(row.outcome)?
                    .ok_or_else(|| ServiceError::not_found("outcome", row.outcome))?;
                finish_outcome(op, o, StatusChange::Complete, &format!("artifact kb://{file} validated"), a)?;
                r.stage += 1;
                if r.stage as usize >= n {
                    r.status = PipelineRunStatus::Done;
                    r.ended_at = Some(op.now);
                }
            } else {
                block_outcome(op, row, end.error.as_deref().unwrap_or(end.status.as_str()), a)?;
                r.status = if end.status == StageStatus::BudgetExhausted {
                    PipelineRunStatus::Paused
                } else {
                    PipelineRunStatus::Failed
                };
                if r.status == PipelineRunStatus::Failed {
                    r.ended_at = Some(op.now);
                }
            }
            op.tx.update_pipeline_stage(row)?;
            let stage_outcome = row.outcome;
            let (attempts, tokens_in, tokens_out, cost) =
                (row.attempts, row.input_tokens, row.output_tokens, row.cost_micro_usd);
            let artifact = row.artifact;
            r.updated_at = op.now;
            op.tx.update_pipeline_run(&r)?;
            op.record(
                Record::new(
                    EventKind::PipelineStageEnded,
                    Some(run),
                    format!(
                        "stage {} of pipeline {} ended {} after {attempts} call(s)",
                        spec.name,
                        r.pipeline,
                        end.status.as_str()
                    ),
                )
                .outcome(stage_outcome)
                .data(serde_json::json!({
                    "run": run, "stage": spec.name, "idx": idx,
                    "status": end.status, "attempts": attempts,
                    "input_tokens": tokens_in, "output_tokens": tokens_out,
                    "cost_micro_usd": cost, "artifact": artifact,
                    "error": end.error,
                })),
            );
            if !r.status.is_unfinished() || r.status == PipelineRunStatus::Paused {
                end_run(op, &r)?;
            }
            Ok(r.status)
        })
    }
}

/// Record a run's end (or pause); a done run's outcome is completed,
/// which retires its handler.
fn end_run(op: &mut Op<'_>, r: &PipelineRunRow) -> Result<()> {
    op.record(
        Record::new(
            EventKind::PipelineEnded,
            Some(r.id),
            format!(
                "pipeline {} {} at stage {}",
                r.pipeline,
                r.status.as_str(),
                r.stage
            ),
        )
        .outcome(r.id.root())
        // A done run joins its pipeline's portfolio (below, same transaction).
        .data(
            serde_json::json!({"run": r.id, "status": r.status, "stage": r.stage,
                                 "portfolio": r.status == PipelineRunStatus::Done}),
        ),
    );
    super::tasks::close_plan_outcomes(op, r)?;
    if r.status == PipelineRunStatus::Done {
        add_to_portfolio(op, r)?;
        let a = Author {
            handler: None,
            agent: None,
        };
        if let Some(o) = op.tx.outcome(r.id.root())?
            && o.status == OutcomeStatus::Open
        {
            finish_outcome(
                op,
                o,
                StatusChange::Complete,
                "every stage's artifact validated",
                a,
            )?;
        }
    }
    Ok(())
}

/// Add the done run `r` to its pipeline's portfolio, with every stage's
/// artifact (each validated when it was stored), and learn from it.
fn add_to_portfolio(op: &mut Op<'_>, r: &PipelineRunRow) -> Result<()> {
    let corrupt = |what: &str, e: String| {
        ServiceError::from(agency_store::StoreError::corrupt(
            "pipeline run",
            format!("run {}: {what}: {e}", r.id),
        ))
    };
    let input: Value =
        serde_json::from_str(&r.input).map_err(|e| corrupt("its input", e.to_string()))?;
    let mut artifacts = Vec::new();
    for s in op.tx.pipeline_stages(r.id)? {
        let Some(file) = s.artifact else { continue };
        let Some(f) = op.tx.file(file)? else { continue };
        let Some(v) = op.tx.version(file, f.latest_version)? else {
            continue;
        };
        let bytes = op.blobs.get(&v.hash)?;
        let value: Value = serde_json::from_slice(&bytes)
            .map_err(|e| corrupt(&format!("the artifact of stage {}", s.name), e.to_string()))?;
        artifacts.push((s.name, value));
    }
    super::library::add_example(op, r, &input, &artifacts)?;
    // The learning loop: recalled lessons marked, proposals applied.
    crate::lessons::learn::learn(op, r, &artifacts)
}

/// Block a failed stage's outcome with the reason.
fn block_outcome(op: &mut Op<'_>, row: &PipelineStageRow, why: &str, a: Author) -> Result<()> {
    let Some(mut o) = op.tx.outcome(row.outcome)? else {
        return Err(ServiceError::not_found("outcome", row.outcome));
    };
    o.status = OutcomeStatus::Blocked;
    o.status_reason = Some(why.chars().take(500).collect());
    o.updated_at = op.now;
    op.tx.update_outcome(&o)?;
    outcome_event(op, o.id, a, "blocked", why.chars().take(500).collect())?;
    render_outcome_file(op, o.id, a)?;
    Ok(())
}

/// The stage's report as stored: the engine's, with `error`, cut to its
/// summary past [`MAX_REPORT_BYTES`].
fn bounded_report(end: &StageEnd) -> String {
    let mut report = match &end.report {
        Value::Object(m) => m.clone(),
        other => {
            let mut m = Map::new();
            m.insert("report".to_owned(), other.clone());
            m
        }
    };
    if let Some(e) = &end.error {
        report.insert("error".to_owned(), Value::String(e.clone()));
    }
    let text = Value::Object(report).to_string();
    if text.len() <= MAX_REPORT_BYTES {
        return text;
    }
    serde_json::json!({
        "error": end.error,
        "truncated": format!("the report was {} bytes, more than {MAX_REPORT_BYTES}", text.len()),
        "attempts": end.attempts,
    })
    .to_string()
}

/// The tool name of a plan's approval request (seed 001's SafetyGuard:
/// one request per plan, bound to its hash).
pub const PLAN_APPROVAL_TOOL: &str = "pipeline:plan";

/// The tool name of a judge check's approval request: a scoring stage's
/// new rubric or grader moved the anchors' scores.
pub const JUDGE_APPROVAL_TOOL: &str = "pipeline:judge";

impl crate::service::Service {
    /// The engine, as the agent of a run's stage: admit the plan `plan`
    /// that SafetyGuard found needing approval. One approval request per
    /// plan, bound to the hash of its canonical JSON (a changed plan is a
    /// new request); while it is pending the run waits (`waiting`, in the
    /// user's "needs you"), and the user's decision sets it running again.
    pub fn pipeline_plan_admit(
        &self,
        who: agency_core::Principal,
        run: HandlerId,
        idx: usize,
        plan: &Value,
        reason: &str,
    ) -> Result<crate::Admission> {
        self.pipeline_admit(who, run, idx, PLAN_APPROVAL_TOOL, plan, reason)
    }

    /// [`Self::pipeline_plan_admit`] for anything a run's stage needs
    /// the user to approve, asked as tool `tool` (`pipeline:plan`,
    /// `pipeline:judge`).
    pub fn pipeline_admit(
        &self,
        who: agency_core::Principal,
        run: HandlerId,
        idx: usize,
        tool: &str,
        plan: &Value,
        reason: &str,
    ) -> Result<crate::Admission> {
        let args = serde_json::json!({ "run": run, "stage": idx, "plan": plan });
        let canonical = agency_core::policy::canonical_json(&args);
        let hash = crate::approvals::args_hash(&canonical);
        self.write(|op| {
            let caller = crate::service::authenticate(op.tx, who)?;
            if caller.handler() != Some(run) {
                return Err(ServiceError::denied(format!(
                    "failed to ask for the plan's approval: only the engine of pipeline run {run} may"
                )));
            }
            let Some(mut r) = op.tx.pipeline_run(run)? else {
                return Err(ServiceError::not_found("pipeline run", run));
            };
            if r.stage as usize != idx || r.status != PipelineRunStatus::Running {
                return Err(ServiceError::invalid(format!(
                    "failed to ask for the plan's approval: pipeline run {run} is {} at stage {}",
                    r.status.as_str(),
                    r.stage
                )));
            }
            let a = crate::approvals::ask(
                op,
                &caller,
                run,
                (tool, &hash, &canonical),
                agency_core::policy::Decision::ask(reason),
                crate::approvals::Use::Consume,
            )?;
            if matches!(a, crate::Admission::Pending { .. }) {
                r.status = PipelineRunStatus::Waiting;
                r.updated_at = op.now;
                op.tx.update_pipeline_run(&r)?;
            }
            Ok(a)
        })
    }
}

/// After the user decided approval requests of handler `h`: a pipeline
/// run of that handler waiting for it runs again. Whether `h` runs a
/// pipeline.
pub(crate) fn approval_decided(op: &mut Op<'_>, h: HandlerId) -> Result<bool> {
    let Some(mut r) = op.tx.pipeline_run(h)? else {
        return Ok(false);
    };
    if r.status == PipelineRunStatus::Waiting {
        r.status = PipelineRunStatus::Running;
        r.updated_at = op.now;
        op.tx.update_pipeline_run(&r)?;
        op.emit(crate::events::Event::PipelineRunReady { run: h });
    }
    Ok(true)
}

/// After budgets above some handlers were resumed or raised: every run a
/// reached budget paused that no pause holds now goes on at the stage it
/// stopped in (its counts kept), and its engine is told.
pub(crate) fn budgets_lifted(op: &mut Op<'_>) -> Result<()> {
    for mut r in op.tx.pipeline_runs(true, super::MAX_RUNS_LISTED)? {
        if r.status != PipelineRunStatus::Paused
            || crate::budgets::ledger::paused_by(op.tx, r.id)?.is_some()
        {
            continue;
        }
        let stages = op.tx.pipeline_stages(r.id)?;
        if let Some(s) = stages.get(r.stage as usize)
            && s.status == StageStatus::BudgetExhausted
        {
            let mut s = s.clone();
            s.status = StageStatus::Pending;
            s.ended_at = None;
            op.tx.update_pipeline_stage(&s)?;
            if let Some(mut o) = op.tx.outcome(s.outcome)?
                && o.status == OutcomeStatus::Blocked
            {
                o.status = OutcomeStatus::Open;
                o.status_reason = None;
                o.updated_at = op.now;
                op.tx.update_outcome(&o)?;
                let a = Author {
                    handler: None,
                    agent: None,
                };
                outcome_event(op, o.id, a, "open", "the budget was lifted".to_owned())?;
                render_outcome_file(op, o.id, a)?;
            }
        }
        r.status = PipelineRunStatus::Running;
        r.ended_at = None;
        r.updated_at = op.now;
        op.tx.update_pipeline_run(&r)?;
        op.record(
            Record::new(
                EventKind::PipelineStageStarted,
                Some(r.id),
                format!(
                    "pipeline {} resumed at stage {} (budget lifted)",
                    r.pipeline, r.stage
                ),
            )
            .data(serde_json::json!({"run": r.id, "idx": r.stage, "resumed": true})),
        );
        op.emit(crate::events::Event::PipelineRunReady { run: r.id });
    }
    Ok(())
}

/// End the stage's agent `agent` of run `run` with its token.
fn end_stage_agent(
    op: &mut Op<'_>,
    run: HandlerId,
    agent: agency_core::AgentId,
    why: &str,
) -> Result<()> {
    let ended = op.tx.end_agent(agent, op.now, why)?;
    op.tx.revoke_tokens_of(agent, op.now)?;
    if ended {
        op.emit(crate::events::Event::AgentEnded {
            agent,
            handler: run,
        });
    }
    Ok(())
}
