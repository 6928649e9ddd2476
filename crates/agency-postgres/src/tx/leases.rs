//! [`LeaseTx`] on PostgreSQL: the `handler_leases` table (migration 2).
//! The clock is the server's `clock_timestamp()` (the time of the call,
//! not of the transaction's start). A claim is one
//! `INSERT … ON CONFLICT … DO UPDATE … WHERE` at the time read just before
//! it: it takes, extends or leaves the row in one statement, and a refused
//! claim changes nothing (no failed statement to abort the transaction).

use agency_core::{HandlerId, Timestamp};
use agency_store::leases::{LeaseRow, check_lease_input};
use agency_store::tx::LeaseTx;
use agency_store::tx::R;
use tokio_postgres::Row;

use crate::PgTx;
use crate::convert::*;

macro_rules! lease_cols {
    () => {
        "handler, owner, token, expires_at, claimed_at"
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
        // Every column reference on the right of SET is the old row's: an
        // unexpired lease (necessarily `owner`'s, by the WHERE) keeps its
        // token and claimed_at; an expired one gets the next token.
        let claimed = query_opt(
            self.conn,
            concat!(
                "INSERT INTO handler_leases AS l (handler, owner, token, expires_at, claimed_at)
                 VALUES ($1, $2, 1, $3, $4)
                 ON CONFLICT (handler) DO UPDATE SET
                     owner = EXCLUDED.owner,
                     token = CASE WHEN l.expires_at > $4 THEN l.token ELSE l.token + 1 END,
                     expires_at = EXCLUDED.expires_at,
                     claimed_at = CASE WHEN l.expires_at > $4 THEN l.claimed_at ELSE $4 END
                 WHERE l.expires_at <= $4 OR l.owner = EXCLUDED.owner
                 RETURNING ",
                lease_cols!()
            ),
            &[&handler.to_string(), &owner, &expires, &now.0],
            op,
            lease_row,
        )?;
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
