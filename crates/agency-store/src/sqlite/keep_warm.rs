//! How long a handler's agent stays warm (`handler_keep_warm`, migration
//! 20): one row per (handler, source), `user` or `org`.

use agency_core::{HandlerId, Timestamp};
use rusqlite::{Connection, params};

use super::convert::*;

/// Set (`Some`) or clear (`None`) the keep-warm time `source` gives
/// `handler`.
pub(crate) fn set(
    c: &Connection,
    handler: HandlerId,
    source: &str,
    ms: Option<i64>,
    at: Timestamp,
) -> R<()> {
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
pub(crate) fn get(c: &Connection, handler: HandlerId) -> R<Vec<(String, i64)>> {
    query_rows(
        c,
        "SELECT source, keep_warm_ms FROM handler_keep_warm WHERE handler = ?1 ORDER BY source",
        [handler.to_string()],
        || format!("read the keep-warm times of handler {handler}"),
        |r| Ok((col(r, 0, "keep-warm source")?, col(r, 1, "keep-warm ms")?)),
    )
}
