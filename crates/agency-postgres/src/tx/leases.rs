//! [`LeaseTx`] on PostgreSQL: the `handler_leases` table (migration 2).
//! The clock is the server's `clock_timestamp()` (the time of the call,
//! not of the transaction's start). A claim updates the row when it is
//! free or the claimant's, locked `FOR UPDATE SKIP LOCKED` (a row another
//! transaction is claiming is passed over, not waited for), else inserts
//! the first row `ON CONFLICT DO NOTHING`: a refused claim changes nothing
//! and never fails a statement (which would abort the transaction). Today
//! writers are serialised by the store's lock, so no row is ever skipped;
//! the claim stays correct without that lock.

use agency_core::{HandlerId, Timestamp};
use agency_store::leases::{LeaseOwnerRow, LeaseRow, check_lease_input};
use agency_store::tx::LeaseTx;
use agency_store::tx::R;
use tokio_postgres::Row;

use crate::PgTx;
use crate::convert::*;

macro_rules! lease_cols {
    () => {
        "handler, owner, token, expires_at, claimed_at"
    };
    (l) => {
        "l.handler, l.owner, l.token, l.expires_at, l.claimed_at"
    };
}

fn lease_row(r: &Row) -> R<LeaseRow> {
    Ok(LeaseRow {
        handler: col_id(r, 0, "lease handler")?,
        owner: col(r, 1, "lease owner")?,
        token: col(r, 2, "lease token")?,
        expires_at: col_ts(r, 3, "lease expires_at")?,
        claimed_at: col_ts(r, 4, "lease claimed_at")?,
    })
}

impl LeaseTx for PgTx<'_> {
    fn db_now(&mut self) -> R<Timestamp> {
        query_value(
            self.conn,
            "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint",
            &[],
            || "read the database clock".to_owned(),
        )
        .map(Timestamp)
    }

    fn claim_lease(&mut self, handler: HandlerId, owner: &str, ttl_ms: i64) -> R<Option<LeaseRow>> {
        let op = || format!("claim the lease of handler {handler} for {owner}");
        check_lease_input(owner, Some(ttl_ms), op)?;
        let now = self.db_now()?;
        let expires = now.0.saturating_add(ttl_ms);
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 4] =
            [&handler.to_string(), &owner, &expires, &now.0];
        // Take the row if it is free (expired) or ours, locking it with
        // SKIP LOCKED: a row another transaction is claiming is passed
        // over, not waited for (it is not free). Every column reference
        // on the right of SET is the old row's: an unexpired lease
        // (necessarily `owner`'s) keeps its token and claimed_at; an
        // expired one gets the next token.
        let mut claimed = query_opt(
            self.conn,
            concat!(
                "UPDATE handler_leases AS l SET
                     owner = $2,
                     token = CASE WHEN l.expires_at > $4 THEN l.token ELSE l.token + 1 END,
                     expires_at = $3,
                     claimed_at = CASE WHEN l.expires_at > $4 THEN l.claimed_at ELSE $4 END
                 FROM (SELECT handler FROM handler_leases
                       WHERE handler = $1 AND (expires_at <= $4 OR owner = $2)
                       FOR UPDATE SKIP LOCKED) AS free
                 WHERE l.handler = free.handler
                 RETURNING ",
                lease_cols!(l)
            ),
            &params,
            op,
            lease_row,
        )?;
        if claimed.is_none() {
            // No row yet, or one held by another owner (or being claimed):
            // only a first claim inserts; a conflict leaves it alone.
            claimed = query_opt(
                self.conn,
                concat!(
                    "INSERT INTO handler_leases (handler, owner, token, expires_at, claimed_at)
                     VALUES ($1, $2, 1, $3, $4)
                     ON CONFLICT (handler) DO NOTHING
                     RETURNING ",
                    lease_cols!()
                ),
                &params,
                op,
                lease_row,
            )?;
        }
        // A new token must outlive a crash of the server even when the
        // claim rides in a lazy transaction (the spawn's): a token lost
        // after its owner acted on it could be handed out again.
        if claimed.as_ref().is_some_and(|l| l.claimed_at == now) {
            self.conn
                .batch("SET LOCAL synchronous_commit = on")
                .ctx(op)?;
        }
        Ok(claimed)
    }

    fn renew_leases(&mut self, owner: &str, ttl_ms: i64) -> R<Vec<LeaseRow>> {
        let op = || format!("renew the leases of {owner}");
        check_lease_input(owner, Some(ttl_ms), op)?;
        let now = self.db_now()?;
        let mut renewed = query_rows(
            self.conn,
            concat!(
                "UPDATE handler_leases SET expires_at = $2 WHERE owner = $1 AND expires_at > $3
                 RETURNING ",
                lease_cols!()
            ),
            &[&owner, &now.0.saturating_add(ttl_ms), &now.0],
            op,
            lease_row,
        )?;
        renewed.sort_by_key(|l| l.handler.to_string());
        Ok(renewed)
    }

    fn release_lease(&mut self, handler: HandlerId, owner: &str, token: i64) -> R<bool> {
        let op = || format!("release the lease of handler {handler} held by {owner}");
        check_lease_input(owner, None, op)?;
        let now = self.db_now()?;
        let n = execute(
            self.conn,
            "UPDATE handler_leases SET expires_at = $4
             WHERE handler = $1 AND owner = $2 AND token = $3 AND expires_at > $4",
            &[&handler.to_string(), &owner, &token, &now.0],
            op,
        )?;
        Ok(n > 0)
    }

    fn lease(&mut self, handler: HandlerId) -> R<Option<LeaseRow>> {
        query_opt(
            self.conn,
            concat!(
                "SELECT ",
                lease_cols!(),
                " FROM handler_leases WHERE handler = $1"
            ),
            &[&handler.to_string()],
            || format!("read the lease of handler {handler}"),
            lease_row,
        )
    }

    fn leases_of(&mut self, owner: &str) -> R<Vec<LeaseRow>> {
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                lease_cols!(),
                " FROM handler_leases WHERE owner = $1 ORDER BY handler"
            ),
            &[&owner],
            || format!("list the leases of {owner}"),
            lease_row,
        )
    }

    fn leases_for(&mut self, handlers: &[HandlerId]) -> R<Vec<LeaseRow>> {
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                lease_cols!(),
                " FROM handler_leases WHERE handler = ANY($1) ORDER BY handler"
            ),
            &[&text_list(handlers)],
            || format!("read the leases of {} handler(s)", handlers.len()),
            lease_row,
        )
    }

    fn lease_owners(&mut self) -> R<Vec<LeaseOwnerRow>> {
        let now = self.db_now()?;
        query_rows(
            self.conn,
            "SELECT owner, COUNT(*), MAX(expires_at) FROM handler_leases
             WHERE expires_at > $1 GROUP BY owner ORDER BY owner",
            &[&now.0],
            || "list the owners of leases".to_owned(),
            |r| {
                Ok(LeaseOwnerRow {
                    owner: col(r, 0, "lease owner")?,
                    handlers: col(r, 1, "lease count")?,
                    expires_at: col_ts(r, 2, "lease expires_at")?,
                })
            },
        )
    }

    fn expired_leases(&mut self, n: usize) -> R<Vec<LeaseRow>> {
        let now = self.db_now()?;
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                lease_cols!(),
                " FROM handler_leases WHERE expires_at <= $1 ORDER BY expires_at, handler LIMIT $2"
            ),
            &[&now.0, &limit(n)],
            || "list the expired leases".to_owned(),
            lease_row,
        )
    }

    fn lease_holds(&mut self, handler: HandlerId, token: i64) -> R<bool> {
        query_value(
            self.conn,
            "SELECT EXISTS (SELECT 1 FROM handler_leases WHERE handler = $1 AND token = $2)",
            &[&handler.to_string(), &token],
            || format!("check the lease of handler {handler} (token {token})"),
        )
    }
}
