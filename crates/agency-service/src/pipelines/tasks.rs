//! A plan stage's items as outcomes (AgencyCore's Planner
//! tasks in the run's DAG).
//!
//! When a stage whose model declares `outcomes:` ends ok, each item of its
//! validated artifact becomes an outcome under the stage's outcome, in the
//! transaction that stores the artifact; "B depends on A" is the edge B→A
//! (a parent's children are what it needs done first). The artifact was
//! checked a DAG of unique ids before (`check.rs`, the same check as the
//! engine's contract), so the edges make no cycle.
//!
//! They are the plan, not work anyone was given: the run's handler is
//! responsible for them and no agent is spawned for it. While the run
//! goes on, waits for an approval or is paused by a budget they stay
//! open; when it ends (done, failed or stopped) each one still open is
//! *closed* — never completed, since nothing verified it — with a
//! rationale saying how the run ended and what was executed (in mock mode:
//! nothing).

use std::collections::BTreeMap;

use agency_core::status::{PipelineRunStatus, StageStatus};
use agency_core::{FileId, HandlerId, OutcomeId, OutcomeStatus};
use agency_org::pipeline::{PipelineModel, StageKind, StageModel, plan_items};
use agency_store::{OutcomeRow, PipelineRunRow, RevokeSelector};
use serde_json::Value;

use crate::Result;
use crate::events::Event;
use crate::render::{Author, outcome_event, render_outcome_file};
use crate::service::Op;

/// Most characters of a task outcome's title (the default limit of an
/// outcome's title).
const MAX_TITLE_CHARS: usize = 200;

/// Most characters of a task outcome's description.
const MAX_DESCRIPTION_CHARS: usize = 20_000;

const SYSTEM: Author = Author {
    handler: None,
    agent: None,
};

/// Create the outcomes of the plan in `artifact` (already validated)
/// under `stage_outcome`, when `spec` declares one. Returns how many.
pub(crate) fn plan_outcomes(
    op: &mut Op<'_>,
    run: HandlerId,
    spec: &StageModel,
    stage_outcome: OutcomeId,
    artifact: &Value,
    file: FileId,
) -> Result<usize> {
    let Some(outcomes) = &spec.outcomes else {
        return Ok(0);
    };
    let items = plan_items(outcomes, artifact);
    let ids: BTreeMap<&str, (OutcomeId, &str)> = items
        .iter()
        .map(|it| (it.id.as_str(), (OutcomeId::new_random(), it.title.as_str())))
        .collect();
    for it in &items {
        let (id, _) = ids[it.id.as_str()];
        let mut description = format!(
            "Task `{}` of the plan of stage {} of pipeline run {run} (artifact kb://{file}). It is the plan, not work given to anyone: it is closed when the run ends.",
            it.id, spec.name
        );
        if !it.description.is_empty() {
            description.push_str("\n\n");
            description.push_str(&it.description);
        }
        if !it.depends.is_empty() {
            description.push_str("\n\n**depends on**:");
            for d in &it.depends {
                let title = ids.get(d.as_str()).map_or("", |(_, t)| t);
                description.push_str(&format!("\n- `{d}` {title}"));
            }
        }
        let row = OutcomeRow {
            id,
            title: title_of(&it.title, &it.id),
            description: bounded(&description, MAX_DESCRIPTION_CHARS),
            status: OutcomeStatus::Open,
            status_reason: None,
            priority: 0,
            perpetual: false,
            process_inbox: false,
            responsible: run,
            created_at: op.now,
            updated_at: op.now,
        };
        op.tx.insert_outcome(&row)?;
        op.tx.insert_edge(stage_outcome, id)?;
    }
    // Every row first: an edge names two of them.
    for it in &items {
        let (id, _) = ids[it.id.as_str()];
        for d in &it.depends {
            if let Some((dep, _)) = ids.get(d.as_str()) {
                op.tx.insert_edge(id, *dep)?;
            }
        }
    }
    // Rendered once each, after every edge, so each file lists its
    // parents and children as they are.
    for it in &items {
        let (id, _) = ids[it.id.as_str()];
        outcome_event(
            op,
            id,
            SYSTEM,
            "created",
            format!(
                "task {} of the plan of stage {} of pipeline run {run}",
                it.id, spec.name
            ),
        )?;
        render_outcome_file(op, id, SYSTEM)?;
        op.emit(Event::OutcomeStatusChanged {
            outcome: id,
            responsible: run,
            status: OutcomeStatus::Open,
        });
    }
    Ok(items.len())
}

/// Close the plan outcomes still open of run `r` when it has ended
/// (done, failed or stopped; a waiting or paused run keeps them open),
/// saying how it ended and what was executed.
pub(crate) fn close_plan_outcomes(op: &mut Op<'_>, r: &PipelineRunRow) -> Result<usize> {
    let ended = match r.status {
        PipelineRunStatus::Done => "ended done".to_owned(),
        PipelineRunStatus::Failed | PipelineRunStatus::Stopped => {
            let stages = op.tx.pipeline_stages(r.id)?;
            let at = stages
                .get(r.stage as usize)
                .map_or_else(|| format!("stage {}", r.stage), |s| s.name.clone());
            if r.status == PipelineRunStatus::Failed {
                format!("failed at stage {at}")
            } else {
                format!("was stopped by the user at stage {at}")
            }
        }
        PipelineRunStatus::Running | PipelineRunStatus::Waiting | PipelineRunStatus::Paused => {
            return Ok(0);
        }
    };
    let model = super::stored_model(r)?;
    if !model.stages.iter().any(|s| s.outcomes.is_some()) {
        return Ok(0);
    }
    let why = format!(
        "Closed, not completed: this task is part of the plan of pipeline run {}, which {ended}; {}. Nothing verified the task itself.",
        r.id,
        what_ran(op, r, &model)?
    );
    let mut closed = Vec::new();
    let mut parents = Vec::new();
    for s in op.tx.pipeline_stages(r.id)? {
        if model
            .stages
            .get(s.idx as usize)
            .is_none_or(|m| m.outcomes.is_none())
        {
            continue;
        }
        for child in op.tx.children(s.outcome)? {
            let Some(mut o) = op.tx.outcome(child)? else {
                continue;
            };
            // Only the run's own, and only those not finished already.
            if o.status.is_finished() || o.responsible != r.id {
                continue;
            }
            o.status = OutcomeStatus::Closed;
            o.status_reason = Some(why.clone());
            o.updated_at = op.now;
            op.tx.update_outcome(&o)?;
            outcome_event(op, o.id, SYSTEM, "closed", why.clone())?;
            for c in op.tx.revoke(&RevokeSelector::ScopedTo(o.id), op.now)? {
                op.emit(Event::CapabilityRevoked {
                    capability: c.id,
                    holder: c.holder,
                    resource: c.resource.clone(),
                });
            }
            op.emit(Event::OutcomeStatusChanged {
                outcome: o.id,
                responsible: o.responsible,
                status: o.status,
            });
            closed.push(o.id);
        }
        parents.push(s.outcome);
    }
    // Rendered after every status changed: a file lists its children's.
    for id in closed.iter().chain(&parents) {
        render_outcome_file(op, *id, SYSTEM)?;
    }
    Ok(closed.len())
}

/// What of the plan was executed: by the built-in ToolRunner (mock mode
/// executes nothing), or by no stage at all.
fn what_ran(op: &mut Op<'_>, r: &PipelineRunRow, model: &PipelineModel) -> Result<String> {
    let runner = model
        .stages
        .iter()
        .position(|s| matches!(&s.kind, StageKind::Code { step } if step == "tool_runner"));
    let Some(idx) = runner else {
        return Ok(format!(
            "no stage of pipeline {} executes a plan, so nothing was executed",
            model.name
        ));
    };
    let name = &model.stages[idx].name;
    let stage = op
        .tx
        .pipeline_stages(r.id)?
        .into_iter()
        .find(|s| s.idx as usize == idx);
    let ran = stage
        .as_ref()
        .filter(|s| matches!(s.status, StageStatus::Ok | StageStatus::Repaired));
    Ok(match (ran.and_then(|s| s.artifact), r.live_tools) {
        (Some(a), false) => format!(
            "its {name} ran in mock mode, so nothing was executed (kb://{a} lists the commands recorded, none run)"
        ),
        (Some(a), true) => format!(
            "its {name} ran the allowed commands live, in the run's workspace (kb://{a} lists each with its output)"
        ),
        (None, _) => match stage.map(|s| s.status) {
            Some(StageStatus::Pending) | None => {
                format!("the run did not reach {name}, so nothing was executed")
            }
            Some(st) => format!(
                "its {name} ended {} without a result (its report says what it did)",
                st.as_str()
            ),
        },
    })
}

/// One line, not blank, at most [`MAX_TITLE_CHARS`].
fn title_of(title: &str, id: &str) -> String {
    let one: String = title
        .split(['\n', '\r'])
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
        .replace('\0', "");
    let t = if one.is_empty() {
        format!("Task {id}")
    } else {
        one
    };
    bounded(&t, MAX_TITLE_CHARS)
}

fn bounded(s: &str, max: usize) -> String {
    let s = s.replace('\0', "");
    if s.chars().count() <= max {
        s
    } else {
        s.chars().take(max - 1).collect::<String>() + "…"
    }
}
