//! [`HandlerSettingsTx`] on PostgreSQL: the model upstream chosen per
//! handler (`handler_models`), standing instructions (`handler_standing`)
//! and how long a handler's agent stays warm (`handler_keep_warm`: one row
//! per (handler, source), `user` or `org`). A `None` deletes the row.

use agency_core::{HandlerId, Timestamp};
use agency_store::tx::HandlerSettingsTx;
use agency_store::tx::R;

use crate::PgTx;
use crate::convert::*;

impl HandlerSettingsTx for PgTx<'_> {
    /// Set (`Some`) or clear (`None`) the upstream of `handler`.
    fn set_handler_model(
        &mut self,
        handler: HandlerId,
        upstream: Option<&str>,
        at: Timestamp,
    ) -> R<()> {
        match upstream {
            Some(u) => execute(
                self.conn,
                "INSERT INTO handler_models (handler, upstream, set_at) VALUES ($1, $2, $3)
                 ON CONFLICT (handler) DO UPDATE SET upstream = $2, set_at = $3",
                &[&handler.to_string(), &u, &at.0],
                || format!("set the model upstream of handler {handler}"),
            ),
            None => execute(
                self.conn,
                "DELETE FROM handler_models WHERE handler = $1",
                &[&handler.to_string()],
                || format!("clear the model upstream of handler {handler}"),
            ),
        }
        .map(drop)
    }

    fn handler_model(&mut self, handler: HandlerId) -> R<Option<String>> {
        query_opt(
            self.conn,
            "SELECT upstream FROM handler_models WHERE handler = $1",
            &[&handler.to_string()],
            || format!("read the model upstream of handler {handler}"),
            |r| col(r, 0, "handler model upstream"),
        )
    }

    fn handler_model_up(&mut self, handler: HandlerId) -> R<Option<(HandlerId, String)>> {
        // See the SQLite store: the walk stops at the first handler with a
        // model; `UNION` ends a cycle.
        query_opt(
            self.conn,
            "WITH RECURSIVE up(id) AS (
               SELECT $1::text COLLATE \"C\"
               UNION
               SELECT h.boss FROM up
                 JOIN handlers h ON h.id = up.id
                 LEFT JOIN handler_models m ON m.handler = up.id
                WHERE h.boss IS NOT NULL AND m.handler IS NULL
             )
             SELECT m.handler, m.upstream FROM up JOIN handler_models m ON m.handler = up.id",
            &[&handler.to_string()],
            || format!("read the model upstream handler {handler} inherits"),
            |r| {
                Ok((
                    col_id(r, 0, "handler model holder")?,
                    col(r, 1, "handler model upstream")?,
                ))
            },
        )
    }

    /// Set (`Some`) or clear (`None`) a handler's standing instructions.
    fn set_handler_standing(&mut self, h: HandlerId, text: Option<&str>, at: Timestamp) -> R<()> {
        match text {
            Some(t) => execute(
                self.conn,
                "INSERT INTO handler_standing (handler, text, set_at) VALUES ($1, $2, $3)
                 ON CONFLICT (handler) DO UPDATE SET text = $2, set_at = $3",
                &[&h.to_string(), &t, &at.0],
                || format!("set the standing instructions of handler {h}"),
            ),
            None => execute(
                self.conn,
                "DELETE FROM handler_standing WHERE handler = $1",
                &[&h.to_string()],
                || format!("clear the standing instructions of handler {h}"),
            ),
        }
        .map(drop)
    }

    fn handler_standing(&mut self, h: HandlerId) -> R<Option<String>> {
        query_opt(
            self.conn,
            "SELECT text FROM handler_standing WHERE handler = $1",
            &[&h.to_string()],
            || format!("read the standing instructions of handler {h}"),
            |r| col(r, 0, "standing instructions"),
        )
    }

    /// Set (`Some`) or clear (`None`) the keep-warm time `source` gives
    /// `handler`.
    fn set_handler_keep_warm(
        &mut self,
        handler: HandlerId,
        source: &str,
        ms: Option<i64>,
        at: Timestamp,
    ) -> R<()> {
        match ms {
            Some(ms) => execute(
                self.conn,
                "INSERT INTO handler_keep_warm (handler, source, keep_warm_ms, updated_at)
                 VALUES ($1, $2, $3, $4)
                 ON CONFLICT (handler, source) DO UPDATE SET keep_warm_ms = $3, updated_at = $4",
                &[&handler.to_string(), &source, &ms, &at.0],
                || format!("set the {source} keep-warm time of handler {handler}"),
            ),
            None => execute(
                self.conn,
                "DELETE FROM handler_keep_warm WHERE handler = $1 AND source = $2",
                &[&handler.to_string(), &source],
                || format!("clear the {source} keep-warm time of handler {handler}"),
            ),
        }
        .map(drop)
    }

    /// Every keep-warm time of `handler` as (source, ms), ordered by source.
    fn handler_keep_warm(&mut self, handler: HandlerId) -> R<Vec<(String, i64)>> {
        query_rows(
            self.conn,
            "SELECT source, keep_warm_ms FROM handler_keep_warm WHERE handler = $1 ORDER BY source",
            &[&handler.to_string()],
            || format!("read the keep-warm times of handler {handler}"),
            |r| Ok((col(r, 0, "keep-warm source")?, col(r, 1, "keep-warm ms")?)),
        )
    }
}
