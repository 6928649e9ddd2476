//! Writing the KB files Agency maintains itself: each outcome's Markdown
//! rendering and each handler's audit log, a new version on every change.
//! Blobs are written (durably) before the version row that points at them.
//!
//! Each version is bounded: only the newest history
//! events, log entries and children are read and rendered (with counts of
//! the rest), so the bytes stored per event do not grow with the history.

use agency_core::access::FileKind;
use agency_core::render::{
    FINISHED_CHILDREN_SHOWN, HISTORY_SHOWN, HistoryLine, LOG_ENTRIES_SHOWN, LogLine,
    OPEN_CHILDREN_SHOWN, OutcomeDoc, PARENTS_SHOWN, render_audit_log_tail, render_outcome,
};
use agency_core::{AgentId, FileId, HandlerId, OutcomeId};
use agency_store::{BlobId, FileRow, KbAction, KbAuditRow, OutcomeEventRow, VersionRow};

use crate::Result;
use crate::error::ServiceError;
use crate::service::Op;
use agency_store::LogEntryRow;

/// Who caused a system-written version (for its version row and audit).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Author {
    pub handler: Option<HandlerId>,
    pub agent: Option<AgentId>,
}

/// Prefix of outcome-history actions taken by Agency itself rather than by
/// the user; both have no handler.
pub(crate) const SYSTEM_ACTION: &str = "system:";

pub(crate) fn actor_label(e: &OutcomeEventRow) -> String {
    match (e.handler, e.agent) {
        (Some(h), Some(a)) => format!("handler {h} (agent {a})"),
        (Some(h), None) => format!("handler {h}"),
        (None, _) if e.action.starts_with(SYSTEM_ACTION) => "Agency".to_owned(),
        (None, _) => "user".to_owned(),
    }
}

/// A version's content: bytes to store, or a blob the caller stored
/// (durably) before the transaction, with its size — not stored again (on
/// PostgreSQL that is a round trip less while the writer holds its turn).
pub(crate) enum Content<'a> {
    Bytes(&'a [u8]),
    Stored(BlobId, usize),
}

/// Insert a new file with `content` as version 1.
pub(crate) fn create_file(
    op: &mut Op<'_>,
    row: FileRow,
    content: &[u8],
    author: Author,
) -> Result<VersionRow> {
    create_file_of(op, row, Content::Bytes(content), author)
}

/// [`create_file`] of either kind of [`Content`].
pub(crate) fn create_file_of(
    op: &mut Op<'_>,
    mut row: FileRow,
    content: Content<'_>,
    author: Author,
) -> Result<VersionRow> {
    row.latest_version = 0;
    op.tx.insert_file(&row)?;
    let stored = stored(op, content)?;
    insert_version(op, row.id, 1, stored, author, KbAction::Create)
}

/// The blob of `content` and its size, storing it if it is not yet.
fn stored(op: &mut Op<'_>, content: Content<'_>) -> Result<(BlobId, usize)> {
    Ok(match content {
        Content::Bytes(b) => (op.blobs.put(b)?, b.len()),
        Content::Stored(hash, size) => (hash, size),
    })
}

/// Append a version to an existing file (the caller checked the base).
pub(crate) fn append_version(
    op: &mut Op<'_>,
    file: FileId,
    latest: i64,
    content: &[u8],
    author: Author,
) -> Result<VersionRow> {
    append_version_of(op, file, latest, Content::Bytes(content), author)
}

/// [`append_version`] of either kind of [`Content`].
pub(crate) fn append_version_of(
    op: &mut Op<'_>,
    file: FileId,
    latest: i64,
    content: Content<'_>,
    author: Author,
) -> Result<VersionRow> {
    let stored = stored(op, content)?;
    insert_version(op, file, latest + 1, stored, author, KbAction::Write)
}

/// The version row of a stored blob, and its audit record.
fn insert_version(
    op: &mut Op<'_>,
    file: FileId,
    version: i64,
    (hash, size): (BlobId, usize),
    author: Author,
    action: KbAction,
) -> Result<VersionRow> {
    let v = VersionRow {
        file,
        version,
        hash,
        size: size as i64,
        created_at: op.now,
        handler: author.handler,
        agent: author.agent,
    };
    op.tx.insert_version(&v)?;
    audit(op, file, action, version, author)?;
    Ok(v)
}

fn audit(
    op: &mut Op<'_>,
    file: FileId,
    action: KbAction,
    version: i64,
    author: Author,
) -> Result<()> {
    op.tx.insert_kb_audit(&[KbAuditRow {
        file,
        at: op.now,
        handler: author.handler,
        agent: author.agent,
        action,
        version,
    }])?;
    Ok(())
}

/// Record an outcome-history event.
pub(crate) fn outcome_event(
    op: &mut Op<'_>,
    outcome: OutcomeId,
    author: Author,
    action: &str,
    detail: String,
) -> Result<()> {
    op.tx.insert_outcome_event(&OutcomeEventRow {
        outcome,
        at: op.now,
        handler: author.handler,
        agent: author.agent,
        action: action.to_owned(),
        detail,
    })?;
    Ok(())
}

/// Write the outcome's current state as a new version of its KB file
/// (creating the file on first render).
pub(crate) fn render_outcome_file(op: &mut Op<'_>, id: OutcomeId, author: Author) -> Result<()> {
    let o = op
        .tx
        .outcome(id)?
        .ok_or_else(|| ServiceError::not_found("outcome", id))?;
    let mut parents = op.tx.parents(id)?;
    let parents_total = parents.len();
    parents.truncate(PARENTS_SHOWN);
    let (open_total, finished_total) = op.tx.child_counts(id)?;
    let open_children = op.tx.children_by_state(id, false, OPEN_CHILDREN_SHOWN)?;
    let finished_children = op.tx.children_by_state(id, true, FINISHED_CHILDREN_SHOWN)?;
    let history_total = op.tx.outcome_event_count(id)?;
    let history: Vec<HistoryLine> = op
        .tx
        .outcome_events_latest(id, HISTORY_SHOWN)?
        .iter()
        .map(|(_, e)| HistoryLine {
            at: e.at,
            actor: actor_label(e),
            action: e.action.clone(),
            detail: e.detail.clone(),
        })
        .collect();
    let text = render_outcome(&OutcomeDoc {
        id,
        title: &o.title,
        description: &o.description,
        status: o.status,
        status_reason: o.status_reason.as_deref(),
        priority: o.priority,
        perpetual: o.perpetual,
        parents: &parents,
        parents_total,
        open_children: &open_children,
        open_total: count(open_total),
        finished_children: &finished_children,
        finished_total: count(finished_total),
        history: &history,
        history_total: count(history_total),
    });
    let description = format!("Outcome: {}", o.title);
    match op.tx.file(id.file())? {
        Some(f) => {
            if f.description != description {
                op.tx.set_file_description(f.id, &description)?;
            }
            append_version(op, f.id, f.latest_version, text.as_bytes(), author)?;
        }
        None => {
            let row = FileRow {
                id: id.file(),
                kind: FileKind::Outcome,
                description,
                owner: None,
                created_at: op.now,
                created_by: author.handler,
                latest_version: 0,
            };
            create_file(op, row, text.as_bytes(), author)?;
        }
    }
    Ok(())
}

/// Write the handler's audit log file anew from its entries.
pub(crate) fn render_audit_log_file(
    op: &mut Op<'_>,
    handler: HandlerId,
    author: Author,
) -> Result<()> {
    let h = op
        .tx
        .handler(handler)?
        .ok_or_else(|| ServiceError::not_found("handler", handler))?;
    let title = op
        .tx
        .outcome(handler.root())?
        .map(|o| o.title)
        .unwrap_or_default();
    let total = count(op.tx.log_entry_count(handler)?);
    let lines: Vec<LogLine> = op
        .tx
        .log_entries_latest(handler, LOG_ENTRIES_SHOWN)?
        .into_iter()
        .map(|(_, e)| LogLine {
            at: e.at,
            agent: e.agent,
            summary: e.summary,
        })
        .collect();
    let text = render_audit_log_tail(&title, &lines, total.saturating_sub(lines.len()));
    let f = op
        .tx
        .file(h.audit_log)?
        .ok_or_else(|| ServiceError::not_found("KB file", h.audit_log))?;
    append_version(op, f.id, f.latest_version, text.as_bytes(), author)?;
    Ok(())
}

fn count(n: i64) -> usize {
    usize::try_from(n).unwrap_or(0)
}

/// Add an entry to a handler's audit log (rendered into its file by
/// [`render_audit_log_file`]).
pub(crate) fn log(
    op: &mut Op<'_>,
    handler: HandlerId,
    agent: Option<AgentId>,
    summary: String,
) -> Result<()> {
    op.tx.insert_log_entry(&LogEntryRow {
        handler,
        at: op.now,
        agent,
        summary,
    })?;
    Ok(())
}
