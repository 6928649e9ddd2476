//! The judge check before a scoring stage judges a run: when the stage's
//! rubric (its prompts, schema and cap rules) or its grader model has not
//! been checked yet, the anchors shipped with the pipeline are re-scored
//! with it first. Within the anchors' tolerance, it is recorded as passed
//! and the stage goes on; beyond it, the change is flagged and the user is
//! asked (an approval request in "needs you"); the run waits, and the
//! stage judges only once the user approved. A flagged change is asked
//! about again without re-scoring, so the question does not change.

use std::collections::BTreeMap;

use agency_core::status::StageStatus as StoredStatus;
use agency_org::pipeline::anchors::{AnchorSet, anchors_for};
use agency_org::pipeline::{StageKind, StageModel, rubric_of};
use agency_service::lessons::judge_check::{ACCEPTED, FLAGGED, PASSED, SKIPPED};
use agency_service::pipelines::judge::judged;
use agency_service::pipelines::{JUDGE_APPROVAL_TOOL, NextStage, StageEnd, replay_facts};
use serde_json::{Value, json};

use super::{Asked, Runner, blocking, failed};

/// What the stage does after its judge check.
pub(super) enum Gate {
    /// Judge the run.
    Go,
    /// Wait for the user's decision.
    Wait,
    /// The stage ends now.
    End(Box<StageEnd>),
}

impl Runner {
    pub(super) async fn judge_gate(&self, next: &NextStage, stage: &StageModel) -> Gate {
        let Some(set) = anchors_for(&next.model.name).filter(|s| s.stage == stage.name) else {
            return Gate::Go;
        };
        let StageKind::Llm { model, .. } = &stage.kind else {
            return Gate::Go;
        };
        let upstream = model.as_deref().unwrap_or(&self.cfg.default_upstream);
        let grader = match self.cfg.upstreams.get(upstream) {
            Some(u) => format!("{upstream}/{}", u.model),
            None => upstream.to_owned(),
        };
        let rubric = rubric_of(stage);
        let pipeline = next.model.name.clone();
        let (sys, p, r, g) = (
            self.sys.clone(),
            pipeline.clone(),
            rubric.clone(),
            grader.clone(),
        );
        let known = match blocking(move || sys.judge_check(&p, &r, &g)).await {
            Ok(k) => k,
            Err(e) => return end(format!("failed to read the judge check: {e}")),
        };
        let detail = match known {
            Some(c) if c.state == PASSED || c.state == ACCEPTED || c.state == SKIPPED => {
                return Gate::Go;
            }
            Some(c) => serde_json::from_str(&c.detail).unwrap_or(Value::Null),
            None => {
                // Anchors written for another shape of the pipeline (an
                // edited copy) cannot check it: said, not a failed stage.
                if let Some(why) = misfit(next, stage, &set) {
                    let detail = json!({ "skipped": why });
                    if let Err(e) = self
                        .record(&pipeline, &rubric, &grader, SKIPPED, &detail)
                        .await
                    {
                        return end(e);
                    }
                    return Gate::Go;
                }
                let detail = match self.score_anchors(next, stage, &set).await {
                    Ok(d) => d,
                    Err(e) => return end(e),
                };
                let moved = detail["moved"].as_array().is_some_and(|m| !m.is_empty());
                let state = if moved { FLAGGED } else { PASSED };
                if let Err(e) = self
                    .record(&pipeline, &rubric, &grader, state, &detail)
                    .await
                {
                    return end(e);
                }
                if !moved {
                    return Gate::Go;
                }
                detail
            }
        };
        let reason = format!(
            "the {} stage of pipeline {pipeline} now grades with rubric {rubric} by {grader}, and its anchors' scores moved beyond tolerance: {}; approve to let it judge runs, deny to stop this run",
            stage.name,
            detail["moved"]
                .as_array()
                .map(|m| m
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join("; "))
                .unwrap_or_default()
        );
        let what = json!({ "rubric": rubric, "grader": grader, "anchors": detail });
        match self
            .ask_user(next, JUDGE_APPROVAL_TOOL, what, &reason)
            .await
        {
            Asked::Approved(_) => {
                match self
                    .record(&pipeline, &rubric, &grader, ACCEPTED, &detail)
                    .await
                {
                    Ok(()) => Gate::Go,
                    Err(e) => end(e),
                }
            }
            Asked::Waiting => Gate::Wait,
            Asked::Refused(why) => Gate::End(Box::new(failed(
                StoredStatus::BlockedPolicy,
                format!(
                    "stage {}: the new rubric or grader was refused: {why}",
                    stage.name
                ),
            ))),
            Asked::Failed(e) => end(e),
        }
    }

    /// Score every anchor with the stage as it is now: the scores, and
    /// what moved beyond the tolerance.
    async fn score_anchors(
        &self,
        next: &NextStage,
        stage: &StageModel,
        set: &AnchorSet,
    ) -> Result<Value, String> {
        let Some(Ok(minted)) = &next.agent else {
            return Err(format!(
                "stage {} has no agent to call its model",
                stage.name
            ));
        };
        let mut anchors = Vec::new();
        let mut moved = Vec::new();
        for a in &set.anchors {
            let mut context = a.context.clone();
            let facts = replay_facts(&next.model, next.idx, &context);
            context.insert(agency_org::pipeline::FACTS.to_owned(), facts);
            let n = NextStage {
                run: next.run,
                idx: next.idx,
                model: next.model.clone(),
                level: next.level,
                live_tools: false,
                context,
                agent: None,
                recalled: None,
                lease: None,
            };
            let end = self.call_model(&n, stage, minted).await;
            let scores: BTreeMap<String, i64> =
                match end.artifact.filter(|_| end.status.succeeded()) {
                    Some(artifact) => judged(&[(stage.name.clone(), artifact)])
                        .map(|j| j.scores)
                        .ok_or_else(|| format!("anchor {:?} was not scored", a.name))?,
                    None => {
                        return Err(format!(
                            "failed to score anchor {:?}: stage {} ended {}: {}",
                            a.name,
                            stage.name,
                            end.status.as_str(),
                            end.error.unwrap_or_default()
                        ));
                    }
                };
            if let Some(why) = set.moved(a, &scores) {
                moved.push(why);
            }
            anchors.push(json!({ "name": a.name, "expected": a.expected, "scores": scores }));
        }
        Ok(json!({ "anchors": anchors, "moved": moved, "tolerance": {
            "dimension": set.tolerance.dimension, "total": set.tolerance.total } }))
    }

    async fn record(
        &self,
        pipeline: &str,
        rubric: &str,
        grader: &str,
        state: &'static str,
        detail: &Value,
    ) -> Result<(), String> {
        let sys = self.sys.clone();
        let (p, r, g, d) = (
            pipeline.to_owned(),
            rubric.to_owned(),
            grader.to_owned(),
            detail.clone(),
        );
        blocking(move || sys.judge_check_record(&p, &r, &g, state, d))
            .await
            .map_err(|e| format!("failed to record the judge check: {e}"))
    }
}

/// Why `set`'s anchors do not fit the pipeline `next` runs, if they do
/// not: an artifact the scoring stage reads is missing from an anchor or
/// no longer validates against its stage's contract.
fn misfit(next: &NextStage, stage: &StageModel, set: &AnchorSet) -> Option<String> {
    for a in &set.anchors {
        for r in &stage.reads {
            let Some(spec) = next.model.stages.iter().find(|s| s.name == r.stage) else {
                continue;
            };
            let Some(v) = a.context.get(&r.stage) else {
                return Some(format!("anchor {:?} has no {}", a.name, r.stage));
            };
            let fits = crate::validate::OutputContract::cached(spec)
                .map(|c| c.revalidate(v.clone()).is_ok())
                .unwrap_or(false);
            if !fits {
                return Some(format!(
                    "anchor {:?}'s {} does not fit this pipeline's {} stage",
                    a.name, r.stage, r.stage
                ));
            }
        }
    }
    None
}

fn end(error: String) -> Gate {
    Gate::End(Box::new(failed(StoredStatus::FailedInfra, error)))
}
