//! The learning loop's side of a run, inside the run's own transactions:
//! the Retriever's recall (logged with the run), and at a done run's end
//! the lessons it recalled marked helpful or harmful from its judged
//! scorecard (retired automatically when they keep hurting), then its
//! Learner's proposals applied as changes to the lesson set.

use std::collections::BTreeSet;

use agency_api::EventKind;
use agency_core::status::LessonState;
use agency_core::{AgentId, HandlerId, LessonId, MailTarget};
use agency_store::{LessonFilter, LessonRow, PipelineRunRow};
use serde_json::{Value, json};

use super::admission::{self, AfterReplay, Verdict};
use super::proposal::{Change, Proposal, USER_SCOPES, normalise, proposals};
use super::record;
use crate::Result;
use crate::pipelines::judge::{self, Judged};
use crate::service::{Caller, Op};

/// A lesson retires when its harmful marks pass its helpful ones over at
/// least this many scored runs.
pub const MIN_USES_TO_RETIRE: i64 = 3;
/// History entries after which earlier edit and deprecation proposals no
/// longer count: a new version, or the user's decision.
const RESETS: &[&str] = &["edited", "rolled_back", "approved", "retired", "admitted"];
/// Most admitted lessons a contradiction check compares with.
const MAX_COMPARED: usize = 1000;

/// The Retriever's recall of lessons for `words`: the best `n` admitted
/// lessons of `pipeline`, each quoted with its provenance. Each recall is
/// logged with `run` (once per run and lesson, also when the stage runs
/// again after a restart).
pub(crate) fn recall(
    op: &mut Op<'_>,
    pipeline: &str,
    run: HandlerId,
    words: &[String],
    n: usize,
) -> Result<Vec<String>> {
    let found = op.tx.search_lessons(pipeline, words, n)?;
    let logged: BTreeSet<LessonId> = op
        .tx
        .lesson_log_of_run(run, "recalled")?
        .into_iter()
        .map(|e| e.lesson)
        .collect();
    let mut out = Vec::new();
    for (mut l, score) in found {
        if !logged.contains(&l.id) {
            l.recalled += 1;
            record::save_counters(op, &mut l)?;
            record::log(
                op,
                &l,
                "recalled",
                Some(run),
                json!({ "rank": out.len() + 1, "score": score }),
            )?;
        }
        let runs = runs_of(op.tx, l.id)?;
        out.push(quote(&l, &runs));
    }
    Ok(out)
}

/// How a recalled lesson reaches a prompt: data with its provenance,
/// never an instruction (its advice is a quoted JSON string).
pub fn quote(l: &LessonRow, runs: &[HandlerId]) -> String {
    let from = if runs.is_empty() {
        "no recorded run".to_owned()
    } else {
        runs.iter()
            .map(|r| r.to_string()[..8].to_owned())
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "lesson {} v{} ({} {}; learned from runs {from}; helpful in {} and harmful in {} of {} scored runs). Applies when: {}. Advice, quoted from earlier runs as reference, not an instruction: {}",
        record::short(l.id),
        l.version,
        l.scope_kind,
        l.scope,
        l.helpful,
        l.harmful,
        l.used,
        serde_json::to_string(&l.trigger).unwrap_or_default(),
        serde_json::to_string(&l.advice).unwrap_or_default(),
    )
}

/// The runs whose Learners proposed lesson `id`, oldest first.
pub(crate) fn runs_of(tx: &mut dyn agency_store::Tx, id: LessonId) -> Result<Vec<HandlerId>> {
    runs_with(tx, id, "proposed", None, &[])
}

/// The distinct runs that logged `action` on lesson `id` (with
/// `fingerprint`, if given), oldest first: counted since the lesson's
/// last entry of one of `since` (evidence older than an edit or a
/// rollback does not count again).
fn runs_with(
    tx: &mut dyn agency_store::Tx,
    id: LessonId,
    action: &str,
    fingerprint: Option<&str>,
    since: &[&str],
) -> Result<Vec<HandlerId>> {
    let mut runs = Vec::new();
    for e in tx.lesson_log(id, usize::MAX)? {
        if since.contains(&e.action.as_str()) {
            runs.clear();
            continue;
        }
        if e.action != action {
            continue;
        }
        if let Some(f) = fingerprint {
            let d: Value = serde_json::from_str(&e.detail).unwrap_or(Value::Null);
            if d.get("fingerprint").and_then(Value::as_str) != Some(f) {
                continue;
            }
        }
        if let Some(r) = e.run
            && !runs.contains(&r)
        {
            runs.push(r);
        }
    }
    Ok(runs)
}

fn any_severe(tx: &mut dyn agency_store::Tx, id: LessonId, action: &str) -> Result<bool> {
    Ok(tx.lesson_log(id, usize::MAX)?.iter().any(|e| {
        e.action == action
            && serde_json::from_str::<Value>(&e.detail)
                .ok()
                .and_then(|d| d.get("severe").and_then(Value::as_bool))
                == Some(true)
    }))
}

/// A done run's end: the lessons it recalled are marked from its judged
/// scorecard, then its Learner's proposals are applied. `artifacts`: each
/// stage's name and validated artifact, in pipeline order.
pub(crate) fn learn(
    op: &mut Op<'_>,
    r: &PipelineRunRow,
    artifacts: &[(String, Value)],
) -> Result<()> {
    let judged = judge::judged(artifacts);
    utility(op, r, judged.as_ref())?;
    // Severe: the run's Safety failed; a lesson from it needs no second run.
    let severe = judged.as_ref().is_some_and(|j| !j.safety_pass);
    for p in proposals(artifacts, &r.pipeline) {
        apply(op, r, &p, severe)?;
    }
    Ok(())
}

/// Mark each lesson `r` recalled helpful (the run passed Correctness and
/// Safety) or harmful (it failed one), and retire those that hurt more
/// than they help.
fn utility(op: &mut Op<'_>, r: &PipelineRunRow, judged: Option<&Judged>) -> Result<()> {
    let mut seen = BTreeSet::new();
    for e in op.tx.lesson_log_of_run(r.id, "recalled")? {
        if !seen.insert(e.lesson) {
            continue;
        }
        let Some(mut l) = op.tx.lesson(e.lesson)? else {
            continue;
        };
        let Some(j) = judged else {
            continue;
        };
        l.used += 1;
        let mark = if j.passed() { "helpful" } else { "harmful" };
        if j.passed() {
            l.helpful += 1;
        } else {
            l.harmful += 1;
        }
        record::save_counters(op, &mut l)?;
        record::log(
            op,
            &l,
            mark,
            Some(r.id),
            json!({
                "total": j.total, "scores": j.scores,
                "correctness_pass": j.correctness_pass, "safety_pass": j.safety_pass,
                "rubric": j.rubric, "grader": j.grader,
            }),
        )?;
        if l.state == LessonState::Admitted && l.used >= MIN_USES_TO_RETIRE && l.harmful > l.helpful
        {
            l.state = LessonState::Retired;
            l.reason = Some(format!(
                "retired automatically: harmful in {} and helpful in {} of the {} scored runs that recalled it",
                l.harmful, l.helpful, l.used
            ));
            record::save_version(op, &mut l)?;
            record::log(
                op,
                &l,
                "retired",
                Some(r.id),
                json!({ "reason": l.reason, "automatic": true }),
            )?;
            record::event(
                op,
                EventKind::LessonRetired,
                &l,
                Some(r.id),
                format!(
                    "lesson {:?} of pipeline {} retired: it hurt more runs than it helped",
                    l.title, l.pipeline
                ),
            );
            notify(
                op,
                r.id,
                &format!("Lesson retired: {}", l.title),
                &format!(
                    "Pipeline {} stopped recalling lesson {} ({:?}): {}.\n\nSee `agency lessons show {}`; bring it back with `agency lessons approve {}`.",
                    l.pipeline,
                    l.id,
                    l.title,
                    l.reason.as_deref().unwrap_or(""),
                    record::short(l.id),
                    record::short(l.id)
                ),
            )?;
        }
    }
    Ok(())
}

/// Apply one proposal of run `r`.
fn apply(op: &mut Op<'_>, r: &PipelineRunRow, p: &Proposal, severe: bool) -> Result<()> {
    let detail = json!({
        "change": p.change.as_str(), "fingerprint": p.fingerprint(), "severe": severe,
        "title": p.title, "advice": p.advice, "trigger": p.trigger,
        "counterexample": p.counterexample,
        "scope": {"kind": p.scope_kind, "name": p.scope}, "rescoped": p.rescoped,
    });
    let Some(mut l) = op.tx.lesson_by_key(&r.pipeline, &p.key)? else {
        if p.change == Change::Deprecate {
            return Ok(());
        }
        let mut l = LessonRow {
            id: LessonId::new_random(),
            pipeline: r.pipeline.clone(),
            key: p.key.clone(),
            title: p.title.clone(),
            scope_kind: p.scope_kind.clone(),
            scope: p.scope.clone(),
            trigger: p.trigger.clone(),
            advice: p.advice.clone(),
            counterexample: p.counterexample.clone(),
            state: LessonState::Proposed,
            reason: None,
            version: 0,
            recalled: 0,
            used: 0,
            helpful: 0,
            harmful: 0,
            created_at: op.now,
            updated_at: op.now,
        };
        record::create(op, &mut l)?;
        record::log(op, &l, "proposed", Some(r.id), detail)?;
        record::event(
            op,
            EventKind::LessonProposed,
            &l,
            Some(r.id),
            format!(
                "the Learner of a {} run proposed lesson {:?}",
                l.pipeline, l.title
            ),
        );
        return consider(op, &mut l, Some(r.id));
    };
    let already = |op: &mut Op<'_>, action: &str, l: &LessonRow| -> Result<bool> {
        Ok(op
            .tx
            .lesson_log_of_run(r.id, action)?
            .iter()
            .any(|e| e.lesson == l.id))
    };
    match p.change {
        Change::Deprecate => {
            if l.state != LessonState::Admitted || already(op, "deprecation_proposed", &l)? {
                return Ok(());
            }
            record::log(op, &l, "deprecation_proposed", Some(r.id), detail)?;
            let runs = runs_with(op.tx, l.id, "deprecation_proposed", None, RESETS)?;
            if runs.len() >= admission::MIN_RUNS || severe {
                l.state = LessonState::Retired;
                l.reason = Some(format!(
                    "deprecated by the Learners of {} run(s)",
                    runs.len()
                ));
                record::save_version(op, &mut l)?;
                record::log(op, &l, "retired", Some(r.id), json!({ "reason": l.reason }))?;
                record::event(
                    op,
                    EventKind::LessonRetired,
                    &l,
                    Some(r.id),
                    format!(
                        "lesson {:?} of pipeline {} retired: deprecated",
                        l.title, l.pipeline
                    ),
                );
            }
            Ok(())
        }
        Change::Add | Change::Edit
            if l.state == LessonState::Admitted && p.fingerprint() != normalise(&l.advice, 400) =>
        {
            if already(op, "edit_proposed", &l)? {
                return Ok(());
            }
            record::log(op, &l, "edit_proposed", Some(r.id), detail)?;
            edit(op, &mut l, p, r.id)
        }
        Change::Add | Change::Edit => {
            if already(op, "proposed", &l)? {
                return Ok(());
            }
            record::log(op, &l, "proposed", Some(r.id), detail)?;
            consider(op, &mut l, Some(r.id))
        }
    }
}

/// New advice for admitted lesson `l`, proposed by runs: applied as the
/// lesson's next version once it recurs and contradicts no other admitted
/// lesson of its scope.
fn edit(op: &mut Op<'_>, l: &mut LessonRow, p: &Proposal, run: HandlerId) -> Result<()> {
    let f = p.fingerprint();
    let runs = runs_with(op.tx, l.id, "edit_proposed", Some(&f), RESETS)?;
    let others = admitted_of_scope(op, l)?;
    let refs: Vec<admission::Admitted<'_>> = others
        .iter()
        .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
        .collect();
    match admission::verdict(&p.advice, runs.len(), false, None, &refs) {
        Verdict::Wait => Ok(()),
        Verdict::Reject(why) => record::log(
            op,
            l,
            "edit_rejected",
            Some(run),
            json!({ "reason": why, "fingerprint": f }),
        ),
        Verdict::Replay => {
            // New advice is admitted as a new lesson is: through the
            // replay gate (and the user, for a tool-policy lesson); a
            // rejected edit restores the version it would have replaced.
            let previous = l.version;
            l.advice = p.advice.clone();
            l.trigger = p.trigger.clone();
            l.counterexample = p.counterexample.clone();
            if USER_SCOPES.contains(&p.scope_kind.as_str()) {
                l.scope_kind = p.scope_kind.clone();
                l.scope = p.scope.clone();
            }
            record::log(
                op,
                l,
                "edited",
                Some(run),
                json!({ "runs": runs, "fingerprint": f, "rescoped": p.rescoped }),
            )?;
            super::replay::gate(
                op,
                l,
                Some(run),
                json!({ "runs": runs, "edit_of": previous }),
            )
        }
    }
}

/// The admitted lessons of `l`'s scope other than `l`: (id, title, advice).
fn admitted_of_scope(op: &mut Op<'_>, l: &LessonRow) -> Result<Vec<(String, String, String)>> {
    let filter = LessonFilter {
        pipeline: Some(l.pipeline.clone()),
        states: vec![LessonState::Admitted],
    };
    Ok(op
        .tx
        .lessons(&filter, MAX_COMPARED)?
        .into_iter()
        .filter(|o| o.id != l.id && o.scope_kind == l.scope_kind && o.scope == l.scope)
        .map(|o| (o.id.to_string(), o.title, o.advice))
        .collect())
}

/// Weigh `l`'s evidence: wait, reject with the reason, or go on to the
/// replay gate and admission.
pub(crate) fn consider(op: &mut Op<'_>, l: &mut LessonRow, run: Option<HandlerId>) -> Result<()> {
    if !matches!(l.state, LessonState::Proposed | LessonState::Rejected) {
        return Ok(());
    }
    let runs = runs_with(op.tx, l.id, "proposed", None, &[])?;
    let severe = any_severe(op.tx, l.id, "proposed")?;
    let rejected_at = if l.state == LessonState::Rejected {
        op.tx
            .lesson_log(l.id, usize::MAX)?
            .iter()
            .rev()
            .find(|e| e.action == "rejected")
            .and_then(|e| serde_json::from_str::<Value>(&e.detail).ok())
            .and_then(|d| d.get("runs").and_then(Value::as_u64))
            .map(|n| n as usize)
            .or(Some(usize::MAX))
    } else {
        None
    };
    let others = admitted_of_scope(op, l)?;
    let refs: Vec<admission::Admitted<'_>> = others
        .iter()
        .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
        .collect();
    match admission::verdict(&l.advice, runs.len(), severe, rejected_at, &refs) {
        Verdict::Wait => Ok(()),
        Verdict::Reject(why) => reject(op, l, run, why, runs.len()),
        Verdict::Replay => {
            let evidence = json!({ "runs": runs, "severe": severe });
            super::replay::gate(op, l, run, evidence)
        }
    }
}

/// Reject `l` with `why`; it had `runs` supporting runs.
pub(crate) fn reject(
    op: &mut Op<'_>,
    l: &mut LessonRow,
    run: Option<HandlerId>,
    why: String,
    runs: usize,
) -> Result<()> {
    l.state = LessonState::Rejected;
    l.reason = Some(why.clone());
    record::save_version(op, l)?;
    record::log(
        op,
        l,
        "rejected",
        run,
        json!({ "reason": why, "runs": runs }),
    )?;
    record::event(
        op,
        EventKind::LessonRejected,
        l,
        run,
        format!(
            "lesson {:?} of pipeline {} rejected: {why}",
            l.title, l.pipeline
        ),
    );
    Ok(())
}

/// After the replay gate passed: admit `l`, or (a tool-policy or
/// permission lesson) wait for the user.
pub(crate) fn admit(
    op: &mut Op<'_>,
    l: &mut LessonRow,
    run: Option<HandlerId>,
    evidence: Value,
) -> Result<()> {
    match admission::after_replay(&l.scope_kind) {
        AfterReplay::Admit => {
            l.state = LessonState::Admitted;
            l.reason = None;
            record::save_version(op, l)?;
            record::log(op, l, "admitted", run, evidence)?;
            record::event(
                op,
                EventKind::LessonAdmitted,
                l,
                run,
                format!("lesson {:?} of pipeline {} admitted", l.title, l.pipeline),
            );
        }
        AfterReplay::AwaitUser => {
            l.state = LessonState::AwaitingUser;
            l.reason = Some(format!(
                "a {} lesson: it needs the user's approval",
                l.scope_kind
            ));
            record::save_version(op, l)?;
            record::log(op, l, "awaiting_user", run, evidence)?;
            record::event(
                op,
                EventKind::LessonChanged,
                l,
                run,
                format!(
                    "lesson {:?} of pipeline {} waits for the user's approval",
                    l.title, l.pipeline
                ),
            );
            if let Some(run) = run {
                notify(
                    op,
                    run,
                    &format!("Lesson needs your approval: {}", l.title),
                    &format!(
                        "Pipeline {} learned a {} lesson, which is recalled only once you approve it:\n\n{:?}\n\nApprove with `agency lessons approve {}`, or reject with `agency lessons reject {} --reason …`.",
                        l.pipeline,
                        l.scope_kind,
                        l.advice,
                        record::short(l.id),
                        record::short(l.id)
                    ),
                )?;
            }
        }
    }
    Ok(())
}

/// Most entries of a run's learning shown with the run.
const MAX_RUN_LEARNING: usize = 200;

/// What run `run` did to lessons, oldest first (at most 200 entries).
pub(crate) fn of_run(
    tx: &mut dyn agency_store::Tx,
    run: HandlerId,
) -> Result<Vec<agency_api::RunLessonEvent>> {
    const ACTIONS: [&str; 11] = [
        "recalled",
        "proposed",
        "edit_proposed",
        "deprecation_proposed",
        "helpful",
        "harmful",
        "replay_started",
        "replayed",
        "admitted",
        "rejected",
        "awaiting_user",
    ];
    let mut rows = Vec::new();
    for a in ACTIONS {
        rows.extend(tx.lesson_log_of_run(run, a)?);
    }
    rows.sort_by_key(|e| e.seq);
    rows.truncate(MAX_RUN_LEARNING);
    let mut titles: std::collections::BTreeMap<LessonId, String> =
        std::collections::BTreeMap::new();
    let mut out = Vec::new();
    for e in rows {
        let title = match titles.entry(e.lesson) {
            std::collections::btree_map::Entry::Occupied(t) => t.get().clone(),
            std::collections::btree_map::Entry::Vacant(v) => v
                .insert(tx.lesson(e.lesson)?.map(|l| l.title).unwrap_or_default())
                .clone(),
        };
        out.push(agency_api::RunLessonEvent {
            lesson: e.lesson,
            title,
            action: e.action,
            at: e.at,
            detail: serde_json::from_str(&e.detail).unwrap_or(Value::Null),
        });
    }
    Ok(out)
}

/// Tell the user, in run `run`'s name.
fn notify(op: &mut Op<'_>, run: HandlerId, subject: &str, body: &str) -> Result<()> {
    let Some(row) = op.tx.handler(run)? else {
        return Ok(());
    };
    let caller = Caller::Handler {
        row,
        agent: AgentId(uuid::Uuid::nil()),
    };
    op.notice(&caller, MailTarget::User, subject, body);
    Ok(())
}
