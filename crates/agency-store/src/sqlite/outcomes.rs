//! Outcome rows, the outcome DAG and outcome histories.
//!
//! DAG walks are recursive CTEs with `UNION` (not `UNION ALL`): a node
//! reached along two paths is kept once, so walks terminate and stay linear
//! in the size of the DAG. Walks up use the `(child, parent)` index, walks
//! down the `(parent, child)` primary key.

use agency_core::{HandlerId, OutcomeId, Timestamp};
use rusqlite::{Connection, params};

use super::convert::*;
use crate::model::*;
use crate::tx::SubtreeRows;

/// A DAG edge, (parent, child).
type Edge = (OutcomeId, OutcomeId);

pub(crate) fn insert_outcome(c: &Connection, o: &OutcomeRow) -> R<()> {
    execute(
        c,
        concat!(
            "INSERT INTO outcomes (",
            outcome_cols!(),
            ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)"
        ),
        params![
            o.id.to_string(),
            o.title,
            o.description,
            o.status.as_str(),
            o.status_reason,
            o.priority,
            o.perpetual,
            o.process_inbox,
            o.responsible.to_string(),
            o.created_at.0,
            o.updated_at.0,
        ],
        || format!("insert outcome {}", o.id),
    )
    .map(drop)
}

pub(crate) fn outcome(c: &Connection, id: OutcomeId) -> R<Option<OutcomeRow>> {
    query_opt(
        c,
        concat!("SELECT ", outcome_cols!(), " FROM outcomes WHERE id = ?1"),
        [id.to_string()],
        || format!("read outcome {id}"),
        outcome_row,
    )
}

pub(crate) fn update_outcome(c: &Connection, o: &OutcomeRow) -> R<()> {
    let op = || format!("update outcome {}", o.id);
    let n = execute(
        c,
        "UPDATE outcomes SET title = ?2, description = ?3, status = ?4, status_reason = ?5, priority = ?6,
             perpetual = ?7, process_inbox = ?8, responsible = ?9, created_at = ?10, updated_at = ?11
         WHERE id = ?1",
        params![
            o.id.to_string(),
            o.title,
            o.description,
            o.status.as_str(),
            o.status_reason,
            o.priority,
            o.perpetual,
            o.process_inbox,
            o.responsible.to_string(),
            o.created_at.0,
            o.updated_at.0,
        ],
        op,
    )?;
    require_row(n, op)
}

pub(crate) fn insert_edge(c: &Connection, parent: OutcomeId, child: OutcomeId) -> R<()> {
    execute(
        c,
        "INSERT OR IGNORE INTO outcome_edges (parent, child) VALUES (?1, ?2)",
        [parent.to_string(), child.to_string()],
        || format!("insert outcome edge {parent} -> {child}"),
    )
    .map(drop)
}

pub(crate) fn delete_edge(c: &Connection, parent: OutcomeId, child: OutcomeId) -> R<()> {
    execute(
        c,
        "DELETE FROM outcome_edges WHERE parent = ?1 AND child = ?2",
        [parent.to_string(), child.to_string()],
        || format!("delete outcome edge {parent} -> {child}"),
    )
    .map(drop)
}

pub(crate) fn parents(c: &Connection, id: OutcomeId) -> R<Vec<OutcomeId>> {
    query_rows(
        c,
        "SELECT parent FROM outcome_edges WHERE child = ?1 ORDER BY parent",
        [id.to_string()],
        || format!("list the parents of outcome {id}"),
        |r| col_id(r, 0, "outcome edge parent"),
    )
}

pub(crate) fn children(c: &Connection, id: OutcomeId) -> R<Vec<OutcomeId>> {
    query_rows(
        c,
        "SELECT child FROM outcome_edges WHERE parent = ?1 ORDER BY child",
        [id.to_string()],
        || format!("list the children of outcome {id}"),
        |r| col_id(r, 0, "outcome edge child"),
    )
}

/// `up(node)`: ?1 and all its ancestors.
macro_rules! walk_up {
    () => {
        "WITH RECURSIVE up(node) AS (
           SELECT ?1
           UNION
           SELECT e.parent FROM up JOIN outcome_edges e ON e.child = up.node
         ) "
    };
}

/// `sub(node)`: ?1 and all its descendants.
macro_rules! walk_down {
    () => {
        "WITH RECURSIVE sub(node) AS (
           SELECT ?1
           UNION
           SELECT e.child FROM sub JOIN outcome_edges e ON e.parent = sub.node
         ) "
    };
}

pub(crate) fn is_descendant_or_self(
    c: &Connection,
    node: OutcomeId,
    ancestor: OutcomeId,
) -> R<bool> {
    if node == ancestor {
        return Ok(true);
    }
    // Walk up from `node`: the ancestors of one outcome are few, while the
    // descendants of `ancestor` may be the whole DAG.
    query_value(
        c,
        concat!(
            walk_up!(),
            "SELECT EXISTS (SELECT 1 FROM up WHERE node = ?2)"
        ),
        [node.to_string(), ancestor.to_string()],
        || format!("check whether outcome {node} is below outcome {ancestor}"),
    )
}

pub(crate) fn ancestor_edges(c: &Connection, id: OutcomeId) -> R<Vec<Edge>> {
    // An edge lies on a path from `id` to a root exactly when its child is
    // `id` or one of its ancestors. CROSS JOIN keeps the (small) walk as
    // the outer loop: left to itself SQLite scanned every edge and probed
    // the walk (0.45 s at 1,000,000 outcomes; found by agency-bench).
    query_rows(
        c,
        concat!(
            walk_up!(),
            "SELECT e.parent, e.child FROM up CROSS JOIN outcome_edges e ON e.child = up.node ORDER BY e.child, e.parent"
        ),
        [id.to_string()],
        || format!("list the ancestor edges of outcome {id}"),
        |r| {
            Ok((
                col_id(r, 0, "outcome edge parent")?,
                col_id(r, 1, "outcome edge child")?,
            ))
        },
    )
}

pub(crate) fn subtree(c: &Connection, id: OutcomeId, n: usize) -> R<SubtreeRows> {
    let op = || format!("read the subtree of outcome {id}");
    // SQLite runs a recursive CTE off a FIFO queue, so rows come out in
    // breadth-first discovery order (children of one node by id, via the
    // primary key), and the LIMIT stops the walk itself rather than
    // trimming a full one. CROSS JOIN keeps `sub` as the outer loop so that
    // order survives the join.
    let rows = query_rows(
        c,
        concat!(
            "WITH RECURSIVE sub(node) AS (
               SELECT ?1
               UNION
               SELECT e.child FROM sub JOIN outcome_edges e ON e.parent = sub.node
               LIMIT ?2
             )
             SELECT ",
            outcome_cols!(),
            " FROM sub CROSS JOIN outcomes ON outcomes.id = sub.node"
        ),
        params![id.to_string(), limit(n)],
        op,
        outcome_row,
    )?;
    let ids = json_list(rows.iter().map(|o| o.id), true);
    // Only the parent is matched in SQL: with both `IN` lists SQLite probes
    // the primary key once per (parent, child) pair of the two lists, which
    // is quadratic (a 10,000-node subtree took minutes; found by
    // agency-bench). The child filter is a hash lookup here instead.
    let mut edges = query_rows(
        c,
        "SELECT parent, child FROM outcome_edges
          WHERE parent IN (SELECT value FROM json_each(?1))
          ORDER BY parent, child",
        [ids],
        op,
        |r| {
            Ok((
                col_id(r, 0, "outcome edge parent")?,
                col_id(r, 1, "outcome edge child")?,
            ))
        },
    )?;
    let kept: std::collections::HashSet<OutcomeId> = rows.iter().map(|o| o.id).collect();
    edges.retain(|(_, child)| kept.contains(child));
    Ok((rows, edges))
}

pub(crate) fn reassign_subtree(
    c: &Connection,
    root: OutcomeId,
    from: HandlerId,
    to: HandlerId,
    at: Timestamp,
) -> R<u64> {
    if from == to {
        return Ok(0);
    }
    let n = execute(
        c,
        concat!(
            walk_down!(),
            "UPDATE outcomes SET responsible = ?3, updated_at = ?4
              WHERE responsible = ?2 AND id IN (SELECT node FROM sub)"
        ),
        params![root.to_string(), from.to_string(), to.to_string(), at.0],
        || format!("reassign the subtree of outcome {root} from handler {from} to handler {to}"),
    )?;
    Ok(n as u64)
}

pub(crate) fn reassign_all(
    c: &Connection,
    from: &[HandlerId],
    to: HandlerId,
    at: Timestamp,
) -> R<u64> {
    let from: Vec<HandlerId> = from.iter().copied().filter(|h| *h != to).collect();
    let n = execute(
        c,
        "UPDATE outcomes SET responsible = ?2, updated_at = ?3
          WHERE responsible IN (SELECT value FROM json_each(?1))",
        params![json_list(&from, true), to.to_string(), at.0],
        || {
            format!(
                "reassign the outcomes of {} handler(s) to handler {to}",
                from.len()
            )
        },
    )?;
    Ok(n as u64)
}

pub(crate) fn insert_outcome_event(c: &Connection, e: &OutcomeEventRow) -> R<()> {
    execute(
        c,
        "INSERT INTO outcome_events (outcome, at, handler, agent, action, detail) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![e.outcome.to_string(), e.at.0, opt_text(e.handler), opt_text(e.agent), e.action, e.detail],
        || format!("insert a history event for outcome {}", e.outcome),
    )
    .map(drop)
}

pub(crate) fn outcome_events(c: &Connection, id: OutcomeId) -> R<Vec<OutcomeEventRow>> {
    query_rows(
        c,
        "SELECT outcome, at, handler, agent, action, detail FROM outcome_events
          WHERE outcome = ?1 ORDER BY at, id",
        [id.to_string()],
        || format!("read the history of outcome {id}"),
        outcome_event_row,
    )
}

pub(crate) fn open_process_inbox(c: &Connection, handler: HandlerId) -> R<Option<OutcomeId>> {
    // Should there ever be two, the oldest is the one to keep using.
    query_opt(
        c,
        "SELECT id FROM outcomes
          WHERE responsible = ?1 AND process_inbox = 1 AND status = 'open'
          ORDER BY created_at, id LIMIT 1",
        [handler.to_string()],
        || format!("find the open Process Inbox outcome of handler {handler}"),
        |r| col_id(r, 0, "outcome id"),
    )
}

pub(crate) fn outcomes_of(c: &Connection, handler: HandlerId, n: usize) -> R<Vec<OutcomeRow>> {
    query_rows(
        c,
        concat!(
            "SELECT ",
            outcome_cols!(),
            " FROM outcomes WHERE responsible = ?1 ORDER BY priority DESC, created_at, id LIMIT ?2"
        ),
        params![handler.to_string(), limit(n)],
        || format!("list the outcomes of handler {handler}"),
        outcome_row,
    )
}
