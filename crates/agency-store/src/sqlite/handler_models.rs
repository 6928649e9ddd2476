//! The model upstream chosen per handler (`handler_models`, migration 12).

use agency_core::{HandlerId, Timestamp};
use rusqlite::{Connection, params};

use super::convert::*;

/// Set (`Some`) or clear (`None`) the upstream of `handler`.
pub(crate) fn set_handler_model(
    c: &Connection,
    handler: HandlerId,
    upstream: Option<&str>,
    at: Timestamp,
) -> R<()> {
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

pub(crate) fn handler_model(c: &Connection, handler: HandlerId) -> R<Option<String>> {
    query_opt(
        c,
        "SELECT upstream FROM handler_models WHERE handler = ?1",
        [handler.to_string()],
        || format!("read the model upstream of handler {handler}"),
        |r| col(r, 0, "handler model upstream"),
    )
}
