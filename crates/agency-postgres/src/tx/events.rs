//! [`EventTx`] on PostgreSQL: the `events` table.
//!
//! A page walks the primary key upwards from the cursor, so reading the
//! newest events of a long log costs what the page holds, and a subtree is
//! the recursive walk of `handlers_by_boss` below its head. A kind filter
//! compares the kind or its family prefix (`mail` matches `mail.sent`)
//! with `substr`, not `LIKE`, whose `_` would match any character.
//!
//! Sequence numbers come from the identity column `seq`. Writers hold the
//! store's write lock until they commit, so numbers commit in order and
//! a snapshot holds every number up to the highest it sees. The log's end
//! is that highest number, or the highest one removed (`events_end`, kept
//! by [`EventTx::delete_events_before`]) when the newest rows are gone.

use agency_core::{HandlerId, Timestamp};
use agency_store::events::{EventFilter, EventRow, EventScope, NewEventRow};
use agency_store::tx::EventTx;
use agency_store::tx::R;
use tokio_postgres::types::ToSql;

use crate::PgTx;
use crate::convert::*;

/// Parameters of a statement built from a filter.
type Args = Vec<Box<dyn ToSql + Sync>>;

/// ` AND (…)` matching any of `kinds` (a kind or a family), its values
/// appended to `args`; empty for no kinds.
fn kind_clause(kinds: &[String], args: &mut Args) -> String {
    if kinds.is_empty() {
        return String::new();
    }
    let mut alternatives = Vec::new();
    for k in kinds {
        args.push(Box::new(k.clone()));
        let n = args.len();
        args.push(Box::new(format!("{k}.")));
        let m = args.len();
        alternatives.push(format!(
            "e.kind = ${n}::TEXT OR substr(e.kind, 1, length(${m}::TEXT)) = ${m}::TEXT"
        ));
    }
    format!(" AND ({})", alternatives.join(" OR "))
}

fn refs(args: &Args) -> Vec<&(dyn ToSql + Sync)> {
    args.iter().map(|a| &**a as _).collect()
}

impl EventTx for PgTx<'_> {
    fn append_event(&mut self, e: &NewEventRow) -> R<i64> {
        query_value(
            self.conn,
            "INSERT INTO events (at, kind, handler, agent, outcome, summary, data)
             VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING seq",
            &[
                &e.at.0,
                &e.kind,
                &opt_text(e.handler),
                &opt_text(e.agent),
                &opt_text(e.outcome),
                &e.summary,
                &e.data,
            ],
            || format!("append a {} event", e.kind),
        )
    }

    fn events_after(&mut self, f: &EventFilter) -> R<Vec<EventRow>> {
        let mut sql = String::new();
        let mut args: Args = vec![Box::new(f.after)];
        if let EventScope::Subtree(h) = f.scope {
            sql.push_str(
                "WITH RECURSIVE sub(id) AS (SELECT $2::TEXT COLLATE \"C\" UNION SELECT h.id FROM handlers h JOIN sub ON h.boss = sub.id) ",
            );
            args.push(Box::new(h.to_string()));
        }
        sql.push_str(
            "SELECT e.seq, e.at, e.kind, e.handler, e.agent, e.outcome, e.summary, e.data, o.title
             FROM events e LEFT JOIN outcomes o ON o.id = e.handler
             WHERE e.seq > $1",
        );
        match f.scope {
            EventScope::All => {}
            EventScope::Handler(h) => {
                args.push(Box::new(h.to_string()));
                sql.push_str(&format!(" AND e.handler = ${}", args.len()));
            }
            EventScope::Subtree(_) => sql.push_str(" AND e.handler IN (SELECT id FROM sub)"),
        }
        if let Some(since) = f.since {
            args.push(Box::new(since.0));
            sql.push_str(&format!(" AND e.at >= ${}", args.len()));
        }
        sql.push_str(&kind_clause(&f.kinds, &mut args));
        args.push(Box::new(limit(f.limit)));
        sql.push_str(&format!(" ORDER BY e.seq LIMIT ${}", args.len()));
        query_rows(
            self.conn,
            &sql,
            &refs(&args),
            || format!("read the event log after {}", f.after),
            |r| {
                Ok(EventRow {
                    seq: col(r, 0, "seq")?,
                    event: NewEventRow {
                        at: col_ts(r, 1, "at")?,
                        kind: col(r, 2, "kind")?,
                        handler: col_opt_id(r, 3, "handler")?,
                        agent: col_opt_id(r, 4, "agent")?,
                        outcome: col_opt_id(r, 5, "outcome")?,
                        summary: col(r, 6, "summary")?,
                        data: col(r, 7, "data")?,
                    },
                    handler_title: col(r, 8, "title")?,
                })
            },
        )
    }

    fn last_event_at(&mut self, handler: HandlerId, kinds: &[String]) -> R<Option<Timestamp>> {
        let mut args: Args = vec![Box::new(handler.to_string())];
        let sql = format!(
            "SELECT e.at FROM events e WHERE e.handler = $1{} ORDER BY e.seq DESC LIMIT 1",
            kind_clause(kinds, &mut args)
        );
        query_opt(
            self.conn,
            &sql,
            &refs(&args),
            || format!("read the latest event of handler {handler}"),
            |r| col_ts(r, 0, "at"),
        )
    }

    /// The highest number given to a row this snapshot sees, or removed
    /// before it; 0 for a log that never had a row.
    fn last_event_seq(&mut self) -> R<i64> {
        query_value(
            self.conn,
            "SELECT GREATEST(COALESCE((SELECT MAX(seq) FROM events), 0),
                             COALESCE((SELECT seq FROM events_end), 0))",
            &[],
            || "read the event log's last sequence number".to_owned(),
        )
    }

    /// Remove up to `n` of the oldest events before `before`, keeping the
    /// highest number removed in `events_end`.
    fn delete_events_before(&mut self, before: Timestamp, n: usize) -> R<usize> {
        let removed: i64 = query_value(
            self.conn,
            "WITH gone AS (
               DELETE FROM events WHERE seq IN
                 (SELECT seq FROM events WHERE at < $1 ORDER BY at, seq LIMIT $2)
               RETURNING seq),
             kept AS (
               INSERT INTO events_end AS k (id, seq)
               SELECT 1, MAX(seq) FROM gone HAVING COUNT(*) > 0
               ON CONFLICT (id) DO UPDATE SET seq = GREATEST(k.seq, EXCLUDED.seq))
             SELECT COUNT(*) FROM gone",
            &[&before.0, &limit(n)],
            || format!("remove events recorded before {}", before.0),
        )?;
        Ok(count(removed))
    }

    fn count_events_before(&mut self, before: Timestamp, n: usize) -> R<usize> {
        let c: i64 = query_value(
            self.conn,
            "SELECT COUNT(*) FROM (SELECT 1 FROM events WHERE at < $1 LIMIT $2) AS old",
            &[&before.0, &limit(n)],
            || format!("count events recorded before {}", before.0),
        )?;
        Ok(count(c))
    }
}
