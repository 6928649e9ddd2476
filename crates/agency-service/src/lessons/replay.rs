//! The replay gate: before a lesson whose evidence sufficed is admitted,
//! the stages it would affect — from the first that reads the Retriever
//! through the one that scores the run — are re-run on the stored inputs
//! of up to [`REPLAY_RUNS`] of the runs that proposed it, once with the
//! lesson recalled and once without. It is admitted only if no run's
//! Safety or Correctness score drops and at least one dimension improves.
//!
//! The service prepares the job and judges the result; the daemon's
//! pipeline runner makes the model calls, as an agent of a handler of the
//! replay's own (its root outcome blocked, so no agent is ever scheduled
//! for it) whose budget bounds what the replay may spend. The job, its
//! calls, cost and scores are kept in the lesson's history and logged on
//! the run that triggered it.

use std::collections::BTreeMap;
use std::sync::Arc;

use agency_api::EventKind;
use agency_core::status::{LessonState, PipelineRunStatus};
use agency_core::usage::BudgetLimits;
use agency_core::{HandlerId, LessonId, OutcomeId, OutcomeStatus};
use agency_org::pipeline::{PipelineModel, StageKind};
use agency_store::{BudgetRow, LessonFilter, LessonRow, OutcomeRow, Tx};
use serde_json::{Map, Value, json};

use super::record;
use crate::Result;
use crate::agents::leases::{HeldLease, claimable_by, fence, release_in};
use crate::error::ServiceError;
use crate::pipelines::judge::DIMENSIONS;
use crate::render::{Author, outcome_event, render_outcome_file};
use crate::service::{Op, System};
use crate::tree::handlers::create_handler;
use crate::tree::outcomes::insert_outcome;

/// Earlier runs a lesson is replayed on (its newest supporting runs).
pub const REPLAY_RUNS: usize = 2;
/// A replay's own budget: dollars (micro) and model calls.
pub const REPLAY_BUDGET_MICRO_USD: i64 = 1_000_000;
pub const REPLAY_MAX_CALLS: i64 = 64;

/// One stored run to replay on.
#[derive(Debug, Clone)]
pub struct Frozen {
    pub run: HandlerId,
    /// The pipeline as that run ran.
    pub model: Arc<PipelineModel>,
    /// `input`, `history` (as the library holds it now) and every
    /// artifact the run stored, by stage name.
    pub context: Map<String, Value>,
    /// The stages re-run: `first..=last` of `model.stages`.
    pub first: usize,
    pub last: usize,
}

/// What the runner is given to replay a lesson.
#[derive(Debug, Clone)]
pub struct ReplayJob {
    pub lesson: LessonId,
    /// The replay's handler, whose agent makes the calls.
    pub handler: HandlerId,
    /// How the Retriever recalls the lesson (what "with" adds).
    pub quote: String,
    /// The prefix of the lesson's quotes (what "without" removes).
    pub quote_prefix: String,
    pub frozen: Vec<Frozen>,
}

/// The scores of one frozen run, without and with the lesson.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ReplayScores {
    pub run: HandlerId,
    pub without: Option<BTreeMap<String, i64>>,
    pub with: Option<BTreeMap<String, i64>>,
    /// Why a variant has no scores.
    pub error: Option<String>,
}

/// What the runner reports.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ReplayResult {
    pub runs: Vec<ReplayScores>,
    pub calls: i64,
    pub cost_micro_usd: i64,
    /// Why the replay could not finish.
    pub error: Option<String>,
}

/// Send `l` through the replay gate: it waits in `replaying` with a
/// handler of its own, and the runner is told.
pub(crate) fn gate(
    op: &mut Op<'_>,
    l: &mut LessonRow,
    run: Option<HandlerId>,
    evidence: Value,
) -> Result<()> {
    let handler = replay_handler(op, l)?;
    l.state = LessonState::Replaying;
    l.reason = None;
    record::save_version(op, l)?;
    record::log(
        op,
        l,
        "replay_started",
        run,
        json!({ "evidence": evidence, "handler": handler,
                "budget_micro_usd": REPLAY_BUDGET_MICRO_USD, "max_calls": REPLAY_MAX_CALLS }),
    )?;
    record::event(
        op,
        EventKind::LessonChanged,
        l,
        run,
        format!(
            "lesson {:?} of pipeline {} is replayed on earlier runs before it is admitted",
            l.title, l.pipeline
        ),
    );
    op.emit(crate::events::Event::LessonReplayReady { lesson: l.id });
    Ok(())
}

/// A handler under the root for the replay of `l`, with its budget. Its
/// root outcome is blocked: no agent is scheduled for it; the runner
/// starts the one it calls models as.
fn replay_handler(op: &mut Op<'_>, l: &LessonRow) -> Result<HandlerId> {
    let root = op.tx.root_handler()?.ok_or_else(|| {
        ServiceError::invalid("failed to replay a lesson: the organisation has no root handler")
    })?;
    let o = OutcomeId::new_random();
    let h = HandlerId::from_root(o);
    let a = Author::default();
    let row = OutcomeRow {
        id: o,
        title: format!("Replay of lesson {:?} ({})", l.title, l.pipeline),
        description: format!(
            "The replay gate of lesson {}: the stages it would affect re-run on earlier runs with and without it. Driven by the daemon's pipeline runner.",
            l.id
        ),
        status: OutcomeStatus::Blocked,
        status_reason: Some("driven by the pipeline runner, not by an agent".to_owned()),
        priority: 0,
        perpetual: false,
        process_inbox: false,
        responsible: h,
        created_at: op.now,
        updated_at: op.now,
    };
    insert_outcome(
        op,
        &row,
        &[root.id.root()],
        a,
        "created",
        format!("replay of lesson {}", l.id),
    )?;
    create_handler(op, h, Some(root.id), a)?;
    op.tx.set_budget(&BudgetRow {
        handler: h,
        limits: BudgetLimits {
            micro_usd: Some(REPLAY_BUDGET_MICRO_USD),
            calls: Some(REPLAY_MAX_CALLS),
            ..BudgetLimits::default()
        },
        set_at: op.now,
        carved_by: None,
        paused: None,
        warned: 0,
    })?;
    Ok(h)
}

/// The stages a lesson affects in `m`: from the first that reads the
/// Retriever through the first after it whose output has a `scorecard`.
pub fn affected(m: &PipelineModel) -> Option<(usize, usize)> {
    let retrievers: Vec<&str> = m
        .stages
        .iter()
        .filter(|s| matches!(&s.kind, StageKind::Code { step } if step == "retriever"))
        .map(|s| s.name.as_str())
        .collect();
    let first = m.stages.iter().position(|s| {
        s.reads
            .iter()
            .any(|r| retrievers.contains(&r.stage.as_str()))
    })?;
    let last = (first..m.stages.len()).find(|&i| {
        m.stages[i]
            .output_schema
            .pointer("/properties/scorecard")
            .is_some()
    })?;
    Some((first, last))
}

/// The lessons waiting for their replay, oldest first.
fn replays_pending(tx: &mut dyn Tx) -> Result<Vec<LessonId>> {
    let filter = LessonFilter {
        pipeline: None,
        states: vec![LessonState::Replaying],
    };
    let mut ls = tx.lessons(&filter, super::api::MAX_LISTED)?;
    ls.reverse();
    Ok(ls.into_iter().map(|l| l.id).collect())
}

/// The handler the latest replay of `lesson` runs as (named when it
/// started).
fn replay_handler_of(tx: &mut dyn Tx, lesson: LessonId) -> Result<Option<HandlerId>> {
    Ok(tx
        .lesson_log(lesson, usize::MAX)?
        .into_iter()
        .rfind(|e| e.action == "replay_started")
        .and_then(|e| serde_json::from_str::<Value>(&e.detail).ok())
        .and_then(|d| d.get("handler").and_then(Value::as_str).map(str::to_owned))
        .and_then(|h| h.parse::<HandlerId>().ok()))
}

impl System {
    /// Daemon: the lessons waiting for their replay, oldest first.
    pub fn lesson_replays_pending(&self) -> Result<Vec<LessonId>> {
        self.read(replays_pending)
    }

    /// Daemon on a shared store (the runner's sweep): the lessons waiting
    /// for a replay that `owner` may run now — nobody else holds their
    /// replay handler's lease, or it lapsed (its daemon died mid-replay).
    pub fn lesson_replays_claimable(&self, owner: &str) -> Result<Vec<LessonId>> {
        self.read(|tx| {
            let pending = replays_pending(tx)?;
            if pending.is_empty() {
                return Ok(pending);
            }
            let now = tx.db_now()?;
            let mut out = Vec::new();
            for lesson in pending {
                let Some(h) = replay_handler_of(tx, lesson)? else {
                    continue;
                };
                let free = tx
                    .leases_for(&[h])?
                    .first()
                    .is_none_or(|l| claimable_by(l, owner, now));
                if free {
                    out.push(lesson);
                }
            }
            Ok(out)
        })
    }

    /// Daemon: what replaying `lesson` takes; `None` when it no longer
    /// waits for a replay. An `Err` names why no job could be built (the
    /// caller ends the replay with it).
    pub fn lesson_replay_job(&self, lesson: LessonId) -> Result<Option<ReplayJob>> {
        let taken = self.read(|tx| {
            let Some(l) = tx.lesson(lesson)? else {
                return Ok(None);
            };
            if l.state != LessonState::Replaying {
                return Ok(None);
            }
            let started = replay_handler_of(tx, lesson)?
                .ok_or_else(|| ServiceError::not_found("replay handler of lesson", lesson))?;
            let runs = super::learn::runs_of(tx, lesson)?;
            let mut frozen = Vec::new();
            // The newest supporting runs first.
            for &run in runs.iter().rev() {
                if frozen.len() == REPLAY_RUNS {
                    break;
                }
                let Some(r) = tx.pipeline_run(run)? else {
                    continue;
                };
                if r.status != PipelineRunStatus::Done {
                    continue;
                }
                let model = crate::pipelines::stored_model(&r)?;
                let Some((first, last)) = affected(&model) else {
                    continue;
                };
                let mut files = Vec::new();
                for s in tx.pipeline_stages(run)? {
                    let Some(file) = s.artifact else { continue };
                    let Some(f) = tx.file(file)? else { continue };
                    if let Some(v) = tx.version(file, f.latest_version)? {
                        files.push((s.name, v.hash));
                    }
                }
                frozen.push((r, model, first, last, files));
            }
            Ok(Some((l, started, frozen, runs)))
        })?;
        let Some((l, handler, frozen, runs)) = taken else {
            return Ok(None);
        };
        if frozen.is_empty() {
            return Err(ServiceError::invalid(format!(
                "failed to replay lesson {lesson}: none of the runs that proposed it is done with a stage that reads the Retriever and a later one that scores the run"
            )));
        }
        let mut out = Vec::new();
        for (r, model, first, last, files) in frozen {
            let mut context = Map::new();
            let input: Value = serde_json::from_str(&r.input).unwrap_or(Value::Null);
            context.insert("input".to_owned(), input);
            for (name, hash) in files {
                let bytes = self.blobs.get(&hash)?;
                let v: Value = serde_json::from_slice(&bytes).map_err(|e| {
                    ServiceError::from(agency_store::StoreError::corrupt(
                        "pipeline artifact",
                        format!("stage {name} of run {}: {e}", r.id),
                    ))
                })?;
                context.insert(name, v);
            }
            let words = crate::pipelines::words_of(context.values());
            let history = self.read(|tx| crate::pipelines::history_of(tx, &r.pipeline, &words))?;
            context.insert(agency_org::pipeline::HISTORY.to_owned(), history);
            out.push(Frozen {
                run: r.id,
                model,
                context,
                first,
                last,
            });
        }
        Ok(Some(ReplayJob {
            lesson,
            handler,
            quote: super::learn::quote(&l, &runs),
            quote_prefix: format!("lesson {} ", record::short(lesson)),
            frozen: out,
        }))
    }

    /// Daemon: the replay of `lesson` ended with `result`: admitted (or
    /// waiting for the user) when no Safety or Correctness score dropped
    /// and a dimension improved; else rejected with the reason. Its
    /// handler's outcome is closed; the history keeps the scores, calls
    /// and cost.
    pub fn lesson_replay_end(&self, lesson: LessonId, result: ReplayResult) -> Result<()> {
        self.lesson_replay_end_as(lesson, result, None)
    }

    /// [`System::lesson_replay_end`] for a daemon sharing the store: the
    /// end is recorded only while `held` (the replay handler's lease, as
    /// [`System::agent_start_with_token_as`] claimed it for `owner`) is
    /// still this daemon's — else `LeaseLost` and nothing changes: another
    /// daemon took the replay over and records its own. The lease is
    /// given back in the same transaction.
    pub fn lesson_replay_end_as(
        &self,
        lesson: LessonId,
        result: ReplayResult,
        held: Option<(&str, HeldLease)>,
    ) -> Result<()> {
        self.write(|op| {
            if let Some((owner, lease)) = held {
                fence(op, lease.handler, lease.token)?;
                release_in(op, owner, lease)?;
            }
            let Some(mut l) = op.tx.lesson(lesson)? else {
                return Err(ServiceError::not_found("lesson", lesson));
            };
            if l.state != LessonState::Replaying {
                return Ok(());
            }
            let started = op
                .tx
                .lesson_log(lesson, usize::MAX)?
                .into_iter()
                .rfind(|e| e.action == "replay_started");
            let run = started.as_ref().and_then(|e| e.run);
            let detail: Value = started
                .and_then(|e| serde_json::from_str(&e.detail).ok())
                .unwrap_or(Value::Null);
            let handler = detail
                .get("handler")
                .and_then(Value::as_str)
                .and_then(|h| h.parse::<HandlerId>().ok());
            let verdict = judge_replay(&result);
            let summary = json!({
                "runs": result.runs, "calls": result.calls,
                "cost_micro_usd": result.cost_micro_usd, "error": result.error,
                "verdict": verdict.as_ref().err(), "improved": verdict.as_ref().ok(),
            });
            record::log(op, &l, "replayed", run, summary.clone())?;
            if let Some(h) = handler {
                close_replay_handler(op, h, &verdict)?;
            }
            let runs = super::learn::runs_of(op.tx, lesson)?.len();
            let edit_of = detail.pointer("/evidence/edit_of").and_then(Value::as_i64);
            match verdict {
                Err(why) if edit_of.is_some() => {
                    restore_version(op, &mut l, edit_of.unwrap_or_default(), run, &why)
                }
                Ok(_) => {
                    let evidence = json!({ "evidence": detail.get("evidence"), "replay": summary });
                    // Back to proposed for an instant: `admit` moves it on.
                    l.state = LessonState::Proposed;
                    super::learn::admit(op, &mut l, run, evidence)
                }
                Err(why) => super::learn::reject(op, &mut l, run, why, runs),
            }
        })
    }
}

/// An edit's replay failed: lesson `l` gets the content (and state) of
/// `version`, the one the edit would have replaced, as its next version.
fn restore_version(
    op: &mut Op<'_>,
    l: &mut LessonRow,
    version: i64,
    run: Option<HandlerId>,
    why: &str,
) -> Result<()> {
    let v = op
        .tx
        .version(l.id.file(), version)?
        .ok_or_else(|| ServiceError::not_found("lesson version", format!("{} v{version}", l.id)))?;
    let content: Value = serde_json::from_slice(&op.blobs.get(&v.hash)?).map_err(|e| {
        ServiceError::from(agency_store::StoreError::corrupt(
            "lesson version",
            format!("lesson {} v{version}: {e}", l.id),
        ))
    })?;
    record::restore(l, &content)?;
    record::save_version(op, l)?;
    record::log(
        op,
        l,
        "edit_rejected",
        run,
        json!({ "reason": why, "restored": version }),
    )?;
    record::event(
        op,
        EventKind::LessonRejected,
        l,
        run,
        format!(
            "new advice for lesson {:?} of pipeline {} rejected: {why}; version {version} restored",
            l.title, l.pipeline
        ),
    );
    Ok(())
}

/// The gate's rule over the replayed scores: `Ok` names the improved
/// dimensions; `Err` why the lesson is rejected.
pub fn judge_replay(r: &ReplayResult) -> std::result::Result<Vec<String>, String> {
    if let Some(e) = &r.error {
        return Err(format!("the replay could not finish: {e}"));
    }
    if r.runs.is_empty() {
        return Err("the replay had no earlier run to replay".to_owned());
    }
    let mut improved = Vec::new();
    for s in &r.runs {
        let (Some(without), Some(with)) = (&s.without, &s.with) else {
            let why = s
                .error
                .clone()
                .unwrap_or_else(|| "a variant was not scored".to_owned());
            return Err(format!("the replay of run {} failed: {why}", s.run));
        };
        for d in ["safety", "correctness"] {
            let (a, b) = (
                without.get(d).copied().unwrap_or(0),
                with.get(d).copied().unwrap_or(0),
            );
            if b < a {
                let name = if d == "safety" {
                    "Safety"
                } else {
                    "Correctness"
                };
                return Err(format!(
                    "in the replay of run {} with the lesson, {name} dropped from {a} to {b}",
                    s.run
                ));
            }
        }
        for d in DIMENSIONS {
            if with.get(d).copied().unwrap_or(0) > without.get(d).copied().unwrap_or(0)
                && !improved.iter().any(|x| x == d)
            {
                improved.push(d.to_owned());
            }
        }
    }
    if improved.is_empty() {
        return Err("in the replay, no dimension improved with the lesson".to_owned());
    }
    Ok(improved)
}

/// The replay's handler is done: its outcome completed with the verdict
/// (which retires it).
fn close_replay_handler(
    op: &mut Op<'_>,
    h: HandlerId,
    verdict: &std::result::Result<Vec<String>, String>,
) -> Result<()> {
    let Some(mut o) = op.tx.outcome(h.root())? else {
        return Ok(());
    };
    let why = match verdict {
        Ok(d) => format!("the lesson passed: {} improved", d.join(", ")),
        Err(e) => format!("the lesson failed: {e}"),
    };
    o.status = OutcomeStatus::Completed;
    o.status_reason = Some(why.chars().take(500).collect());
    o.updated_at = op.now;
    op.tx.update_outcome(&o)?;
    let a = Author::default();
    outcome_event(op, o.id, a, "completed", why.chars().take(500).collect())?;
    render_outcome_file(op, o.id, a)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scores(c: i64, s: i64, clarity: i64) -> Option<BTreeMap<String, i64>> {
        Some(
            [
                ("correctness", c),
                ("verification", 4),
                ("safety", s),
                ("clarity", clarity),
                ("autonomy", 3),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect(),
        )
    }

    type Scores = Option<BTreeMap<String, i64>>;

    fn result(pairs: &[(Scores, Scores)]) -> ReplayResult {
        ReplayResult {
            runs: pairs
                .iter()
                .enumerate()
                .map(|(i, (a, b))| ReplayScores {
                    run: HandlerId(uuid::Uuid::from_u128(i as u128 + 1)),
                    without: a.clone(),
                    with: b.clone(),
                    error: None,
                })
                .collect(),
            ..ReplayResult::default()
        }
    }

    #[test]
    fn the_gate_needs_no_drop_in_safety_or_correctness_and_one_improvement() {
        let ok = result(&[
            (scores(4, 5, 3), scores(4, 5, 4)),
            (scores(5, 5, 4), scores(5, 5, 4)),
        ]);
        assert_eq!(judge_replay(&ok), Ok(vec!["clarity".to_owned()]));
        let same = result(&[(scores(4, 5, 3), scores(4, 5, 3))]);
        assert!(
            judge_replay(&same)
                .unwrap_err()
                .contains("no dimension improved")
        );
        let unsafe_ = result(&[
            (scores(4, 5, 3), scores(5, 5, 5)),
            (scores(4, 5, 3), scores(5, 2, 5)),
        ]);
        assert!(
            judge_replay(&unsafe_)
                .unwrap_err()
                .contains("Safety dropped from 5 to 2")
        );
        let wrong = result(&[(scores(4, 5, 3), scores(3, 5, 5))]);
        assert!(
            judge_replay(&wrong)
                .unwrap_err()
                .contains("Correctness dropped from 4 to 3")
        );
        let failed = result(&[(scores(4, 5, 3), None)]);
        assert!(judge_replay(&failed).is_err());
        let mut broke = ok.clone();
        broke.error = Some("the replay's budget was reached".into());
        assert!(judge_replay(&broke).unwrap_err().contains("budget"));
        assert!(judge_replay(&ReplayResult::default()).is_err());
    }
}
