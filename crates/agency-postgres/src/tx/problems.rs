//! [`ProblemTx`] on PostgreSQL: the `problems` table; the partial unique
//! index `problems_open_key` keeps one open episode per key.

use agency_core::Timestamp;
use agency_store::problems::ProblemRow;
use agency_store::tx::ProblemTx;
use agency_store::tx::R;
use tokio_postgres::Row;

use crate::PgTx;
use crate::convert::*;

macro_rules! problem_cols {
    () => {
        "id, kind, key, handler, agent, summary, detail, opened_at, seen_at, closed_at"
    };
}

fn problem_row(r: &Row) -> R<ProblemRow> {
    Ok(ProblemRow {
        id: col(r, 0, "id")?,
        kind: col(r, 1, "kind")?,
        key: col(r, 2, "key")?,
        handler: col_opt_id(r, 3, "handler")?,
        agent: col_opt_id(r, 4, "agent")?,
        summary: col(r, 5, "summary")?,
        detail: col(r, 6, "detail")?,
        opened_at: col_ts(r, 7, "opened_at")?,
        seen_at: col_ts(r, 8, "seen_at")?,
        closed_at: col_opt_ts(r, 9, "closed_at")?,
    })
}

impl ProblemTx for PgTx<'_> {
    fn open_problem(&mut self, p: &ProblemRow) -> R<Option<i64>> {
        let seen = execute(
            self.conn,
            "UPDATE problems SET seen_at = $2 WHERE key = $1 AND closed_at IS NULL",
            &[&p.key, &p.seen_at.0],
            || format!("refresh problem {}", p.key),
        )?;
        if seen > 0 {
            return Ok(None);
        }
        query_value(
            self.conn,
            "INSERT INTO problems (kind, key, handler, agent, summary, detail, opened_at, seen_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
            &[
                &p.kind,
                &p.key,
                &opt_text(p.handler),
                &opt_text(p.agent),
                &p.summary,
                &p.detail,
                &p.opened_at.0,
                &p.seen_at.0,
            ],
            || format!("open problem {}", p.key),
        )
        .map(Some)
    }

    fn close_problem(&mut self, id: i64, at: Timestamp) -> R<bool> {
        let n = execute(
            self.conn,
            "UPDATE problems SET closed_at = $2 WHERE id = $1 AND closed_at IS NULL",
            &[&id, &at.0],
            || format!("close problem {id}"),
        )?;
        Ok(n > 0)
    }

    fn open_problems(&mut self, n: usize) -> R<Vec<ProblemRow>> {
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                problem_cols!(),
                " FROM problems WHERE closed_at IS NULL ORDER BY opened_at, id LIMIT $1"
            ),
            &[&limit(n)],
            || "list the open problems".to_owned(),
            problem_row,
        )
    }

    fn recent_problems(&mut self, n: usize) -> R<Vec<ProblemRow>> {
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                problem_cols!(),
                " FROM problems ORDER BY id DESC LIMIT $1"
            ),
            &[&limit(n)],
            || "list the recent problems".to_owned(),
            problem_row,
        )
    }
}
