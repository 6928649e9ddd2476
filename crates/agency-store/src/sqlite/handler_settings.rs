//! [`HandlerSettingsTx`] on SQLite: the model upstream chosen per handler
//! (`handler_models`, migration 12), standing instructions
//! (`handler_standing`, migration 16) and how long a handler's agent stays
//! warm (`handler_keep_warm`, migration 20: one row per (handler, source),
//! `user` or `org`). A `None` deletes the row.

use agency_core::{HandlerId, Timestamp};
use rusqlite::params;

use super::SqliteTx;
use super::convert::*;
use crate::tx::HandlerSettingsTx;

impl HandlerSettingsTx for SqliteTx<'_> {
    /// Set (`Some`) or clear (`None`) the upstream of `handler`.
    fn set_handler_model(
        &mut self,
        handler: HandlerId,
        upstream: Option<&str>,
        at: Timestamp,
    ) -> R<()> {
        let c = self.conn;
        match upstream {
            Some(u) => execute(
                c,
                "INSERT INTO handler_models (handler, upstream, set_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (handler) DO UPDATE SET upstream = ?2, set_at = ?3",
                params![handler.to_string(), u, at.0],
                || format!("set the model upstream of handler {handler}"),
            ),
            None => execute(
                c,
                "DELETE FROM handler_models WHERE handler = ?1",
                params![handler.to_string()],
                || format!("clear the model upstream of handler {handler}"),
            ),
        }
        .map(drop)
    }

    fn handler_model(&mut self, handler: HandlerId) -> R<Option<String>> {
        let c = self.conn;
        query_opt(
            c,
            "SELECT upstream FROM handler_models WHERE handler = ?1",
            [handler.to_string()],
            || format!("read the model upstream of handler {handler}"),
            |r| col(r, 0, "handler model upstream"),
        )
    }

    fn handler_model_up(&mut self, handler: HandlerId) -> R<Option<(HandlerId, String)>> {
        // The walk goes up only from handlers without a model of their own,
        // so at most one handler of `up` has one: the nearest. `UNION`
        // drops a handler met again, which ends a cycle.
        query_opt(
            self.conn,
            "WITH RECURSIVE up(id) AS (
               SELECT ?1
               UNION
               SELECT h.boss FROM up
                 JOIN handlers h ON h.id = up.id
                 LEFT JOIN handler_models m ON m.handler = up.id
                WHERE h.boss IS NOT NULL AND m.handler IS NULL
             )
             SELECT m.handler, m.upstream FROM up JOIN handler_models m ON m.handler = up.id",
            [handler.to_string()],
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
        let c = self.conn;
        match text {
            Some(t) => execute(
                c,
                "INSERT INTO handler_standing (handler, text, set_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (handler) DO UPDATE SET text = ?2, set_at = ?3",
                params![h.to_string(), t, at.0],
                || format!("set the standing instructions of handler {h}"),
            ),
            None => execute(
                c,
                "DELETE FROM handler_standing WHERE handler = ?1",
                [h.to_string()],
                || format!("clear the standing instructions of handler {h}"),
            ),
        }
        .map(drop)
    }

    fn handler_standing(&mut self, h: HandlerId) -> R<Option<String>> {
        let c = self.conn;
        query_opt(
            c,
            "SELECT text FROM handler_standing WHERE handler = ?1",
            [h.to_string()],
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
        let c = self.conn;
        match ms {
            Some(ms) => execute(
                c,
                "INSERT INTO handler_keep_warm (handler, source, keep_warm_ms, updated_at)
                 VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (handler, source) DO UPDATE SET keep_warm_ms = ?3, updated_at = ?4",
                params![handler.to_string(), source, ms, at.0],
                || format!("set the {source} keep-warm time of handler {handler}"),
            ),
            None => execute(
                c,
                "DELETE FROM handler_keep_warm WHERE handler = ?1 AND source = ?2",
                params![handler.to_string(), source],
                || format!("clear the {source} keep-warm time of handler {handler}"),
            ),
        }
        .map(drop)
    }

    /// Every keep-warm time of `handler` as (source, ms), ordered by source.
    fn handler_keep_warm(&mut self, handler: HandlerId) -> R<Vec<(String, i64)>> {
        let c = self.conn;
        query_rows(
            c,
            "SELECT source, keep_warm_ms FROM handler_keep_warm WHERE handler = ?1 ORDER BY source",
            [handler.to_string()],
            || format!("read the keep-warm times of handler {handler}"),
            |r| Ok((col(r, 0, "keep-warm source")?, col(r, 1, "keep-warm ms")?)),
        )
    }
}
