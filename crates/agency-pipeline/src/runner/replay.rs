//! The runner's side of the replay gate: for a lesson waiting in
//! `replaying`, re-run the stages it would affect on each frozen earlier
//! run twice — with the lesson recalled and without — as an agent of the
//! replay's own handler (its budget bounds the calls), score both with the
//! pipeline's own scoring stage, and hand the scores to the service,
//! which admits or rejects. Nothing runs live: ToolRunner is in mock mode
//! and an approval SafetyGuard would ask for is not asked (the plan's
//! artifact says it needs one; the scoring stage sees that).

use std::collections::BTreeMap;
use std::sync::Arc;

use agency_core::LessonId;
use agency_org::pipeline::{StageKind, StageModel};
use agency_service::lessons::{Frozen, ReplayJob, ReplayResult, ReplayScores};
use agency_service::pipelines::NextStage;
use agency_service::pipelines::judge::judged;
use agency_service::{HeldLease, ServiceError};
use serde_json::{Map, Value};

use super::{Runner, blocking, succeeded};
use crate::code;

/// Most lessons the Retriever's `lessons` holds (AgencyCore's `maxItems`).
const MAX_RECALLED: usize = 5;

impl Runner {
    /// Replay `lesson` unless a replay of it is running already.
    pub(super) fn replay(self: Arc<Self>, lesson: LessonId) {
        if !self
            .replaying
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(lesson)
        {
            return;
        }
        let this = self.clone();
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        tasks.spawn(async move {
            if let Some((result, held)) = this.run_replay(lesson).await {
                this.record_replay(lesson, result, held).await;
            }
            this.replaying
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&lesson);
        });
    }

    /// Record the end of a replay; on a shared store only while this
    /// daemon still holds the replay handler's lease.
    async fn record_replay(&self, lesson: LessonId, result: ReplayResult, held: Option<HeldLease>) {
        let sys = self.sys.clone();
        let owner = self.cfg.lease.as_ref().map(|l| l.spec.owner.clone());
        let ended = blocking(move || {
            let held = owner.as_deref().zip(held);
            sys.lesson_replay_end_as(lesson, result, held)
        })
        .await;
        match ended {
            Ok(()) => {}
            Err(e @ ServiceError::LeaseLost { .. }) => {
                // Another daemon took the replay over while this one ran
                // it: its verdict is the one recorded.
                tracing::warn!(%lesson, "{e}");
                self.lost(
                    held,
                    "the end of a lesson's replay was refused: another daemon replays it",
                )
                .await;
            }
            Err(e) => {
                tracing::error!(%lesson, "failed to record the replay of lesson {lesson}: {e}");
            }
        }
    }

    /// The replay's result, and the lease it ran under; `None` when the
    /// lesson no longer waits for one, or another daemon replays it.
    async fn run_replay(&self, lesson: LessonId) -> Option<(ReplayResult, Option<HeldLease>)> {
        let sys = self.sys.clone();
        let job = match blocking(move || sys.lesson_replay_job(lesson)).await {
            Ok(Some(job)) => job,
            Ok(None) => return None,
            Err(e) => return Some((failed_replay(e.to_string()), None)),
        };
        let (sys, handler) = (self.sys.clone(), job.handler);
        let spec = self.cfg.lease.as_ref().map(|l| l.spec.clone());
        let started =
            blocking(move || sys.agent_start_with_token_as(handler, None, spec.as_ref())).await;
        let (minted, held) = match started {
            Ok(Some(started)) => started,
            // Another daemon holds the replay's handler: it replays.
            Ok(None) => return None,
            Err(e) => {
                return Some((
                    failed_replay(format!("failed to start the replay's agent: {e}")),
                    None,
                ));
            }
        };
        let mut result = ReplayResult::default();
        // Each stage's calls, as the stage counted them.
        let mut calls = 0i64;
        for f in &job.frozen {
            let without = self.variant(&job, f, &minted, false, &mut calls).await;
            let with = match &without {
                Ok(_) => self.variant(&job, f, &minted, true, &mut calls).await,
                Err(_) => Err("not run: the replay without the lesson failed".to_owned()),
            };
            let error = without.as_ref().err().or(with.as_ref().err()).cloned();
            result.runs.push(ReplayScores {
                run: f.run,
                without: without.ok(),
                with: with.ok(),
                error,
            });
        }
        // One agent made every call: its cost is what the gateway metered
        // for it once all of them settled. (A stage's own cost reading is
        // that agent's running total, so a sum over the stages would count
        // each earlier call again.)
        result.calls = calls;
        result.cost_micro_usd = self
            .cost_of(minted.agent, u32::try_from(calls).unwrap_or(u32::MAX))
            .await;
        self.end_agent(minted.agent).await;
        // A reached budget stops the replay: say so rather than judge
        // scores that are missing.
        if result.error.is_none()
            && let Some(e) = result.runs.iter().find_map(|r| r.error.clone())
            && e.contains("budget")
        {
            result.error = Some(format!("the replay's budget was reached ({e})"));
        }
        Some((result, held))
    }

    /// One variant of frozen run `f`: the affected stages re-run with the
    /// Retriever's recall with (or without) the lesson; the scores its
    /// scoring stage gave.
    async fn variant(
        &self,
        job: &ReplayJob,
        f: &Frozen,
        minted: &agency_service::MintedToken,
        with: bool,
        calls: &mut i64,
    ) -> Result<BTreeMap<String, i64>, String> {
        let mut ctx = f.context.clone();
        for s in &f.model.stages {
            if matches!(&s.kind, StageKind::Code { step } if step == "retriever")
                && let Some(Value::Array(lessons)) =
                    ctx.get_mut(&s.name).and_then(|a| a.get_mut("lessons"))
            {
                lessons.retain(|l| !l.as_str().is_some_and(|t| t.starts_with(&job.quote_prefix)));
                if with {
                    lessons.insert(0, Value::String(job.quote.clone()));
                    lessons.truncate(MAX_RECALLED);
                }
            }
        }
        for idx in f.first..=f.last {
            let stage = &f.model.stages[idx];
            let mut context = reads_of(stage, &ctx);
            if stage
                .reads
                .iter()
                .any(|r| r.stage == agency_org::pipeline::FACTS)
            {
                let facts = agency_service::pipelines::replay_facts(&f.model, idx, &ctx);
                context.insert(agency_org::pipeline::FACTS.to_owned(), facts);
            }
            let next = NextStage {
                run: job.handler,
                idx,
                model: f.model.clone(),
                level: 0,
                live_tools: false,
                context,
                agent: None,
                recalled: None,
                lease: None,
            };
            let end = match &stage.kind {
                StageKind::Llm { .. } => self.call_model(&next, stage, minted).await,
                StageKind::Code { step } => match code::run(step, stage, &next) {
                    code::CodeEnd::Ended(end) => end,
                    code::CodeEnd::NeedsApproval { output, .. } => {
                        succeeded(output, serde_json::json!({}))
                    }
                },
                StageKind::Agent { .. } => {
                    return Err(format!(
                        "stage {} calls an agent; a replay runs only model and code stages",
                        stage.name
                    ));
                }
            };
            *calls += end.attempts;
            let Some(artifact) = end.artifact.filter(|_| end.status.succeeded()) else {
                return Err(format!(
                    "stage {} ended {}: {}",
                    stage.name,
                    end.status.as_str(),
                    end.error.unwrap_or_default()
                ));
            };
            ctx.insert(stage.name.clone(), artifact);
        }
        let last = &f.model.stages[f.last];
        let artifact = ctx.get(&last.name).cloned().unwrap_or(Value::Null);
        judged(&[(last.name.clone(), artifact)])
            .map(|j| j.scores)
            .ok_or_else(|| format!("stage {} gave no scorecard", last.name))
    }
}

/// What `stage` reads of `ctx`: the input and the entries it names.
fn reads_of(stage: &StageModel, ctx: &Map<String, Value>) -> Map<String, Value> {
    let mut out = Map::new();
    if let Some(i) = ctx.get("input") {
        out.insert("input".to_owned(), i.clone());
    }
    for r in &stage.reads {
        if let Some(v) = ctx.get(&r.stage) {
            out.insert(r.stage.clone(), v.clone());
        }
    }
    out
}

fn failed_replay(error: String) -> ReplayResult {
    ReplayResult {
        error: Some(error),
        ..ReplayResult::default()
    }
}
