//! [`EventTx`] on SQLite: the `events` table (migration 24).
//!
//! A page walks the primary key upwards from the cursor, so reading the
//! newest events of a long log costs what the page holds, and a subtree is
//! the recursive walk of `handlers_by_boss` below its head. A kind filter
//! compares the kind or its family prefix (`mail` matches `mail.sent`)
//! with `substr`, not `LIKE`, whose `_` would match any character.

use agency_core::{HandlerId, Timestamp};
use rusqlite::ToSql;
use rusqlite::params;

use super::SqliteTx;
use super::convert::*;
use crate::events::{EventFilter, EventRow, EventScope, NewEventRow};
use crate::tx::EventTx;

/// ` AND (…)` matching any of `kinds` (a kind or a family), its values
/// appended to `args`; empty for no kinds.
fn kind_clause(kinds: &[String], args: &mut Vec<Box<dyn ToSql>>) -> String {
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
            "e.kind = ?{n} OR substr(e.kind, 1, length(?{m})) = ?{m}"
        ));
    }
    format!(" AND ({})", alternatives.join(" OR "))
}

impl EventTx for SqliteTx<'_> {
    fn append_event(&mut self, e: &NewEventRow) -> R<i64> {
        let c = self.conn;
        execute(
            c,
            "INSERT INTO events (at, kind, handler, agent, outcome, summary, data)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                e.at.0,
                e.kind,
                opt_text(e.handler),
                opt_text(e.agent),
                opt_text(e.outcome),
                e.summary,
                e.data
            ],
            || format!("append a {} event", e.kind),
        )?;
        Ok(c.last_insert_rowid())
    }

    fn events_after(&mut self, f: &EventFilter) -> R<Vec<EventRow>> {
        let mut sql = String::new();
        let mut args: Vec<Box<dyn ToSql>> = vec![Box::new(f.after)];
        if let EventScope::Subtree(h) = f.scope {
            sql.push_str(
                "WITH RECURSIVE sub(id) AS (SELECT ?2 UNION SELECT h.id FROM handlers h JOIN sub ON h.boss = sub.id) ",
            );
            args.push(Box::new(h.to_string()));
        }
        sql.push_str(
            "SELECT e.seq, e.at, e.kind, e.handler, e.agent, e.outcome, e.summary, e.data, o.title
             FROM events e LEFT JOIN outcomes o ON o.id = e.handler
             WHERE e.seq > ?1",
        );
        match f.scope {
            EventScope::All => {}
            EventScope::Handler(h) => {
                args.push(Box::new(h.to_string()));
                sql.push_str(&format!(" AND e.handler = ?{}", args.len()));
            }
            EventScope::Subtree(_) => sql.push_str(" AND e.handler IN (SELECT id FROM sub)"),
        }
        if let Some(since) = f.since {
            args.push(Box::new(since.0));
            sql.push_str(&format!(" AND e.at >= ?{}", args.len()));
        }
        sql.push_str(&kind_clause(&f.kinds, &mut args));
        args.push(Box::new(limit(f.limit)));
        sql.push_str(&format!(" ORDER BY e.seq LIMIT ?{}", args.len()));
        let params: Vec<&dyn ToSql> = args.iter().map(|a| &**a).collect();
        query_rows(
            self.conn,
            &sql,
            params.as_slice(),
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
        let mut args: Vec<Box<dyn ToSql>> = vec![Box::new(handler.to_string())];
        let sql = format!(
            "SELECT e.at FROM events e WHERE e.handler = ?1{} ORDER BY e.seq DESC LIMIT 1",
            kind_clause(kinds, &mut args)
        );
        let params: Vec<&dyn ToSql> = args.iter().map(|a| &**a).collect();
        query_opt(
            self.conn,
            &sql,
            params.as_slice(),
            || format!("read the latest event of handler {handler}"),
            |r| col_ts(r, 0, "at"),
        )
    }

    fn last_event_seq(&mut self) -> R<i64> {
        // `sqlite_sequence` keeps the highest number given, also when the
        // newest rows were removed; the table may be empty (no row yet).
        let given: Option<i64> = query_opt(
            self.conn,
            "SELECT seq FROM sqlite_sequence WHERE name = 'events'",
            [],
            || "read the event log's last sequence number".to_owned(),
            |r| col(r, 0, "seq"),
        )?;
        Ok(given.unwrap_or(0))
    }

    fn delete_events_before(&mut self, before: Timestamp, n: usize) -> R<usize> {
        execute(
            self.conn,
            "DELETE FROM events WHERE seq IN
               (SELECT seq FROM events WHERE at < ?1 ORDER BY at LIMIT ?2)",
            params![before.0, limit(n)],
            || format!("remove events recorded before {}", before.0),
        )
    }

    fn count_events_before(&mut self, before: Timestamp, n: usize) -> R<usize> {
        let c: i64 = query_value(
            self.conn,
            "SELECT COUNT(*) FROM (SELECT 1 FROM events WHERE at < ?1 LIMIT ?2)",
            params![before.0, limit(n)],
            || format!("count events recorded before {}", before.0),
        )?;
        Ok(count(c))
    }
}
