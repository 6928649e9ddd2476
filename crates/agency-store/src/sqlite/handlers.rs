//! Handler rows and the boss tree, "who has work", agents (at most one live
//! per handler) and handler audit logs.

use agency_core::{AgentId, HandlerId, Timestamp};
use rusqlite::{Connection, params};

use super::convert::*;
use crate::error::StoreError;
use crate::model::*;

pub(crate) fn insert_handler(c: &Connection, h: &HandlerRow) -> R<()> {
    execute(
        c,
        concat!(
            "INSERT INTO handlers (",
            handler_cols!(),
            ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"
        ),
        params![
            h.id.to_string(),
            opt_text(h.boss),
            h.status.as_str(),
            h.state_doc.to_string(),
            h.audit_log.to_string(),
            h.created_at.0,
            h.updated_at.0,
        ],
        || format!("insert handler {}", h.id),
    )
    .map(drop)
}

pub(crate) fn handler(c: &Connection, id: HandlerId) -> R<Option<HandlerRow>> {
    query_opt(
        c,
        concat!("SELECT ", handler_cols!(), " FROM handlers WHERE id = ?1"),
        [id.to_string()],
        || format!("read handler {id}"),
        handler_row,
    )
}

pub(crate) fn update_handler(c: &Connection, h: &HandlerRow) -> R<()> {
    let op = || format!("update handler {}", h.id);
    let n = execute(
        c,
        "UPDATE handlers SET boss = ?2, status = ?3, state_doc = ?4, audit_log = ?5, updated_at = ?6 WHERE id = ?1",
        params![
            h.id.to_string(),
            opt_text(h.boss),
            h.status.as_str(),
            h.state_doc.to_string(),
            h.audit_log.to_string(),
            h.updated_at.0,
        ],
        op,
    )?;
    require_row(n, op)
}

pub(crate) fn root_handler(c: &Connection) -> R<Option<HandlerRow>> {
    // There is one; should there ever be more, the oldest is the root.
    query_opt(
        c,
        concat!(
            "SELECT ",
            handler_cols!(),
            " FROM handlers WHERE boss IS NULL ORDER BY created_at, id LIMIT 1"
        ),
        [],
        || "read the root handler".to_owned(),
        handler_row,
    )
}

pub(crate) fn handler_subtree(c: &Connection, id: HandlerId) -> R<Vec<HandlerRow>> {
    // UNION keeps the walk finite even if a corrupt boss column made a
    // cycle. Order: `id` itself first, then the others by id.
    query_rows(
        c,
        concat!(
            "WITH RECURSIVE tree(node) AS (
               SELECT ?1
               UNION
               SELECT h.id FROM tree JOIN handlers h ON h.boss = tree.node
             )
             SELECT ",
            handler_cols!(),
            " FROM tree JOIN handlers ON handlers.id = tree.node ORDER BY handlers.id <> ?1, handlers.id"
        ),
        [id.to_string()],
        || format!("read the handler subtree of handler {id}"),
        handler_row,
    )
}

pub(crate) fn underlings(c: &Connection, id: HandlerId) -> R<Vec<HandlerRow>> {
    query_rows(
        c,
        concat!(
            "SELECT ",
            handler_cols!(),
            " FROM handlers WHERE boss = ?1 ORDER BY id"
        ),
        [id.to_string()],
        || format!("list the underlings of handler {id}"),
        handler_row,
    )
}

pub(crate) fn handlers(c: &Connection, after: Option<HandlerId>, n: usize) -> R<Vec<HandlerRow>> {
    query_rows(
        c,
        concat!(
            "SELECT ",
            handler_cols!(),
            " FROM handlers WHERE id > ?1 ORDER BY id LIMIT ?2"
        ),
        // Every hyphenated UUID sorts after the empty string.
        params![opt_text(after).unwrap_or_default(), limit(n)],
        || "list handlers".to_owned(),
        handler_row,
    )
}

/// Walk active handlers in id order and probe the partial index
/// `outcomes_open_work` once each: the cost follows the number of handlers,
/// never the number of outcomes.
// Driven from the partial index of open work (in `responsible` order), so
// the cost follows the open outcomes, not the handlers: walking every
// handler and probing for work took 0.3 s at 100,000 handlers (found by
// agency-bench).
pub(crate) const HANDLERS_WITH_WORK: &str = "
SELECT DISTINCT o.responsible FROM outcomes o INDEXED BY outcomes_open_work
 CROSS JOIN handlers h ON h.id = o.responsible
 WHERE o.status = 'open' AND o.perpetual = 0 AND o.responsible > ?1 AND h.status = 'active'
 ORDER BY o.responsible LIMIT ?2";

/// One handler, same rule as [`HANDLERS_WITH_WORK`].
pub(crate) const HAS_WORK: &str = "
SELECT EXISTS (
  SELECT 1 FROM handlers h
   WHERE h.id = ?1 AND h.status = 'active'
     AND EXISTS (SELECT 1 FROM outcomes o WHERE o.responsible = h.id AND o.status = 'open' AND o.perpetual = 0))";

pub(crate) fn handlers_with_work(
    c: &Connection,
    after: Option<HandlerId>,
    n: usize,
) -> R<Vec<HandlerId>> {
    query_rows(
        c,
        HANDLERS_WITH_WORK,
        params![opt_text(after).unwrap_or_default(), limit(n)],
        || "list handlers with work".to_owned(),
        |r| col_id(r, 0, "handler id"),
    )
}

pub(crate) fn has_work(c: &Connection, id: HandlerId) -> R<bool> {
    query_value(c, HAS_WORK, [id.to_string()], || {
        format!("check whether handler {id} has work")
    })
}

// ---- agents -----------------------------------------------------------------

pub(crate) fn insert_agent(c: &Connection, a: &AgentRow) -> R<()> {
    let res = execute(
        c,
        concat!(
            "INSERT INTO agents (",
            agent_cols!(),
            ") VALUES (?1, ?2, ?3, ?4, ?5)"
        ),
        params![
            a.id.to_string(),
            a.handler.to_string(),
            a.started_at.0,
            a.ended_at.map(|t| t.0),
            a.end_reason
        ],
        || format!("insert agent {} for handler {}", a.id, a.handler),
    );
    match res {
        // The partial unique index on live agents names its column; turn
        // SQLite's wording into the rule it enforces.
        Err(StoreError::Unique { op, message }) if message.contains("agents.handler") => {
            Err(StoreError::Unique {
                op,
                message: format!("handler {} already has a live agent", a.handler),
            })
        }
        other => other.map(drop),
    }
}

pub(crate) fn agent(c: &Connection, id: AgentId) -> R<Option<AgentRow>> {
    query_opt(
        c,
        concat!("SELECT ", agent_cols!(), " FROM agents WHERE id = ?1"),
        [id.to_string()],
        || format!("read agent {id}"),
        agent_row,
    )
}

pub(crate) fn end_agent(c: &Connection, id: AgentId, at: Timestamp, reason: &str) -> R<bool> {
    let n = execute(
        c,
        "UPDATE agents SET ended_at = ?2, end_reason = ?3 WHERE id = ?1 AND ended_at IS NULL",
        params![id.to_string(), at.0, reason],
        || format!("end agent {id}"),
    )?;
    Ok(n > 0)
}

pub(crate) fn live_agents_of(c: &Connection, handlers: &[HandlerId]) -> R<Vec<AgentRow>> {
    query_rows(
        c,
        concat!(
            "SELECT ",
            agent_cols!(),
            " FROM agents WHERE ended_at IS NULL AND handler IN (SELECT value FROM json_each(?1)) ORDER BY id"
        ),
        [json_list(handlers, true)],
        || format!("list the live agents of {} handler(s)", handlers.len()),
        agent_row,
    )
}

pub(crate) fn live_agents(c: &Connection) -> R<Vec<AgentRow>> {
    query_rows(
        c,
        concat!(
            "SELECT ",
            agent_cols!(),
            " FROM agents WHERE ended_at IS NULL ORDER BY id"
        ),
        [],
        || "list live agents".to_owned(),
        agent_row,
    )
}

pub(crate) fn recent_agents(c: &Connection, n: usize) -> R<Vec<AgentRow>> {
    query_rows(
        c,
        concat!(
            "SELECT ",
            agent_cols!(),
            " FROM agents ORDER BY started_at DESC, id DESC LIMIT ?1"
        ),
        [limit(n)],
        || "list recent agents".to_owned(),
        agent_row,
    )
}

// ---- handler audit logs -----------------------------------------------------

pub(crate) fn insert_log_entry(c: &Connection, e: &LogEntryRow) -> R<()> {
    execute(
        c,
        "INSERT INTO handler_log (handler, at, agent, summary) VALUES (?1, ?2, ?3, ?4)",
        params![e.handler.to_string(), e.at.0, opt_text(e.agent), e.summary],
        || format!("insert an audit log entry for handler {}", e.handler),
    )
    .map(drop)
}

pub(crate) fn log_entries(c: &Connection, handler: HandlerId) -> R<Vec<LogEntryRow>> {
    query_rows(
        c,
        "SELECT handler, at, agent, summary FROM handler_log WHERE handler = ?1 ORDER BY at, id",
        [handler.to_string()],
        || format!("read the audit log of handler {handler}"),
        log_entry_row,
    )
}

pub(crate) fn counts(c: &Connection) -> R<StoreCounts> {
    query_opt(
        c,
        "SELECT (SELECT COUNT(*) FROM handlers WHERE status = 'active'),
                (SELECT COUNT(*) FROM outcomes WHERE status = 'open'),
                (SELECT COUNT(*) FROM agents WHERE ended_at IS NULL),
                (SELECT COUNT(*) FROM files),
                (SELECT COUNT(*) FROM handler_stalls s JOIN handlers h ON h.id = s.handler
                  WHERE h.status = 'active')",
        [],
        || "count handlers, outcomes, agents and files".to_owned(),
        |r| {
            Ok(StoreCounts {
                handlers_active: col(r, 0, "count")?,
                outcomes_open: col(r, 1, "count")?,
                agents_live: col(r, 2, "count")?,
                files: col(r, 3, "count")?,
                handlers_stalled: col(r, 4, "count")?,
            })
        },
    )
    .map(Option::unwrap_or_default)
}
