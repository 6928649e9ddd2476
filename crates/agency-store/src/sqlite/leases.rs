//! [`LeaseTx`] on SQLite: the `handler_leases` table (migration 31). The
//! clock is SQLite's own `'now'` (the host's, to the millisecond). A claim
//! reads the row and then writes it: write closures are serialised, so
//! nothing changes in between.

use agency_core::{HandlerId, Timestamp};
use rusqlite::params;

use super::SqliteTx;
use super::convert::*;
use crate::error::StoreError;
use crate::leases::{LeaseOwnerRow, LeaseRow, check_lease_input};
use crate::tx::LeaseTx;

const COLUMNS: &str = "handler, owner, token, expires_at, claimed_at";

fn lease_row(r: &rusqlite::Row<'_>) -> R<LeaseRow> {
    Ok(LeaseRow {
        handler: col_id(r, 0, "lease handler")?,
        owner: col(r, 1, "lease owner")?,
        token: col(r, 2, "lease token")?,
        expires_at: col_ts(r, 3, "lease expires_at")?,
        claimed_at: col_ts(r, 4, "lease claimed_at")?,
    })
}

impl LeaseTx for SqliteTx<'_> {
    fn db_now(&mut self) -> R<Timestamp> {
        query_value(
            self.conn,
            "SELECT CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)",
            [],
            || "read the database clock".to_owned(),
        )
        .map(Timestamp)
    }

    fn claim_lease(&mut self, handler: HandlerId, owner: &str, ttl_ms: i64) -> R<Option<LeaseRow>> {
        let op = || format!("claim the lease of handler {handler} for {owner}");
        check_lease_input(owner, Some(ttl_ms), op)?;
        let now = self.db_now()?;
        let expires = Timestamp(now.0.saturating_add(ttl_ms));
        let row = match self.lease(handler)? {
            None => {
                execute(
                    self.conn,
                    "INSERT INTO handler_leases (handler, owner, token, expires_at, claimed_at)
                     VALUES (?1, ?2, 1, ?3, ?4)",
                    params![handler.to_string(), owner, expires.0, now.0],
                    op,
                )?;
                LeaseRow {
                    handler,
                    owner: owner.to_owned(),
                    token: 1,
                    expires_at: expires,
                    claimed_at: now,
                }
            }
            Some(held) if held.expires_at > now => {
                if held.owner != owner {
                    return Ok(None);
                }
                let changed = execute(
                    self.conn,
                    "UPDATE handler_leases SET expires_at = ?2 WHERE handler = ?1",
                    params![handler.to_string(), expires.0],
                    op,
                )?;
                require_row(changed, op)?;
                LeaseRow {
                    expires_at: expires,
                    ..held
                }
            }
            Some(lapsed) => {
                let token = lapsed.token.checked_add(1).ok_or_else(|| {
                    StoreError::backend(op(), format!("token {} is the last one", lapsed.token))
                })?;
                let changed = execute(
                    self.conn,
                    "UPDATE handler_leases SET owner = ?2, token = ?3, expires_at = ?4, claimed_at = ?5
                     WHERE handler = ?1",
                    params![handler.to_string(), owner, token, expires.0, now.0],
                    op,
                )?;
                require_row(changed, op)?;
                LeaseRow {
                    handler,
                    owner: owner.to_owned(),
                    token,
                    expires_at: expires,
                    claimed_at: now,
                }
            }
        };
        Ok(Some(row))
    }

    fn renew_leases(&mut self, owner: &str, ttl_ms: i64) -> R<Vec<LeaseRow>> {
        let op = || format!("renew the leases of {owner}");
        check_lease_input(owner, Some(ttl_ms), op)?;
        let now = self.db_now()?;
        let mut renewed = query_rows(
            self.conn,
            &format!(
                "UPDATE handler_leases SET expires_at = ?2 WHERE owner = ?1 AND expires_at > ?3
                 RETURNING {COLUMNS}"
            ),
            params![owner, now.0.saturating_add(ttl_ms), now.0],
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
            "UPDATE handler_leases SET expires_at = ?4
             WHERE handler = ?1 AND owner = ?2 AND token = ?3 AND expires_at > ?4",
            params![handler.to_string(), owner, token, now.0],
            op,
        )?;
        Ok(n > 0)
    }

    fn lease(&mut self, handler: HandlerId) -> R<Option<LeaseRow>> {
        query_opt(
            self.conn,
            &format!("SELECT {COLUMNS} FROM handler_leases WHERE handler = ?1"),
            [handler.to_string()],
            || format!("read the lease of handler {handler}"),
            lease_row,
        )
    }

    fn leases_of(&mut self, owner: &str) -> R<Vec<LeaseRow>> {
        query_rows(
            self.conn,
            &format!("SELECT {COLUMNS} FROM handler_leases WHERE owner = ?1 ORDER BY handler"),
            [owner],
            || format!("list the leases of {owner}"),
            lease_row,
        )
    }

    fn leases_for(&mut self, handlers: &[HandlerId]) -> R<Vec<LeaseRow>> {
        query_rows(
            self.conn,
            &format!(
                "SELECT {COLUMNS} FROM handler_leases
                 WHERE handler IN (SELECT value FROM json_each(?1)) ORDER BY handler"
            ),
            [json_list(handlers, true)],
            || format!("read the leases of {} handler(s)", handlers.len()),
            lease_row,
        )
    }

    fn lease_owners(&mut self) -> R<Vec<LeaseOwnerRow>> {
        let now = self.db_now()?;
        query_rows(
            self.conn,
            "SELECT owner, COUNT(*), MAX(expires_at) FROM handler_leases
             WHERE expires_at > ?1 GROUP BY owner ORDER BY owner",
            [now.0],
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
            &format!(
                "SELECT {COLUMNS} FROM handler_leases WHERE expires_at <= ?1
                 ORDER BY expires_at, handler LIMIT ?2"
            ),
            params![now.0, limit(n)],
            || "list the expired leases".to_owned(),
            lease_row,
        )
    }

    fn lease_holds(&mut self, handler: HandlerId, token: i64) -> R<bool> {
        query_value(
            self.conn,
            "SELECT EXISTS (SELECT 1 FROM handler_leases WHERE handler = ?1 AND token = ?2)",
            params![handler.to_string(), token],
            || format!("check the lease of handler {handler} (token {token})"),
        )
    }
}
