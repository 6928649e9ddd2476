//! [`OutcomeTx`] on SQLite: outcome rows, the outcome DAG and outcome
//! histories (whole, the newest K, or in pages keyed by the event's rowid),
//! child counts.
//!
//! DAG walks are recursive CTEs with `UNION` (not `UNION ALL`): a node
//! reached along two paths is kept once, so walks terminate and stay linear
//! in the size of the DAG. Walks up use the `(child, parent)` index, walks
//! down the `(parent, child)` primary key.

use agency_core::{HandlerId, OutcomeId, Timestamp};
use rusqlite::params;

use super::SqliteTx;
use super::convert::*;
use crate::model::*;
use crate::tx::{OutcomeTx, SubtreeRows};

/// A DAG edge, (parent, child).
type Edge = (OutcomeId, OutcomeId);

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

impl OutcomeTx for SqliteTx<'_> {
    fn insert_outcome(&mut self, o: &OutcomeRow) -> R<()> {
        let c = self.conn;
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

    fn outcome(&mut self, id: OutcomeId) -> R<Option<OutcomeRow>> {
        let c = self.conn;
        query_opt(
            c,
            concat!("SELECT ", outcome_cols!(), " FROM outcomes WHERE id = ?1"),
            [id.to_string()],
            || format!("read outcome {id}"),
            outcome_row,
        )
    }

    fn update_outcome(&mut self, o: &OutcomeRow) -> R<()> {
        let c = self.conn;
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

    fn insert_edge(&mut self, parent: OutcomeId, child: OutcomeId) -> R<()> {
        let c = self.conn;
        execute(
            c,
            "INSERT OR IGNORE INTO outcome_edges (parent, child) VALUES (?1, ?2)",
            [parent.to_string(), child.to_string()],
            || format!("insert outcome edge {parent} -> {child}"),
        )
        .map(drop)
    }

    fn delete_edge(&mut self, parent: OutcomeId, child: OutcomeId) -> R<()> {
        let c = self.conn;
        execute(
            c,
            "DELETE FROM outcome_edges WHERE parent = ?1 AND child = ?2",
            [parent.to_string(), child.to_string()],
            || format!("delete outcome edge {parent} -> {child}"),
        )
        .map(drop)
    }

    fn parents(&mut self, id: OutcomeId) -> R<Vec<OutcomeId>> {
        let c = self.conn;
        query_rows(
            c,
            "SELECT parent FROM outcome_edges WHERE child = ?1 ORDER BY parent",
            [id.to_string()],
            || format!("list the parents of outcome {id}"),
            |r| col_id(r, 0, "outcome edge parent"),
        )
    }

    fn children(&mut self, id: OutcomeId) -> R<Vec<OutcomeId>> {
        let c = self.conn;
        query_rows(
            c,
            "SELECT child FROM outcome_edges WHERE parent = ?1 ORDER BY child",
            [id.to_string()],
            || format!("list the children of outcome {id}"),
            |r| col_id(r, 0, "outcome edge child"),
        )
    }

    fn is_descendant_or_self(&mut self, node: OutcomeId, ancestor: OutcomeId) -> R<bool> {
        let c = self.conn;
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

    fn ancestor_edges(&mut self, id: OutcomeId) -> R<Vec<Edge>> {
        let c = self.conn;
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

    fn subtree(&mut self, id: OutcomeId, n: usize) -> R<SubtreeRows> {
        let c = self.conn;
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

    fn reassign_subtree(
        &mut self,
        root: OutcomeId,
        from: HandlerId,
        to: HandlerId,
        at: Timestamp,
    ) -> R<u64> {
        let c = self.conn;
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
            || {
                format!(
                    "reassign the subtree of outcome {root} from handler {from} to handler {to}"
                )
            },
        )?;
        Ok(n as u64)
    }

    fn reassign_all(&mut self, from: &[HandlerId], to: HandlerId, at: Timestamp) -> R<u64> {
        let c = self.conn;
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

    fn insert_outcome_event(&mut self, e: &OutcomeEventRow) -> R<()> {
        let c = self.conn;
        execute(
            c,
            "INSERT INTO outcome_events (outcome, at, handler, agent, action, detail) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![e.outcome.to_string(), e.at.0, opt_text(e.handler), opt_text(e.agent), e.action, e.detail],
            || format!("insert a history event for outcome {}", e.outcome),
        )
        .map(drop)
    }

    fn outcome_events(&mut self, id: OutcomeId) -> R<Vec<OutcomeEventRow>> {
        let c = self.conn;
        query_rows(
            c,
            "SELECT outcome, at, handler, agent, action, detail FROM outcome_events
              WHERE outcome = ?1 ORDER BY at, id",
            [id.to_string()],
            || format!("read the history of outcome {id}"),
            outcome_event_row,
        )
    }

    fn outcome_event_count(&mut self, id: OutcomeId) -> R<i64> {
        let c = self.conn;
        query_value(
            c,
            "SELECT COUNT(*) FROM outcome_events WHERE outcome = ?1",
            [id.to_string()],
            || format!("count the history of outcome {id}"),
        )
    }

    fn outcome_events_after(
        &mut self,
        id: OutcomeId,
        after: Option<i64>,
        n: usize,
    ) -> R<Vec<(i64, OutcomeEventRow)>> {
        let c = self.conn;
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

    fn outcome_events_latest(&mut self, id: OutcomeId, n: usize) -> R<Vec<(i64, OutcomeEventRow)>> {
        let c = self.conn;
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

    fn open_process_inbox(&mut self, handler: HandlerId) -> R<Option<OutcomeId>> {
        let c = self.conn;
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

    fn outcomes_of(&mut self, handler: HandlerId, n: usize) -> R<Vec<OutcomeRow>> {
        let c = self.conn;
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

    /// (children not finished, finished children).
    fn child_counts(&mut self, id: OutcomeId) -> R<(i64, i64)> {
        let c = self.conn;
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
    fn children_by_state(&mut self, id: OutcomeId, finished: bool, n: usize) -> R<Vec<OutcomeId>> {
        let c = self.conn;
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

    fn outcomes_created_by(&mut self, handler: HandlerId, n: usize) -> R<usize> {
        let c = self.conn;
        query_value::<i64>(
            c,
            "SELECT COUNT(*) FROM (SELECT 1 FROM outcome_events
               WHERE handler = ?1 AND action = 'created' LIMIT ?2)",
            params![handler.to_string(), limit(n)],
            || format!("count the outcomes handler {handler} created"),
        )
        .map(count)
    }
}
