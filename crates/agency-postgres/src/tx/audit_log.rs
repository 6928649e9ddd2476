//! [`AuditLogTx`] on PostgreSQL: handlers' audit logs (`handler_log`),
//! whole, as the newest K entries, and in pages keyed by the entry's id.

use agency_core::{AgentId, HandlerId};
use agency_store::model::LogEntryRow;
use agency_store::tx::AuditLogTx;
use agency_store::tx::R;
use tokio_postgres::Row;

use crate::PgTx;
use crate::convert::*;

fn seq_log(r: &Row) -> R<(i64, LogEntryRow)> {
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

impl AuditLogTx for PgTx<'_> {
    fn insert_log_entry(&mut self, e: &LogEntryRow) -> R<()> {
        execute(
            self.conn,
            "INSERT INTO handler_log (handler, at, agent, summary) VALUES ($1, $2, $3, $4)",
            &[
                &e.handler.to_string(),
                &e.at.0,
                &opt_text(e.agent),
                &e.summary,
            ],
            || format!("insert an audit log entry for handler {}", e.handler),
        )
        .map(drop)
    }

    fn log_entries(&mut self, handler: HandlerId) -> R<Vec<LogEntryRow>> {
        query_rows(
            self.conn,
            "SELECT handler, at, agent, summary FROM handler_log WHERE handler = $1 ORDER BY at, id",
            &[&handler.to_string()],
            || format!("read the audit log of handler {handler}"),
            log_entry_row,
        )
    }

    fn log_entry_count(&mut self, h: HandlerId) -> R<i64> {
        query_value(
            self.conn,
            "SELECT COUNT(*) FROM handler_log WHERE handler = $1",
            &[&h.to_string()],
            || format!("count the audit log of handler {h}"),
        )
    }

    fn log_entries_after(
        &mut self,
        h: HandlerId,
        after: Option<i64>,
        n: usize,
    ) -> R<Vec<(i64, LogEntryRow)>> {
        query_rows(
            self.conn,
            "SELECT id, handler, at, agent, summary FROM handler_log
              WHERE handler = $1
                AND ($2::BIGINT IS NULL OR (at, id) > (SELECT at, id FROM handler_log WHERE id = $2))
              ORDER BY at, id LIMIT $3",
            &[&h.to_string(), &after, &limit(n)],
            || format!("read a page of the audit log of handler {h}"),
            seq_log,
        )
    }

    fn log_entries_latest(&mut self, h: HandlerId, n: usize) -> R<Vec<(i64, LogEntryRow)>> {
        let mut rows = query_rows(
            self.conn,
            "SELECT id, handler, at, agent, summary FROM handler_log
              WHERE handler = $1 ORDER BY at DESC, id DESC LIMIT $2",
            &[&h.to_string(), &limit(n)],
            || format!("read the latest audit log entries of handler {h}"),
            seq_log,
        )?;
        rows.reverse();
        Ok(rows)
    }

    /// Up to `n` of a handler's audit log entries written by `agent` whose
    /// summary starts with `prefix`, oldest first. The handler's index bounds
    /// the scan to its own log.
    fn log_entries_of_agent(
        &mut self,
        h: HandlerId,
        agent: AgentId,
        prefix: &str,
        n: usize,
    ) -> R<Vec<LogEntryRow>> {
        query_rows(
            self.conn,
            "SELECT handler, at, agent, summary FROM handler_log
              WHERE handler = $1 AND agent = $2 AND substr(summary, 1, length($3::TEXT)) = $3
              ORDER BY at, id LIMIT $4",
            &[&h.to_string(), &agent.to_string(), &prefix, &limit(n)],
            || format!("read the audit log entries of agent {agent} of handler {h}"),
            log_entry_row,
        )
    }
}
