//! [`HandlerTx`] on PostgreSQL: handler rows, the boss tree, "who has work"
//! (served by the partial index `outcomes_open_work`) and the bounded
//! size of an active subtree.

use agency_core::HandlerId;
use agency_store::model::HandlerRow;
use agency_store::tx::HandlerTx;
use agency_store::tx::R;

use crate::PgTx;
use crate::convert::*;

/// Active handlers with open, non-perpetual work after a cursor, in id
/// order. Driven from the partial index of open work (in `responsible`
/// order), so the cost follows the open outcomes, not the handlers.
const HANDLERS_WITH_WORK: &str = "
SELECT DISTINCT o.responsible FROM outcomes o
  JOIN handlers h ON h.id = o.responsible
 WHERE o.status = 'open' AND o.perpetual = 0 AND o.responsible > $1 AND h.status = 'active'
   AND NOT EXISTS (SELECT 1 FROM pipeline_runs p WHERE p.id = h.id)
 ORDER BY o.responsible LIMIT $2";

/// One handler, same rule as [`HANDLERS_WITH_WORK`].
const HAS_WORK: &str = "
SELECT EXISTS (
  SELECT 1 FROM handlers h
   WHERE h.id = $1 AND h.status = 'active'
     AND EXISTS (SELECT 1 FROM outcomes o WHERE o.responsible = h.id AND o.status = 'open' AND o.perpetual = 0)
     AND NOT EXISTS (SELECT 1 FROM pipeline_runs p WHERE p.id = h.id))";

impl HandlerTx for PgTx<'_> {
    fn insert_handler(&mut self, h: &HandlerRow) -> R<()> {
        execute(
            self.conn,
            concat!(
                "INSERT INTO handlers (",
                handler_cols!(),
                ") VALUES ($1, $2, $3, $4, $5, $6, $7)"
            ),
            &[
                &h.id.to_string(),
                &opt_text(h.boss),
                &h.status.as_str(),
                &h.state_doc.to_string(),
                &h.audit_log.to_string(),
                &h.created_at.0,
                &h.updated_at.0,
            ],
            || format!("insert handler {}", h.id),
        )
        .map(drop)
    }

    fn handler(&mut self, id: HandlerId) -> R<Option<HandlerRow>> {
        query_opt(
            self.conn,
            concat!("SELECT ", handler_cols!(), " FROM handlers WHERE id = $1"),
            &[&id.to_string()],
            || format!("read handler {id}"),
            handler_row,
        )
    }

    fn handler_chain(&mut self, id: HandlerId) -> R<Vec<HandlerRow>> {
        // `UNION` drops a handler met again: a cycle ends the walk.
        let rows = query_rows(
            self.conn,
            concat!(
                "WITH RECURSIVE up(id) AS (
                   SELECT $1::text COLLATE \"C\"
                   UNION
                   SELECT h.boss FROM up JOIN handlers h ON h.id = up.id WHERE h.boss IS NOT NULL
                 )
                 SELECT ",
                handler_cols!(),
                " FROM handlers WHERE id IN (SELECT id FROM up)"
            ),
            &[&id.to_string()],
            || format!("read the chain of bosses of handler {id}"),
            handler_row,
        )?;
        Ok(agency_store::tx::chain_order(id, rows))
    }

    fn update_handler(&mut self, h: &HandlerRow) -> R<()> {
        let op = || format!("update handler {}", h.id);
        let n = execute(
            self.conn,
            "UPDATE handlers SET boss = $2, status = $3, state_doc = $4, audit_log = $5, updated_at = $6 WHERE id = $1",
            &[
                &h.id.to_string(),
                &opt_text(h.boss),
                &h.status.as_str(),
                &h.state_doc.to_string(),
                &h.audit_log.to_string(),
                &h.updated_at.0,
            ],
            op,
        )?;
        require_row(n, op)
    }

    fn root_handler(&mut self) -> R<Option<HandlerRow>> {
        // There is one; should there ever be more, the oldest is the root.
        query_opt(
            self.conn,
            concat!(
                "SELECT ",
                handler_cols!(),
                " FROM handlers WHERE boss IS NULL ORDER BY created_at, id LIMIT 1"
            ),
            &[],
            || "read the root handler".to_owned(),
            handler_row,
        )
    }

    fn handler_subtree(&mut self, id: HandlerId) -> R<Vec<HandlerRow>> {
        // UNION keeps the walk finite even if a corrupt boss column made a
        // cycle. Order: `id` itself first, then the others by id.
        query_rows(
            self.conn,
            concat!(
                "WITH RECURSIVE tree(node) AS (
                   SELECT $1::TEXT COLLATE \"C\"
                   UNION
                   SELECT h.id FROM tree JOIN handlers h ON h.boss = tree.node
                 )
                 SELECT ",
                handler_cols!(),
                " FROM tree JOIN handlers ON handlers.id = tree.node ORDER BY handlers.id <> $1, handlers.id"
            ),
            &[&id.to_string()],
            || format!("read the handler subtree of handler {id}"),
            handler_row,
        )
    }

    fn underlings(&mut self, id: HandlerId) -> R<Vec<HandlerRow>> {
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                handler_cols!(),
                " FROM handlers WHERE boss = $1 ORDER BY id"
            ),
            &[&id.to_string()],
            || format!("list the underlings of handler {id}"),
            handler_row,
        )
    }

    fn handlers(&mut self, after: Option<HandlerId>, n: usize) -> R<Vec<HandlerRow>> {
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                handler_cols!(),
                " FROM handlers WHERE id > $1 ORDER BY id LIMIT $2"
            ),
            // Every hyphenated UUID sorts after the empty string.
            &[&opt_text(after).unwrap_or_default(), &limit(n)],
            || "list handlers".to_owned(),
            handler_row,
        )
    }

    fn handlers_with_work(&mut self, after: Option<HandlerId>, n: usize) -> R<Vec<HandlerId>> {
        query_rows(
            self.conn,
            HANDLERS_WITH_WORK,
            &[&opt_text(after).unwrap_or_default(), &limit(n)],
            || "list handlers with work".to_owned(),
            |r| col_id(r, 0, "handler id"),
        )
    }

    fn has_work(&mut self, id: HandlerId) -> R<bool> {
        query_value(self.conn, HAS_WORK, &[&id.to_string()], || {
            format!("check whether handler {id} has work")
        })
    }

    fn active_subtree_size(&mut self, id: HandlerId, n: usize) -> R<usize> {
        // Only active children are followed: a deactivated handler's subtree
        // is deactivated with it, so nothing active hides below one. UNION
        // keeps a corrupt cycle finite; the outer LIMIT stops the walk at
        // the quota (a recursive query is evaluated only as far as it is
        // read).
        query_value::<i64>(
            self.conn,
            "WITH RECURSIVE tree(node) AS (
               SELECT id FROM handlers WHERE id = $1 AND status = 'active'
               UNION
               SELECT h.id FROM tree JOIN handlers h ON h.boss = tree.node AND h.status = 'active'
             )
             SELECT COUNT(*) FROM (SELECT node FROM tree LIMIT $2) t",
            &[&id.to_string(), &limit(n)],
            || format!("count the active handlers in the subtree of handler {id}"),
        )
        .map(count)
    }
}
