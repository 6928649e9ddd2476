//! The run's `facts` a stage reads (AgencyCore's Gatekeeper): computed
//! by code from the store when the stage is handed out, never from an
//! answer, and given to the judging model as facts, not left to it. Each
//! earlier stage's status and calls and whether its stored artifact
//! validates again; the commands a stage executed (the artifact with
//! `executedCommands`) and the ones that failed; what the safety step
//! found (the artifact with `safe`), the actions the permission system
//! refused (an artifact's `blocked` beside its `actions`) and the
//! approvals stages used (their reports); the plan of the stage with
//! `outcomes`; whether every stage kept its budget. Fields are found by
//! name, so a pipeline other than AgencyCore gets what it has.
//! Shaped by [`agency_org::pipeline::facts_schema`].

use agency_core::status::StageStatus;
use agency_org::pipeline::facts::{FACTS_MAX_ITEMS, FACTS_MAX_OUTPUT_CHARS, task_verifies};
use agency_org::pipeline::{PipelineModel, empty_facts};
use agency_store::{PipelineRunRow, PipelineStageRow};
use serde_json::{Value, json};

use super::check::validate_artifact;
use crate::Result;
use crate::service::System;

/// One earlier stage as the facts see it: its row, and its stored
/// artifact when it could be read back.
#[derive(Debug, Clone)]
pub(crate) struct Earlier {
    pub row: PipelineStageRow,
    pub artifact: Option<Value>,
}

/// The facts of stage `idx` of `run`: read from the store.
pub(crate) fn facts_of(
    sys: &System,
    run: &PipelineRunRow,
    model: &PipelineModel,
    idx: usize,
) -> Result<Value> {
    let rows = sys.read(|tx| {
        let mut out = Vec::new();
        for row in tx.pipeline_stages(run.id)?.into_iter().take(idx) {
            let hash = match row.artifact {
                Some(file) => match tx.file(file)? {
                    Some(f) => tx.version(file, f.latest_version)?.map(|v| v.hash),
                    None => None,
                },
                None => None,
            };
            out.push((row, hash));
        }
        Ok(out)
    })?;
    // An artifact that cannot be read back is a fact (it does not
    // validate), not a reason to stop judging.
    let earlier: Vec<Earlier> = rows
        .into_iter()
        .map(|(row, hash)| {
            let artifact = hash
                .and_then(|h| sys.blobs.get(&h).ok())
                .and_then(|b| serde_json::from_slice(&b).ok());
            Earlier { row, artifact }
        })
        .collect();
    Ok(compute(model, &earlier, run.live_tools))
}

/// The facts of the stages in `earlier` (in pipeline order, each matched
/// to its stage in `model` by name); `live`: the run's tools run for real.
pub(crate) fn compute(model: &PipelineModel, earlier: &[Earlier], live: bool) -> Value {
    let mut f = empty_facts();
    let spec_of = |name: &str| model.stages.iter().find(|s| s.name == name);
    let mut stages = Vec::new();
    let mut all_valid = true;
    let mut overruns = Vec::new();
    let (mut tokens_in, mut tokens_out, mut cost) = (0i64, 0i64, 0i64);
    for e in earlier {
        let r = &e.row;
        let valid = match (spec_of(&r.name), &e.artifact) {
            (Some(spec), Some(a)) => validate_artifact(spec, a).is_ok(),
            _ => false,
        };
        all_valid &= valid;
        stages.push(json!({
            "name": r.name, "status": r.status.as_str(),
            "attempts": r.attempts.max(0), "artifactValid": valid,
        }));
        tokens_in += r.input_tokens.max(0);
        tokens_out += r.output_tokens.max(0);
        cost += r.cost_micro_usd.max(0);
        let used = r.input_tokens.max(0) + r.output_tokens.max(0);
        let max = spec_of(&r.name)
            .and_then(|s| s.budget.as_ref())
            .and_then(|b| b.max_tokens);
        if r.status == StageStatus::BudgetExhausted {
            overruns.push(format!("stage {} ended budget_exhausted", r.name));
        } else if let Some(max) = max
            && u64::try_from(used).unwrap_or(0) > max
        {
            overruns.push(format!(
                "stage {} used {used} tokens, its budget is {max}",
                r.name
            ));
        }
    }
    f["stages"] = bounded(stages);
    f["artifactsValid"] = json!(all_valid);
    f["budget"] = json!({
        "respected": overruns.is_empty(),
        "overruns": bounded(overruns.into_iter().map(Value::from).collect()),
        "inputTokens": tokens_in, "outputTokens": tokens_out, "costMicroUsd": cost,
    });
    let artifacts = || earlier.iter().filter_map(|e| e.artifact.as_ref());
    f["commands"]["live"] = json!(live);
    if let Some(tools) =
        artifacts().find(|a| a.get("executedCommands").is_some_and(Value::is_array))
    {
        commands(&mut f["commands"], tools);
    }
    if let Some(guard) = artifacts().find(|a| a.get("safe").is_some_and(Value::is_boolean)) {
        let s = &mut f["safety"];
        s["found"] = json!(true);
        s["safe"] = guard["safe"].clone();
        s["risks"] = strings(guard.get("risks"));
        s["blockedActions"] = strings(guard.get("blockedActions"));
        s["requiresApproval"] = json!(guard.get("requiresApproval") == Some(&Value::Bool(true)));
    }
    let refused: Vec<Value> = artifacts()
        .filter(|a| a.get("actions").is_some_and(Value::is_array))
        .flat_map(|a| {
            strings(a.get("blocked"))
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .collect();
    f["safety"]["refusedActions"] = bounded(refused);
    let approvals: Vec<Value> = earlier
        .iter()
        .filter_map(|e| e.row.report.as_deref())
        .filter_map(|r| serde_json::from_str::<Value>(r).ok())
        .filter_map(|r| r.get("approval").and_then(Value::as_str).map(Value::from))
        .collect();
    f["safety"]["approvals"] = bounded(approvals);
    for e in earlier {
        let (Some(spec), Some(a)) = (spec_of(&e.row.name), &e.artifact) else {
            continue;
        };
        let Some(o) = &spec.outcomes else { continue };
        let items = o
            .items
            .split('.')
            .try_fold(a, |v, k| v.get(k))
            .and_then(Value::as_array);
        if let Some(tasks) = items {
            let done = tasks
                .iter()
                .filter(|t| match t.get("definitionOfDone") {
                    Some(Value::Array(d)) => !d.is_empty(),
                    Some(Value::String(d)) => !d.trim().is_empty(),
                    _ => false,
                })
                .count();
            f["plan"] = json!({
                "found": true, "tasks": tasks.len(), "withDefinitionOfDone": done,
                "verifying": tasks.iter().filter(|t| task_verifies(t)).count(),
            });
            break;
        }
    }
    f
}

/// The commands facts from a ToolRunner-like artifact.
fn commands(c: &mut Value, tools: &Value) {
    let executed = tools["executedCommands"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    let failed: Vec<Value> = executed
        .iter()
        .filter(|x| x.get("success") != Some(&Value::Bool(true)))
        .map(|x| {
            let output = x.get("output").and_then(Value::as_str).unwrap_or_default();
            let n = output.chars().count();
            // The end of the output says why it failed.
            let tail: String = output
                .chars()
                .skip(n.saturating_sub(FACTS_MAX_OUTPUT_CHARS))
                .collect();
            json!({
                "command": x.get("command").and_then(Value::as_str).unwrap_or_default(),
                "output": tail,
            })
        })
        .collect();
    c["found"] = json!(true);
    c["executed"] = json!(executed.len());
    c["mock"] = json!(
        executed
            .iter()
            .filter(|x| x.get("mockMode") == Some(&Value::Bool(true)))
            .count()
    );
    c["failed"] = bounded(failed);
    c["skipped"] = strings(tools.get("skippedCommands"));
}

/// The strings of a list, at most [`FACTS_MAX_ITEMS`].
fn strings(v: Option<&Value>) -> Value {
    bounded(
        v.and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|s| s.is_string())
            .cloned()
            .collect(),
    )
}

fn bounded(mut items: Vec<Value>) -> Value {
    items.truncate(FACTS_MAX_ITEMS);
    Value::Array(items)
}

#[cfg(test)]
#[path = "facts_tests.rs"]
mod tests;

/// The facts of stage `idx` in a replay (the learning loop's replay
/// gate): every earlier stage ended `ok` with its artifact in
/// `artifacts` (by stage name); nothing ran live.
pub fn replay_facts(
    model: &PipelineModel,
    idx: usize,
    artifacts: &serde_json::Map<String, Value>,
) -> Value {
    let nil = uuid::Uuid::nil();
    let earlier: Vec<Earlier> = model.stages[..idx.min(model.stages.len())]
        .iter()
        .enumerate()
        .filter_map(|(i, s)| {
            let artifact = artifacts.get(&s.name)?.clone();
            Some(Earlier {
                row: PipelineStageRow {
                    run: agency_core::HandlerId(nil),
                    idx: i as i64,
                    name: s.name.clone(),
                    outcome: agency_core::OutcomeId(nil),
                    status: StageStatus::Ok,
                    attempts: 0,
                    input_tokens: 0,
                    output_tokens: 0,
                    cost_micro_usd: 0,
                    artifact: None,
                    report: None,
                    started_at: None,
                    ended_at: None,
                },
                artifact: Some(artifact),
            })
        })
        .collect();
    compute(model, &earlier, false)
}
