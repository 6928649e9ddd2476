//! [`OutcomeTx`] on PostgreSQL: outcome rows, the outcome DAG and outcome
//! histories (whole, the newest K, or in pages keyed by the event's id),
//! child counts.
//!
//! DAG walks are recursive CTEs with `UNION` (not `UNION ALL`): a node
//! reached along two paths is kept once, so walks terminate and stay linear
//! in the size of the DAG. Walks up use the `(child, parent)` index, walks
//! down the `(parent, child)` primary key. The bounded breadth-first walk
//! of [`OutcomeTx::subtree`] runs here, one query per level, because
//! PostgreSQL's recursive CTEs promise no order within a level.

use std::collections::{HashMap, HashSet};

use agency_core::{HandlerId, OutcomeId, Timestamp};
use agency_store::model::{OutcomeEventRow, OutcomeRow};
use agency_store::tx::R;
use agency_store::tx::{OutcomeTx, SubtreeRows};
use tokio_postgres::Row;

use crate::PgTx;
use crate::convert::*;

/// A DAG edge, (parent, child).
type Edge = (OutcomeId, OutcomeId);

/// `up(node)`: $1 and all its ancestors.
macro_rules! walk_up {
    () => {
        "WITH RECURSIVE up(node) AS (
           SELECT $1::TEXT COLLATE \"C\"
           UNION
           SELECT e.parent FROM up JOIN outcome_edges e ON e.child = up.node
         ) "
    };
}

/// `sub(node)`: $1 and all its descendants.
macro_rules! walk_down {
    () => {
        "WITH RECURSIVE sub(node) AS (
           SELECT $1::TEXT COLLATE \"C\"
           UNION
           SELECT e.child FROM sub JOIN outcome_edges e ON e.parent = sub.node
         ) "
    };
}

const FINISHED: &str = "('completed', 'closed')";

fn edge_row(r: &Row) -> R<Edge> {
    Ok((
        col_id(r, 0, "outcome edge parent")?,
        col_id(r, 1, "outcome edge child")?,
    ))
}

fn seq_event(r: &Row) -> R<(i64, OutcomeEventRow)> {
    let seq: i64 = col(r, 0, "outcome event sequence number")?;
    Ok((seq, outcome_event_row_at(r)?))
}

/// `outcome_event_row` with the columns shifted by one (after the id).
fn outcome_event_row_at(r: &Row) -> R<OutcomeEventRow> {
    Ok(OutcomeEventRow {
        outcome: col_id(r, 1, "outcome event outcome")?,
        at: col_ts(r, 2, "outcome event time")?,
        handler: col_opt_id(r, 3, "outcome event handler")?,
        agent: col_opt_id(r, 4, "outcome event agent")?,
        action: col(r, 5, "outcome event action")?,
        detail: col(r, 6, "outcome event detail")?,
    })
}

impl OutcomeTx for PgTx<'_> {
    fn insert_outcome(&mut self, o: &OutcomeRow) -> R<()> {
        execute(
            self.conn,
            concat!(
                "INSERT INTO outcomes (",
                outcome_cols!(),
                ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
            ),
            &[
                &o.id.to_string(),
                &o.title,
                &o.description,
                &o.status.as_str(),
                &o.status_reason,
                &o.priority,
                &flag(o.perpetual),
                &flag(o.process_inbox),
                &o.responsible.to_string(),
                &o.created_at.0,
                &o.updated_at.0,
            ],
            || format!("insert outcome {}", o.id),
        )
        .map(drop)
    }

    fn outcome(&mut self, id: OutcomeId) -> R<Option<OutcomeRow>> {
        query_opt(
            self.conn,
            concat!("SELECT ", outcome_cols!(), " FROM outcomes WHERE id = $1"),
            &[&id.to_string()],
            || format!("read outcome {id}"),
            outcome_row,
        )
    }

    fn update_outcome(&mut self, o: &OutcomeRow) -> R<()> {
        let op = || format!("update outcome {}", o.id);
        let n = execute(
            self.conn,
            "UPDATE outcomes SET title = $2, description = $3, status = $4, status_reason = $5, priority = $6,
                 perpetual = $7, process_inbox = $8, responsible = $9, created_at = $10, updated_at = $11
             WHERE id = $1",
            &[
                &o.id.to_string(),
                &o.title,
                &o.description,
                &o.status.as_str(),
                &o.status_reason,
                &o.priority,
                &flag(o.perpetual),
                &flag(o.process_inbox),
                &o.responsible.to_string(),
                &o.created_at.0,
                &o.updated_at.0,
            ],
            op,
        )?;
        require_row(n, op)
    }

    fn insert_edge(&mut self, parent: OutcomeId, child: OutcomeId) -> R<()> {
        execute(
            self.conn,
            "INSERT INTO outcome_edges (parent, child) VALUES ($1, $2) ON CONFLICT DO NOTHING",
            &[&parent.to_string(), &child.to_string()],
            || format!("insert outcome edge {parent} -> {child}"),
        )
        .map(drop)
    }

    fn delete_edge(&mut self, parent: OutcomeId, child: OutcomeId) -> R<()> {
        execute(
            self.conn,
            "DELETE FROM outcome_edges WHERE parent = $1 AND child = $2",
            &[&parent.to_string(), &child.to_string()],
            || format!("delete outcome edge {parent} -> {child}"),
        )
        .map(drop)
    }

    fn parents(&mut self, id: OutcomeId) -> R<Vec<OutcomeId>> {
        query_rows(
            self.conn,
            "SELECT parent FROM outcome_edges WHERE child = $1 ORDER BY parent",
            &[&id.to_string()],
            || format!("list the parents of outcome {id}"),
            |r| col_id(r, 0, "outcome edge parent"),
        )
    }

    fn children(&mut self, id: OutcomeId) -> R<Vec<OutcomeId>> {
        query_rows(
            self.conn,
            "SELECT child FROM outcome_edges WHERE parent = $1 ORDER BY child",
            &[&id.to_string()],
            || format!("list the children of outcome {id}"),
            |r| col_id(r, 0, "outcome edge child"),
        )
    }

    fn is_descendant_or_self(&mut self, node: OutcomeId, ancestor: OutcomeId) -> R<bool> {
        if node == ancestor {
            return Ok(true);
        }
        // Walk up from `node`: the ancestors of one outcome are few, while the
        // descendants of `ancestor` may be the whole DAG.
        query_value(
            self.conn,
            concat!(
                walk_up!(),
                "SELECT EXISTS (SELECT 1 FROM up WHERE node = $2)"
            ),
            &[&node.to_string(), &ancestor.to_string()],
            || format!("check whether outcome {node} is below outcome {ancestor}"),
        )
    }

    fn ancestor_edges(&mut self, id: OutcomeId) -> R<Vec<Edge>> {
        // An edge lies on a path from `id` to a root exactly when its child is
        // `id` or one of its ancestors.
        query_rows(
            self.conn,
            concat!(
                walk_up!(),
                "SELECT e.parent, e.child FROM up JOIN outcome_edges e ON e.child = up.node ORDER BY e.child, e.parent"
            ),
            &[&id.to_string()],
            || format!("list the ancestor edges of outcome {id}"),
            edge_row,
        )
    }

    fn subtree(&mut self, id: OutcomeId, n: usize) -> R<SubtreeRows> {
        let op = || format!("read the subtree of outcome {id}");
        // Breadth-first discovery order, each node once, as SQLite's
        // queue-driven recursive CTE yields it: a level's nodes in the order
        // they were found, each one's children by id. One query per level;
        // the walk stops once `n` nodes are found.
        let mut order = vec![id];
        let mut seen = HashSet::from([id]);
        let mut frontier = vec![id];
        while order.len() < n && !frontier.is_empty() {
            let edges = query_rows(
                self.conn,
                "SELECT parent, child FROM outcome_edges WHERE parent = ANY($1) ORDER BY parent, child",
                &[&text_list(&frontier)],
                op,
                edge_row,
            )?;
            let mut below: HashMap<OutcomeId, Vec<OutcomeId>> = HashMap::new();
            for (parent, child) in edges {
                below.entry(parent).or_default().push(child);
            }
            let mut next = Vec::new();
            for parent in &frontier {
                for child in below.get(parent).into_iter().flatten() {
                    if seen.insert(*child) {
                        order.push(*child);
                        next.push(*child);
                    }
                }
            }
            frontier = next;
        }
        order.truncate(n);
        let mut found: HashMap<OutcomeId, OutcomeRow> = query_rows(
            self.conn,
            concat!(
                "SELECT ",
                outcome_cols!(),
                " FROM outcomes WHERE id = ANY($1)"
            ),
            &[&text_list(&order)],
            op,
            outcome_row,
        )?
        .into_iter()
        .map(|o| (o.id, o))
        .collect();
        let rows: Vec<OutcomeRow> = order.iter().filter_map(|o| found.remove(o)).collect();
        let kept: HashSet<OutcomeId> = rows.iter().map(|o| o.id).collect();
        // Only the parent is matched in SQL; the child filter is a hash
        // lookup here.
        let mut edges = query_rows(
            self.conn,
            "SELECT parent, child FROM outcome_edges WHERE parent = ANY($1) ORDER BY parent, child",
            &[&text_list(rows.iter().map(|o| o.id))],
            op,
            edge_row,
        )?;
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
        if from == to {
            return Ok(0);
        }
        let n = execute(
            self.conn,
            concat!(
                walk_down!(),
                "UPDATE outcomes SET responsible = $3, updated_at = $4
                  WHERE responsible = $2 AND id IN (SELECT node FROM sub)"
            ),
            &[&root.to_string(), &from.to_string(), &to.to_string(), &at.0],
            || {
                format!(
                    "reassign the subtree of outcome {root} from handler {from} to handler {to}"
                )
            },
        )?;
        Ok(n as u64)
    }

    fn reassign_all(&mut self, from: &[HandlerId], to: HandlerId, at: Timestamp) -> R<u64> {
        let from: Vec<HandlerId> = from.iter().copied().filter(|h| *h != to).collect();
        let n = execute(
            self.conn,
            "UPDATE outcomes SET responsible = $2, updated_at = $3
              WHERE responsible = ANY($1)",
            &[&text_list(&from), &to.to_string(), &at.0],
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
        execute(
            self.conn,
            "INSERT INTO outcome_events (outcome, at, handler, agent, action, detail) VALUES ($1, $2, $3, $4, $5, $6)",
            &[
                &e.outcome.to_string(),
                &e.at.0,
                &opt_text(e.handler),
                &opt_text(e.agent),
                &e.action,
                &e.detail,
            ],
            || format!("insert a history event for outcome {}", e.outcome),
        )
        .map(drop)
    }

    fn outcome_events(&mut self, id: OutcomeId) -> R<Vec<OutcomeEventRow>> {
        query_rows(
            self.conn,
            "SELECT outcome, at, handler, agent, action, detail FROM outcome_events
              WHERE outcome = $1 ORDER BY at, id",
            &[&id.to_string()],
            || format!("read the history of outcome {id}"),
            outcome_event_row,
        )
    }

    fn outcome_event_count(&mut self, id: OutcomeId) -> R<i64> {
        query_value(
            self.conn,
            "SELECT COUNT(*) FROM outcome_events WHERE outcome = $1",
            &[&id.to_string()],
            || format!("count the history of outcome {id}"),
        )
    }

    fn outcome_events_after(
        &mut self,
        id: OutcomeId,
        after: Option<i64>,
        n: usize,
    ) -> R<Vec<(i64, OutcomeEventRow)>> {
        query_rows(
            self.conn,
            "SELECT id, outcome, at, handler, agent, action, detail FROM outcome_events
              WHERE outcome = $1
                AND ($2::BIGINT IS NULL OR (at, id) > (SELECT at, id FROM outcome_events WHERE id = $2))
              ORDER BY at, id LIMIT $3",
            &[&id.to_string(), &after, &limit(n)],
            || format!("read a page of the history of outcome {id}"),
            seq_event,
        )
    }

    fn outcome_events_latest(&mut self, id: OutcomeId, n: usize) -> R<Vec<(i64, OutcomeEventRow)>> {
        let mut rows = query_rows(
            self.conn,
            "SELECT id, outcome, at, handler, agent, action, detail FROM outcome_events
              WHERE outcome = $1 ORDER BY at DESC, id DESC LIMIT $2",
            &[&id.to_string(), &limit(n)],
            || format!("read the latest history of outcome {id}"),
            seq_event,
        )?;
        rows.reverse();
        Ok(rows)
    }

    fn open_process_inbox(&mut self, handler: HandlerId) -> R<Option<OutcomeId>> {
        // Should there ever be two, the oldest is the one to keep using.
        query_opt(
            self.conn,
            "SELECT id FROM outcomes
              WHERE responsible = $1 AND process_inbox = 1 AND status = 'open'
              ORDER BY created_at, id LIMIT 1",
            &[&handler.to_string()],
            || format!("find the open Process Inbox outcome of handler {handler}"),
            |r| col_id(r, 0, "outcome id"),
        )
    }

    fn outcomes_of(&mut self, handler: HandlerId, n: usize) -> R<Vec<OutcomeRow>> {
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                outcome_cols!(),
                " FROM outcomes WHERE responsible = $1 ORDER BY priority DESC, created_at, id LIMIT $2"
            ),
            &[&handler.to_string(), &limit(n)],
            || format!("list the outcomes of handler {handler}"),
            outcome_row,
        )
    }

    /// (children not finished, finished children).
    fn child_counts(&mut self, id: OutcomeId) -> R<(i64, i64)> {
        let sql = format!(
            "SELECT COUNT(*) FILTER (WHERE o.status NOT IN {FINISHED}),
                    COUNT(*) FILTER (WHERE o.status IN {FINISHED})
               FROM outcome_edges e JOIN outcomes o ON o.id = e.child WHERE e.parent = $1"
        );
        let got = query_opt(
            self.conn,
            &sql,
            &[&id.to_string()],
            || format!("count the children of outcome {id}"),
            |r| Ok((col(r, 0, "count")?, col(r, 1, "count")?)),
        )?;
        Ok(got.unwrap_or((0, 0)))
    }

    /// Children not finished, oldest first; or finished ones, most recently
    /// changed first.
    fn children_by_state(&mut self, id: OutcomeId, finished: bool, n: usize) -> R<Vec<OutcomeId>> {
        let sql = if finished {
            format!(
                "SELECT o.id FROM outcome_edges e JOIN outcomes o ON o.id = e.child
                  WHERE e.parent = $1 AND o.status IN {FINISHED}
                  ORDER BY o.updated_at DESC, o.id DESC LIMIT $2"
            )
        } else {
            format!(
                "SELECT o.id FROM outcome_edges e JOIN outcomes o ON o.id = e.child
                  WHERE e.parent = $1 AND o.status NOT IN {FINISHED}
                  ORDER BY o.created_at, o.id LIMIT $2"
            )
        };
        query_rows(
            self.conn,
            &sql,
            &[&id.to_string(), &limit(n)],
            || format!("list the children of outcome {id}"),
            |r| col_id(r, 0, "outcome id"),
        )
    }

    fn outcomes_created_by(&mut self, handler: HandlerId, n: usize) -> R<usize> {
        query_value::<i64>(
            self.conn,
            "SELECT COUNT(*) FROM (SELECT 1 FROM outcome_events
               WHERE handler = $1 AND action = 'created' LIMIT $2) t",
            &[&handler.to_string(), &limit(n)],
            || format!("count the outcomes handler {handler} created"),
        )
        .map(count)
    }
}
