//! The user's control over lessons: list, show (with history, evidence
//! and versions), approve, reject, retire, roll back, export. Only the
//! user; every change is a new version of the lesson's KB file, a history
//! entry and an event.

use agency_api::{
    EventKind, LessonCounters, LessonDetail, LessonEvent, LessonScope, LessonVersion, LessonView,
    LessonsExport,
};
use agency_core::status::LessonState;
use agency_core::{LessonId, Principal};
use agency_store::{LessonFilter, LessonRow, Tx};
use serde_json::{Value, json};

use super::record;
use crate::Result;
use crate::error::ServiceError;
use crate::service::{Service, authenticate};

/// Most lessons one listing or export returns.
pub const MAX_LISTED: usize = 1000;
/// Most history entries `show` returns (the newest).
pub const MAX_HISTORY: usize = 500;
/// Most characters of a reason the user gives.
const MAX_REASON: usize = 1000;

impl Service {
    /// The user lists lessons, most recently changed first.
    pub fn lessons(
        &self,
        who: Principal,
        pipeline: Option<&str>,
        states: &[LessonState],
        limit: Option<usize>,
    ) -> Result<Vec<LessonView>> {
        let n = limit.unwrap_or(100).min(MAX_LISTED);
        let filter = LessonFilter {
            pipeline: pipeline.map(str::to_owned),
            states: states.to_vec(),
        };
        self.read(|tx| {
            require_user(tx, who, "list lessons")?;
            let rows = tx.lessons(&filter, n)?;
            rows.into_iter().map(|l| view(tx, l)).collect()
        })
    }

    /// The user reads one lesson with its history and every version.
    pub fn lesson_show(&self, who: Principal, id: LessonId) -> Result<LessonDetail> {
        self.read(|tx| {
            require_user(tx, who, "show a lesson")?;
            let l = tx
                .lesson(id)?
                .ok_or_else(|| ServiceError::not_found("lesson", id))?;
            detail(tx, self, l)
        })
    }

    /// The user admits a lesson (one that waits for them, or any not
    /// admitted: their decision overrides the evidence rules).
    pub fn lesson_approve(&self, who: Principal, id: LessonId) -> Result<LessonView> {
        self.lesson_change(who, id, "approve", |l| {
            if l.state == LessonState::Admitted {
                return Err(format!("it is already admitted (version {})", l.version));
            }
            l.state = LessonState::Admitted;
            l.reason = None;
            Ok(("approved", EventKind::LessonAdmitted))
        })
    }

    /// The user rejects a lesson not admitted yet, with the reason.
    pub fn lesson_reject(&self, who: Principal, id: LessonId, reason: &str) -> Result<LessonView> {
        let reason = checked_reason(reason, "reject a lesson")?;
        self.lesson_change(who, id, "reject", move |l| {
            if !matches!(l.state, LessonState::Proposed | LessonState::Replaying | LessonState::AwaitingUser) {
                return Err(format!("it is {}; only a proposed lesson, or one waiting for the replay gate or for you, is rejected (retire an admitted one)", l.state.as_str()));
            }
            l.state = LessonState::Rejected;
            l.reason = Some(format!("rejected by the user: {reason}"));
            Ok(("rejected", EventKind::LessonRejected))
        })
    }

    /// The user stops a lesson from being recalled, with the reason.
    pub fn lesson_retire(&self, who: Principal, id: LessonId, reason: &str) -> Result<LessonView> {
        let reason = checked_reason(reason, "retire a lesson")?;
        self.lesson_change(who, id, "retire", move |l| {
            if l.state == LessonState::Retired {
                return Err("it is already retired".to_owned());
            }
            l.state = LessonState::Retired;
            l.reason = Some(format!("retired by the user: {reason}"));
            Ok(("retired", EventKind::LessonRetired))
        })
    }

    /// The user restores a lesson's version `to` (default: the newest
    /// earlier version that was admitted and differs, else the one before
    /// its latest) as its next version. Restoring an admitted version
    /// keeps the lesson admitted (the next run recalls that content);
    /// restoring any other leaves it rolled back, not recalled.
    pub fn lesson_rollback(
        &self,
        who: Principal,
        id: LessonId,
        to: Option<i64>,
    ) -> Result<LessonView> {
        self.write(|op| {
            require_user(op.tx, who, "roll a lesson back")?;
            let mut l = op.tx.lesson(id)?.ok_or_else(|| ServiceError::not_found("lesson", id))?;
            let latest = op
                .tx
                .file(id.file())?
                .ok_or_else(|| ServiceError::not_found("KB file of lesson", id))?
                .latest_version;
            let to = match to {
                Some(v) if v < 1 || v >= latest => {
                    return Err(ServiceError::invalid(format!(
                        "failed to roll lesson {id} back to version {v}: give an earlier version, from 1 to {} (it is at version {latest}; `agency lessons show {}` lists them)",
                        latest - 1,
                        record::short(id)
                    )));
                }
                Some(v) => v,
                None if latest < 2 => {
                    return Err(ServiceError::invalid(format!(
                        "failed to roll lesson {id} back: it has one version only; retire it instead (`agency lessons retire {} --reason …`)",
                        record::short(id)
                    )));
                }
                None => default_rollback(op, &l, latest)?,
            };
            let v = op
                .tx
                .version(id.file(), to)?
                .ok_or_else(|| ServiceError::not_found("lesson version", format!("{id} v{to}")))?;
            let content: Value = serde_json::from_slice(&op.blobs.get(&v.hash)?).map_err(|e| {
                ServiceError::from(agency_store::StoreError::corrupt("lesson version", format!("lesson {id} v{to}: {e}")))
            })?;
            let from = l.version;
            record::restore(&mut l, &content)?;
            if l.state != LessonState::Admitted {
                l.state = LessonState::RolledBack;
                l.reason = Some(format!("rolled back by the user to version {to}"));
            }
            record::save_version(op, &mut l)?;
            record::log(op, &l, "rolled_back", None, json!({ "from": from, "to": to, "state": l.state }))?;
            record::event(op, EventKind::LessonRolledBack, &l, None, format!(
                "lesson {:?} of pipeline {} rolled back to version {to} (now version {}, {})",
                l.title, l.pipeline, l.version, l.state.as_str()
            ));
            view(op.tx, l)
        })
    }

    /// Every lesson of `pipeline` (or all) with its history and versions.
    pub fn lessons_export(&self, who: Principal, pipeline: Option<&str>) -> Result<LessonsExport> {
        let filter = LessonFilter {
            pipeline: pipeline.map(str::to_owned),
            states: Vec::new(),
        };
        self.read(|tx| {
            require_user(tx, who, "export lessons")?;
            let mut lessons = Vec::new();
            let mut rows = tx.lessons(&filter, MAX_LISTED)?;
            rows.sort_by_key(|l| (l.created_at, l.id));
            for l in rows {
                lessons.push(detail(tx, self, l)?);
            }
            Ok(LessonsExport {
                pipeline: pipeline.map(str::to_owned),
                exported_at: self.now(),
                lessons,
            })
        })
    }

    /// One change of state by the user: `change` checks and sets it (an
    /// `Err` says why it does not apply), returning the history action
    /// and the event kind.
    fn lesson_change(
        &self,
        who: Principal,
        id: LessonId,
        what: &str,
        change: impl FnOnce(&mut LessonRow) -> std::result::Result<(&'static str, EventKind), String>,
    ) -> Result<LessonView> {
        self.write(|op| {
            require_user(op.tx, who, &format!("{what} a lesson"))?;
            let mut l = op
                .tx
                .lesson(id)?
                .ok_or_else(|| ServiceError::not_found("lesson", id))?;
            let before = l.state;
            let (action, kind) = change(&mut l).map_err(|why| {
                ServiceError::invalid(format!("failed to {what} lesson {id}: {why}"))
            })?;
            record::save_version(op, &mut l)?;
            let d = json!({ "from": before, "reason": l.reason, "by": "user" });
            record::log(op, &l, action, None, d)?;
            record::event(
                op,
                kind,
                &l,
                None,
                format!(
                    "the user {action} lesson {:?} of pipeline {} (version {})",
                    l.title, l.pipeline, l.version
                ),
            );
            view(op.tx, l)
        })
    }
}

/// The version `rollback` restores when none is given: the newest earlier
/// one that was admitted and differs from the lesson as it is (the last
/// good advice), else the one before the latest.
fn default_rollback(op: &mut crate::service::Op<'_>, l: &LessonRow, latest: i64) -> Result<i64> {
    let now = record::content(l);
    for v in (1..latest).rev() {
        let Some(row) = op.tx.version(l.id.file(), v)? else {
            continue;
        };
        let Ok(c) = serde_json::from_slice::<Value>(&op.blobs.get(&row.hash)?) else {
            continue;
        };
        let differs = ["advice", "trigger", "state"]
            .iter()
            .any(|f| c.get(f) != now.get(f));
        if c.get("state").and_then(Value::as_str) == Some("admitted") && differs {
            return Ok(v);
        }
    }
    Ok(latest - 1)
}

fn checked_reason(reason: &str, what: &str) -> Result<String> {
    let r = reason.trim();
    if r.is_empty() {
        return Err(ServiceError::invalid(format!(
            "failed to {what}: give a reason (--reason …)"
        )));
    }
    if r.chars().count() > MAX_REASON {
        return Err(ServiceError::invalid(format!(
            "failed to {what}: the reason is longer than {MAX_REASON} characters"
        )));
    }
    Ok(r.to_owned())
}

fn require_user(tx: &mut dyn Tx, who: Principal, what: &str) -> Result<()> {
    if !authenticate(tx, who)?.is_user() {
        return Err(ServiceError::denied(format!(
            "failed to {what}: only the user may"
        )));
    }
    Ok(())
}

fn view(tx: &mut dyn Tx, l: LessonRow) -> Result<LessonView> {
    let runs = super::learn::runs_of(tx, l.id)?;
    Ok(LessonView {
        id: l.id,
        pipeline: l.pipeline,
        title: l.title,
        scope: LessonScope {
            kind: l.scope_kind,
            name: l.scope,
        },
        trigger: l.trigger,
        advice: l.advice,
        counterexample: l.counterexample,
        state: l.state,
        reason: l.reason,
        version: l.version,
        counters: LessonCounters {
            recalled: l.recalled,
            used: l.used,
            helpful: l.helpful,
            harmful: l.harmful,
        },
        supporting_runs: runs,
        created_at: l.created_at,
        updated_at: l.updated_at,
    })
}

fn detail(tx: &mut dyn Tx, svc: &Service, l: LessonRow) -> Result<LessonDetail> {
    let id = l.id;
    let history = tx
        .lesson_log(id, MAX_HISTORY)?
        .into_iter()
        .map(|e| LessonEvent {
            at: e.at,
            action: e.action,
            run: e.run,
            version: e.version,
            detail: serde_json::from_str(&e.detail).unwrap_or(Value::Null),
        })
        .collect();
    let mut versions = Vec::new();
    for v in tx.versions(id.file())? {
        let bytes = svc.blobs.get(&v.hash)?;
        versions.push(LessonVersion {
            version: v.version,
            at: v.created_at,
            content: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        });
    }
    Ok(LessonDetail {
        lesson: view(tx, l)?,
        history,
        versions,
    })
}
