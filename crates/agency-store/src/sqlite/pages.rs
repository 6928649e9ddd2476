//! Bounded reads (issue 9, items 9 and 10): the newest K rows of a history,
//! counts, and cursor pages, so that no rendering or listing has to load a
//! history or an inbox whole.
//!
//! A cursor is the row's own key (an event's sequence number, a message id,
//! a version number); the order is the one the full queries use, compared
//! as a row value against the cursor row so that equal timestamps page
//! correctly.

use agency_core::{AgentId, FileId, HandlerId, MailTarget, MessageId, OutcomeId};
use rusqlite::{Connection, params};

use super::convert::*;
use crate::model::*;

const FINISHED: &str = "('completed', 'closed')";

fn seq_event(r: &rusqlite::Row<'_>) -> R<(i64, OutcomeEventRow)> {
    let seq: i64 = col(r, 0, "outcome event sequence number")?;
    Ok((seq, outcome_event_row_at(r)?))
}

/// `outcome_event_row` with the columns shifted by one (after the id).
fn outcome_event_row_at(r: &rusqlite::Row<'_>) -> R<OutcomeEventRow> {
    Ok(OutcomeEventRow {
        outcome: col_id(r, 1, "outcome event outcome")?,
        at: col_ts(r, 2, "outcome event time")?,
        handler: col_opt_id(r, 3, "outcome event handler")?,
        agent: col_opt_id(r, 4, "outcome event agent")?,
        action: col(r, 5, "outcome event action")?,
        detail: col(r, 6, "outcome event detail")?,
    })
}

fn seq_log(r: &rusqlite::Row<'_>) -> R<(i64, LogEntryRow)> {
    let seq: i64 = col(r, 0, "log entry sequence number")?;
    Ok((
        seq,
        LogEntryRow {
            handler: col_id(r, 1, "log entry handler")?,
            at: col_ts(r, 2, "log entry time")?,
            agent: col_opt_id(r, 3, "log entry agent")?,
            summary: col(r, 4, "log entry summary")?,
        },
    ))
}

pub(crate) fn outcome_event_count(c: &Connection, id: OutcomeId) -> R<i64> {
    query_value(
        c,
        "SELECT COUNT(*) FROM outcome_events WHERE outcome = ?1",
        [id.to_string()],
        || format!("count the history of outcome {id}"),
    )
}

pub(crate) fn outcome_events_after(
    c: &Connection,
    id: OutcomeId,
    after: Option<i64>,
    n: usize,
) -> R<Vec<(i64, OutcomeEventRow)>> {
    query_rows(
        c,
        "SELECT id, outcome, at, handler, agent, action, detail FROM outcome_events
          WHERE outcome = ?1
            AND (?2 IS NULL OR (at, id) > (SELECT at, id FROM outcome_events WHERE id = ?2))
          ORDER BY at, id LIMIT ?3",
        params![id.to_string(), after, limit(n)],
        || format!("read a page of the history of outcome {id}"),
        seq_event,
    )
}

pub(crate) fn outcome_events_latest(
    c: &Connection,
    id: OutcomeId,
    n: usize,
) -> R<Vec<(i64, OutcomeEventRow)>> {
    let mut rows = query_rows(
        c,
        "SELECT id, outcome, at, handler, agent, action, detail FROM outcome_events
          WHERE outcome = ?1 ORDER BY at DESC, id DESC LIMIT ?2",
        params![id.to_string(), limit(n)],
        || format!("read the latest history of outcome {id}"),
        seq_event,
    )?;
    rows.reverse();
    Ok(rows)
}

pub(crate) fn log_entry_count(c: &Connection, h: HandlerId) -> R<i64> {
    query_value(
        c,
        "SELECT COUNT(*) FROM handler_log WHERE handler = ?1",
        [h.to_string()],
        || format!("count the audit log of handler {h}"),
    )
}

pub(crate) fn log_entries_after(
    c: &Connection,
    h: HandlerId,
    after: Option<i64>,
    n: usize,
) -> R<Vec<(i64, LogEntryRow)>> {
    query_rows(
        c,
        "SELECT id, handler, at, agent, summary FROM handler_log
          WHERE handler = ?1
            AND (?2 IS NULL OR (at, id) > (SELECT at, id FROM handler_log WHERE id = ?2))
          ORDER BY at, id LIMIT ?3",
        params![h.to_string(), after, limit(n)],
        || format!("read a page of the audit log of handler {h}"),
        seq_log,
    )
}

pub(crate) fn log_entries_latest(
    c: &Connection,
    h: HandlerId,
    n: usize,
) -> R<Vec<(i64, LogEntryRow)>> {
    let mut rows = query_rows(
        c,
        "SELECT id, handler, at, agent, summary FROM handler_log
          WHERE handler = ?1 ORDER BY at DESC, id DESC LIMIT ?2",
        params![h.to_string(), limit(n)],
        || format!("read the latest audit log entries of handler {h}"),
        seq_log,
    )?;
    rows.reverse();
    Ok(rows)
}

/// Up to `n` of a handler's audit log entries written by `agent` whose
/// summary starts with `prefix`, oldest first. The handler's index bounds
/// the scan to its own log.
pub(crate) fn log_entries_of_agent(
    c: &Connection,
    h: HandlerId,
    agent: AgentId,
    prefix: &str,
    n: usize,
) -> R<Vec<LogEntryRow>> {
    query_rows(
        c,
        "SELECT handler, at, agent, summary FROM handler_log
          WHERE handler = ?1 AND agent = ?2 AND substr(summary, 1, length(?3)) = ?3
          ORDER BY at, id LIMIT ?4",
        params![h.to_string(), agent.to_string(), prefix, limit(n)],
        || format!("read the audit log entries of agent {agent} of handler {h}"),
        log_entry_row,
    )
}

/// (children not finished, finished children).
pub(crate) fn child_counts(c: &Connection, id: OutcomeId) -> R<(i64, i64)> {
    let sql = format!(
        "SELECT COALESCE(SUM(o.status NOT IN {FINISHED}), 0), COALESCE(SUM(o.status IN {FINISHED}), 0)
           FROM outcome_edges e JOIN outcomes o ON o.id = e.child WHERE e.parent = ?1"
    );
    let got = query_opt(
        c,
        &sql,
        [id.to_string()],
        || format!("count the children of outcome {id}"),
        |r| Ok((col(r, 0, "count")?, col(r, 1, "count")?)),
    )?;
    Ok(got.unwrap_or((0, 0)))
}

/// Children not finished, oldest first; or finished ones, most recently
/// changed first.
pub(crate) fn children_by_state(
    c: &Connection,
    id: OutcomeId,
    finished: bool,
    n: usize,
) -> R<Vec<OutcomeId>> {
    let sql = if finished {
        format!(
            "SELECT o.id FROM outcome_edges e JOIN outcomes o ON o.id = e.child
              WHERE e.parent = ?1 AND o.status IN {FINISHED}
              ORDER BY o.updated_at DESC, o.id DESC LIMIT ?2"
        )
    } else {
        format!(
            "SELECT o.id FROM outcome_edges e JOIN outcomes o ON o.id = e.child
              WHERE e.parent = ?1 AND o.status NOT IN {FINISHED}
              ORDER BY o.created_at, o.id LIMIT ?2"
        )
    };
    query_rows(
        c,
        &sql,
        params![id.to_string(), limit(n)],
        || format!("list the children of outcome {id}"),
        |r| col_id(r, 0, "outcome id"),
    )
}

pub(crate) fn versions_after(
    c: &Connection,
    file: FileId,
    after: Option<i64>,
    n: usize,
) -> R<Vec<VersionRow>> {
    query_rows(
        c,
        concat!(
            "SELECT ",
            version_cols!(),
            " FROM versions WHERE file = ?1 AND version > ?2 ORDER BY version LIMIT ?3"
        ),
        params![file.to_string(), after.unwrap_or(0), limit(n)],
        || format!("list a page of the versions of file {file}"),
        version_row,
    )
}

pub(crate) fn inbox_after(
    c: &Connection,
    to: MailTarget,
    after: Option<MessageId>,
    n: usize,
) -> R<Vec<MessageRow>> {
    let to = target_text(to);
    query_rows(
        c,
        concat!(
            "SELECT ",
            message_cols!(),
            " FROM messages WHERE to_party = ?1 AND acked_at IS NULL AND delivered_at IS NOT NULL
                AND (?2 IS NULL OR (delivered_at, id) > (SELECT delivered_at, id FROM messages WHERE id = ?2))
              ORDER BY delivered_at, id LIMIT ?3"
        ),
        params![to, after.map(|m| m.to_string()), limit(n)],
        || format!("read a page of the inbox of {to}"),
        message_row,
    )
}

pub(crate) fn outbox_before(
    c: &Connection,
    from: MailTarget,
    before: Option<MessageId>,
    n: usize,
) -> R<Vec<MessageRow>> {
    let from = target_text(from);
    query_rows(
        c,
        concat!(
            "SELECT ",
            message_cols!(),
            " FROM messages WHERE from_party = ?1
                AND (?2 IS NULL OR (created_at, id) < (SELECT created_at, id FROM messages WHERE id = ?2))
              ORDER BY created_at DESC, id DESC LIMIT ?3"
        ),
        params![from, before.map(|m| m.to_string()), limit(n)],
        || format!("read a page of the outbox of {from}"),
        message_row,
    )
}
