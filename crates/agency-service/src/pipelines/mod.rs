//! Pipeline runs (seed 001): a run is a handler under the root
//! handler whose root outcome is the run; each stage is a child outcome of
//! it and, once it succeeded, has its validated artifact as a KB file
//! owned by the run's handler. The run stores the Pipeline Model it
//! started with, so it finishes with that whatever happens to the source.
//!
//! The user starts, lists and shows runs (`Service`); the daemon's engine
//! drives them (`System`, `engine.rs`): it takes the next stage with its
//! context, runs it, and hands back how it ended. The service decides what
//! is stored: an artifact only after it validated against its stage's
//! schema (`check.rs`), and again when it is read back for a later stage.
//! No agent is ever spawned for a run's handler (the store's "has work"
//! leaves pipeline handlers out): the engine is its only worker.

mod check;
mod engine;
mod facts;
pub use facts::replay_facts;
pub mod judge;
mod library;
mod scores;
mod tasks;

use agency_core::status::{PipelineRunStatus, StageStatus};
use agency_core::{HandlerId, OutcomeId, OutcomeStatus, Principal};
use agency_org::pipeline::{PipelineModel, StageKind};
use agency_store::{OutcomeRow, PipelineRunRow, PipelineStageRow, Tx};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

pub use crate::calls::stage::{StageCall, stage_call_id};
pub use agency_api::{PipelineRunSummary, PipelineRunView, PipelineStageView};
pub use check::{MAX_ARTIFACT_BYTES, MAX_STAGES};
pub use engine::{JUDGE_APPROVAL_TOOL, NextStage, PLAN_APPROVAL_TOOL, StageEnd};
pub(crate) use engine::{approval_decided, budgets_lifted};
pub(crate) use library::history as history_of;
pub use library::{
    EXAMPLE_MIN_SCORE, RECALL_EXAMPLES, RECALL_LESSONS, RECALL_PLAYBOOKS, Recalled, values_at,
    words_of,
};

use crate::Result;
use crate::error::ServiceError;
use crate::event_log::Record;
use crate::render::{Author, outcome_event, render_outcome_file};
use crate::service::{Service, authenticate};
use crate::tree::handlers::create_handler;
use crate::tree::outcomes::insert_outcome;
use agency_api::EventKind;

/// Most bytes of a run's input (its JSON).
pub const MAX_INPUT_BYTES: usize = 256 * 1024;

/// Most runs one listing returns.
pub const MAX_RUNS_LISTED: usize = 500;

/// What the user asks for when starting a run.
#[derive(Debug, Clone)]
pub struct PipelineStart {
    pub model: PipelineModel,
    pub input: Value,
    /// Permission level 0-3 (seed 001's Learner levels; 0 allows only
    /// ToolRunner's mock mode).
    pub level: i64,
    /// ToolRunner runs the allowed commands (needs level ≥ 1).
    pub live_tools: bool,
}

impl Service {
    /// The user starts a pipeline run: the model is re-checked, the input
    /// validated, and the run's handler, its outcome and one child outcome
    /// per stage are created in one transaction. The daemon's engine picks
    /// it up from there.
    pub fn pipeline_start(&self, who: Principal, start: PipelineStart) -> Result<PipelineRunView> {
        let m = &start.model;
        check::check_model(m)?;
        let input_bytes = serde_json::to_vec(&start.input)
            .map(|b| b.len())
            .unwrap_or(usize::MAX);
        if input_bytes > MAX_INPUT_BYTES {
            return Err(ServiceError::invalid(format!(
                "failed to start pipeline {:?}: its input is {input_bytes} bytes, more than {MAX_INPUT_BYTES}",
                m.name
            )));
        }
        check::check_input(m, &start.input)?;
        if !(0..=3).contains(&start.level) {
            return Err(ServiceError::invalid(format!(
                "failed to start pipeline {:?}: level {} is not one of 0, 1, 2, 3",
                m.name, start.level
            )));
        }
        if start.live_tools && start.level < 1 {
            return Err(ServiceError::invalid(format!(
                "failed to start pipeline {:?}: level 0 allows only ToolRunner's mock mode; give --level 1 or more for live tools",
                m.name
            )));
        }
        let model_json = serde_json::to_string(m).map_err(|e| {
            ServiceError::invalid(format!("failed to store pipeline {:?}: {e}", m.name))
        })?;
        let id = self.write(|op| {
            let caller = authenticate(op.tx, who)?;
            if !caller.is_user() {
                return Err(ServiceError::denied(
                    "failed to start a pipeline run: only the user starts pipeline runs",
                ));
            }
            // Each agent stage must fit an organisation that is up; the
            // run may then call exactly those agents.
            let targets = crate::calls::stage::resolve(op.tx, m)?;
            let root = op.tx.root_handler()?.ok_or_else(|| {
                ServiceError::invalid(
                    "failed to start a pipeline run: the organisation has no root handler yet",
                )
            })?;
            let run_outcome = OutcomeId::new_random();
            let h = HandlerId::from_root(run_outcome);
            crate::quotas::check_new_handler(op.tx, &self.cfg.limits, root.id, run_outcome)?;
            let a = Author {
                handler: None,
                agent: None,
            };
            let title = run_title(&m.name, &start.input);
            let now = op.now;
            let row = move |id, title: String, description: String| OutcomeRow {
                id,
                title,
                description,
                status: OutcomeStatus::Open,
                status_reason: None,
                priority: 0,
                perpetual: false,
                process_inbox: false,
                responsible: h,
                created_at: now,
                updated_at: now,
            };
            let run_row = row(run_outcome, title, m.description.clone());
            insert_outcome(
                op,
                &run_row,
                &[root.id.root()],
                a,
                "created",
                format!("pipeline run of {}", m.name),
            )?;
            create_handler(op, h, Some(root.id), a)?;
            crate::calls::stage::grant(op, h, run_outcome, &targets)?;
            op.tx.insert_pipeline_run(&PipelineRunRow {
                id: h,
                pipeline: m.name.clone(),
                model: model_json,
                input: start.input.to_string(),
                level: start.level,
                live_tools: start.live_tools,
                status: PipelineRunStatus::Running,
                stage: 0,
                created_at: op.now,
                updated_at: op.now,
                ended_at: None,
            })?;
            let n = m.stages.len();
            for (i, s) in m.stages.iter().enumerate() {
                let o = OutcomeId::new_random();
                let stage_row = row(
                    o,
                    format!("Stage {}/{n} of {}: {}", i + 1, m.name, s.name),
                    s.description.clone(),
                );
                // The run's outcome file is rendered once, after its last
                // child: rendering it per child was quadratic in stages.
                op.tx.insert_outcome(&stage_row)?;
                op.tx.insert_edge(run_outcome, o)?;
                outcome_event(
                    op,
                    o,
                    a,
                    "created",
                    format!("stage {} of pipeline run {h}", s.name),
                )?;
                render_outcome_file(op, o, a)?;
                op.emit(crate::events::Event::OutcomeStatusChanged {
                    outcome: o,
                    responsible: h,
                    status: OutcomeStatus::Open,
                });
                op.tx.insert_pipeline_stage(&PipelineStageRow {
                    run: h,
                    idx: i as i64,
                    name: s.name.clone(),
                    outcome: o,
                    status: StageStatus::Pending,
                    attempts: 0,
                    input_tokens: 0,
                    output_tokens: 0,
                    cost_micro_usd: 0,
                    artifact: None,
                    report: None,
                    started_at: None,
                    ended_at: None,
                })?;
            }
            render_outcome_file(op, run_outcome, a)?;
            op.record(
                Record::new(
                    EventKind::PipelineStarted,
                    Some(h),
                    format!(
                        "pipeline {} started ({n} stages, level {})",
                        m.name, start.level
                    ),
                )
                .outcome(run_outcome)
                .data(serde_json::json!({
                    "run": h, "pipeline": m.name, "stages": n,
                    "level": start.level, "live_tools": start.live_tools,
                })),
            );
            op.emit(crate::events::Event::PipelineRunReady { run: h });
            Ok(h)
        })?;
        self.pipeline_show(who, id)
    }

    /// The user stops an unfinished run: it is `stopped`, its outcome is
    /// closed (which retires its handler and ends the stage's agent, so a
    /// model call in flight is refused at its next step), and the engine
    /// takes no more of its stages. What its finished stages stored stays.
    pub fn pipeline_stop(&self, who: Principal, run: HandlerId) -> Result<PipelineRunView> {
        self.write(|op| {
            require_user(op.tx, who, "stop a pipeline run")?;
            let mut r = op
                .tx
                .pipeline_run(run)?
                .ok_or_else(|| ServiceError::not_found("pipeline run", run))?;
            if !r.status.is_unfinished() {
                return Err(ServiceError::invalid(format!(
                    "failed to stop pipeline run {run}: it is already {}",
                    r.status.as_str()
                )));
            }
            r.status = PipelineRunStatus::Stopped;
            r.ended_at = Some(op.now);
            r.updated_at = op.now;
            op.tx.update_pipeline_run(&r)?;
            tasks::close_plan_outcomes(op, &r)?;
            let a = Author {
                handler: None,
                agent: None,
            };
            if let Some(o) = op.tx.outcome(run.root())?
                && matches!(o.status, OutcomeStatus::Open | OutcomeStatus::Blocked)
            {
                crate::tree::outcomes::finish_outcome(
                    op,
                    o,
                    agency_core::StatusChange::Close,
                    "the user stopped the pipeline run",
                    a,
                )?;
            }
            op.record(
                Record::new(
                    EventKind::PipelineEnded,
                    Some(run),
                    format!(
                        "pipeline {} stopped by the user at stage {}",
                        r.pipeline, r.stage
                    ),
                )
                .outcome(run.root())
                .data(serde_json::json!({"run": run, "status": r.status, "stage": r.stage})),
            );
            Ok(())
        })?;
        self.pipeline_show(who, run)
    }

    /// The user lists runs, newest first; `unfinished` keeps only those the
    /// engine still carries on.
    pub fn pipeline_runs(
        &self,
        who: Principal,
        unfinished: bool,
        limit: Option<usize>,
    ) -> Result<Vec<PipelineRunSummary>> {
        let n = limit.unwrap_or(50).min(MAX_RUNS_LISTED);
        self.read(|tx| {
            require_user(tx, who, "list pipeline runs")?;
            let runs = tx.pipeline_runs(unfinished, n)?;
            runs.into_iter()
                .map(|r| {
                    let stages = tx.pipeline_stages(r.id)?;
                    Ok(summary(&r, &stages))
                })
                .collect()
        })
    }

    /// The user reads one run with every stage.
    pub fn pipeline_show(&self, who: Principal, run: HandlerId) -> Result<PipelineRunView> {
        self.read(|tx| {
            require_user(tx, who, "show a pipeline run")?;
            let r = tx
                .pipeline_run(run)?
                .ok_or_else(|| ServiceError::not_found("pipeline run", run))?;
            let stages = tx.pipeline_stages(run)?;
            let model = stored_model(&r)?;
            let detail = stages.iter().map(|s| stage_view(s, &model)).collect();
            Ok(PipelineRunView {
                run: summary(&r, &stages),
                input: serde_json::from_str(&r.input).unwrap_or(Value::Null),
                stages_detail: detail,
                learning: crate::lessons::learn::of_run(tx, run)?,
            })
        })
    }
}

fn require_user(tx: &mut dyn Tx, who: Principal, what: &str) -> Result<()> {
    if !authenticate(tx, who)?.is_user() {
        return Err(ServiceError::denied(format!(
            "failed to {what}: only the user may"
        )));
    }
    Ok(())
}

/// "Pipeline NAME: first line of the input", bounded.
fn run_title(name: &str, input: &Value) -> String {
    let text = match input {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    };
    let first = text.lines().next().unwrap_or("").trim();
    let mut t = format!("Pipeline {name}: {first}");
    if t.chars().count() > 120 {
        t = t.chars().take(119).collect::<String>() + "…";
    }
    t
}

pub(crate) fn stored_model(r: &PipelineRunRow) -> Result<Arc<PipelineModel>> {
    let cache = PARSED_MODELS.get_or_init(Default::default);
    // The cached model stands for exactly the stored text it was parsed
    // from: compared whole, so a run id reused by another store in this
    // process, or a changed row, is parsed again, never served stale.
    if let Some((text, model)) = cache
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&r.id)
        && *text == r.model
    {
        return Ok(model.clone());
    }
    let model: Arc<PipelineModel> = Arc::new(serde_json::from_str(&r.model).map_err(|e| {
        ServiceError::from(agency_store::StoreError::corrupt(
            "pipeline run model",
            format!("run {}: {e}", r.id),
        ))
    })?);
    let mut cache = cache.lock().unwrap_or_else(PoisonError::into_inner);
    if cache.len() >= PARSED_MODELS_KEPT {
        cache.clear();
    }
    cache.insert(r.id, (r.model.clone(), model.clone()));
    Ok(model)
}

/// How many runs' parsed models [`stored_model`] keeps before it forgets
/// them all (forgetting costs one parse each).
const PARSED_MODELS_KEPT: usize = 64;

/// Each run's model as parsed, with the text it was parsed from: the
/// engine reads it at every step of a run (twice a stage), and parsing an
/// eleven-stage model's JSON each time was a good part of a step's work.
static PARSED_MODELS: OnceLock<Mutex<HashMap<HandlerId, ParsedModel>>> = OnceLock::new();

type ParsedModel = (String, Arc<PipelineModel>);

fn summary(r: &PipelineRunRow, stages: &[PipelineStageRow]) -> PipelineRunSummary {
    PipelineRunSummary {
        id: r.id,
        pipeline: r.pipeline.clone(),
        status: r.status,
        stage: r.stage,
        stage_name: r
            .status
            .is_unfinished()
            .then(|| stages.get(r.stage as usize).map(|s| s.name.clone()))
            .flatten(),
        stages: stages.len() as i64,
        level: r.level,
        live_tools: r.live_tools,
        created_at: r.created_at,
        ended_at: r.ended_at,
    }
}

fn stage_view(s: &PipelineStageRow, model: &PipelineModel) -> PipelineStageView {
    let kind = model
        .stages
        .get(s.idx as usize)
        .map(|m| match m.kind {
            StageKind::Llm { .. } => "llm",
            StageKind::Agent { .. } => "agent",
            StageKind::Code { .. } => "code",
        })
        .unwrap_or("unknown");
    let error = s
        .report
        .as_deref()
        .and_then(|r| serde_json::from_str::<Value>(r).ok())
        .and_then(|v| v.get("error").and_then(Value::as_str).map(str::to_owned));
    PipelineStageView {
        idx: s.idx,
        name: s.name.clone(),
        kind: kind.to_owned(),
        outcome: s.outcome,
        status: s.status,
        attempts: s.attempts,
        input_tokens: s.input_tokens,
        output_tokens: s.output_tokens,
        cost_micro_usd: s.cost_micro_usd,
        artifact: s.artifact,
        error,
        started_at: s.started_at,
        ended_at: s.ended_at,
    }
}
