//! Keeping a lesson: every change of its content or state is a new
//! version of its KB file (a JSON document, readable with `agency kb cat`,
//! audited like any KB write), a row of its history and an event.

use agency_api::EventKind;
use agency_core::access::FileKind;
use agency_core::status::LessonState;
use agency_core::{HandlerId, LessonId};
use agency_store::{FileRow, LessonLogRow, LessonRow};
use serde_json::{Value, json};

use crate::Result;
use crate::error::ServiceError;
use crate::event_log::Record;
use crate::render::{Author, append_version, create_file};
use crate::service::Op;

/// A lesson's versioned content: what its KB file holds.
pub fn content(l: &LessonRow) -> Value {
    json!({
        "lesson": l.id,
        "pipeline": l.pipeline,
        "title": l.title,
        "scope": {"kind": l.scope_kind, "name": l.scope},
        "trigger": l.trigger,
        "advice": l.advice,
        "counterexample": l.counterexample,
        "state": l.state,
        "reason": l.reason,
    })
}

/// Set `l`'s fields from a stored version's `content` (a rollback).
pub fn restore(l: &mut LessonRow, c: &Value) -> Result<()> {
    let text = |f: &str| c.get(f).and_then(Value::as_str).map(str::to_owned);
    let bad = || {
        ServiceError::from(agency_store::StoreError::corrupt(
            "lesson version",
            format!("lesson {}: a stored version lacks its fields", l.id),
        ))
    };
    l.title = text("title").ok_or_else(bad)?;
    l.trigger = text("trigger").ok_or_else(bad)?;
    l.advice = text("advice").ok_or_else(bad)?;
    l.counterexample = text("counterexample");
    l.scope_kind = c
        .pointer("/scope/kind")
        .and_then(Value::as_str)
        .ok_or_else(bad)?
        .to_owned();
    l.scope = c
        .pointer("/scope/name")
        .and_then(Value::as_str)
        .ok_or_else(bad)?
        .to_owned();
    l.state = c
        .get("state")
        .and_then(Value::as_str)
        .and_then(LessonState::parse)
        .ok_or_else(bad)?;
    l.reason = text("reason");
    Ok(())
}

/// Store a new lesson: its row and version 1 of its KB file.
pub fn create(op: &mut Op<'_>, l: &mut LessonRow) -> Result<()> {
    let bytes = bytes(l)?;
    create_file(
        op,
        FileRow {
            id: l.id.file(),
            kind: FileKind::Document,
            description: format!("Lesson {:?} of pipeline {}", l.title, l.pipeline),
            owner: None,
            created_at: op.now,
            created_by: None,
            latest_version: 0,
        },
        &bytes,
        Author::default(),
    )?;
    l.version = 1;
    op.tx.insert_lesson(l)?;
    Ok(())
}

/// Store `l`'s changed content or state as its next version.
pub fn save_version(op: &mut Op<'_>, l: &mut LessonRow) -> Result<()> {
    let file = l.id.file();
    let latest = op
        .tx
        .file(file)?
        .ok_or_else(|| ServiceError::not_found("KB file of lesson", l.id))?
        .latest_version;
    let bytes = bytes(l)?;
    let v = append_version(op, file, latest, &bytes, Author::default())?;
    l.version = v.version;
    l.updated_at = op.now;
    op.tx.update_lesson(l)?;
    Ok(())
}

/// Store `l`'s changed counters (no new version).
pub fn save_counters(op: &mut Op<'_>, l: &mut LessonRow) -> Result<()> {
    l.updated_at = op.now;
    op.tx.update_lesson(l)?;
    Ok(())
}

/// Add to `l`'s history.
pub fn log(
    op: &mut Op<'_>,
    l: &LessonRow,
    action: &str,
    run: Option<HandlerId>,
    detail: Value,
) -> Result<()> {
    op.tx.append_lesson_log(&LessonLogRow {
        seq: 0,
        lesson: l.id,
        action: action.to_owned(),
        run,
        version: l.version,
        detail: detail.to_string(),
        at: op.now,
    })?;
    Ok(())
}

/// Log an event about `l` (its run's, when a run caused it; else the
/// user's).
pub fn event(
    op: &mut Op<'_>,
    kind: EventKind,
    l: &LessonRow,
    run: Option<HandlerId>,
    summary: String,
) {
    op.record(Record::new(kind, run, summary).data(json!({
        "lesson": l.id, "pipeline": l.pipeline, "title": l.title,
        "state": l.state, "version": l.version, "reason": l.reason, "run": run,
    })));
}

/// A lesson's id as the user sees it in listings.
pub fn short(id: LessonId) -> String {
    id.to_string()[..8].to_owned()
}

fn bytes(l: &LessonRow) -> Result<Vec<u8>> {
    serde_json::to_vec_pretty(&content(l))
        .map_err(|e| ServiceError::invalid(format!("failed to store lesson {}: {e}", l.id)))
}
