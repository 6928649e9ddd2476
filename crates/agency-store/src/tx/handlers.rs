//! [`HandlerTx`]: handlers: rows, the boss tree, and who has work.

use std::collections::HashMap;

use agency_core::HandlerId;

use super::R;
use crate::model::HandlerRow;

/// The rows of `first`'s chain of bosses, as a recursive query returns them
/// (in no order), put in chain order: `first`, its boss, and so on, until
/// a boss is missing or comes again.
pub fn chain_order(first: HandlerId, rows: Vec<HandlerRow>) -> Vec<HandlerRow> {
    let mut by_id: HashMap<HandlerId, HandlerRow> = rows.into_iter().map(|r| (r.id, r)).collect();
    let mut out = Vec::with_capacity(by_id.len());
    let mut next = Some(first);
    // A row is taken out of the map when used: a cycle finds it gone.
    while let Some(row) = next.and_then(|id| by_id.remove(&id)) {
        next = row.boss;
        out.push(row);
    }
    out
}

/// Handlers: rows, the boss tree, and who has work.
pub trait HandlerTx {
    fn insert_handler(&mut self, h: &HandlerRow) -> R<()>;
    fn handler(&mut self, id: HandlerId) -> R<Option<HandlerRow>>;
    /// `id` and its bosses up to the root, nearest first, in one statement
    /// (where [`HandlerTx::handler`] takes one per level: budgets walk this
    /// chain for every charged call). Ends early where a boss comes again
    /// (a cycle in corrupt data) or is missing: the last row's `boss` then
    /// names it. Empty when `id` is not a handler.
    fn handler_chain(&mut self, id: HandlerId) -> R<Vec<HandlerRow>>;
    /// Overwrite boss, status, state_doc, audit_log and updated_at.
    fn update_handler(&mut self, h: &HandlerRow) -> R<()>;
    /// The handler whose boss is the user.
    fn root_handler(&mut self) -> R<Option<HandlerRow>>;
    /// `id` and every handler below it in the boss tree (any status).
    fn handler_subtree(&mut self, id: HandlerId) -> R<Vec<HandlerRow>>;
    /// Direct underlings (any status), ordered by id.
    fn underlings(&mut self, id: HandlerId) -> R<Vec<HandlerRow>>;
    /// All handlers, ordered by id, at most `limit`, after `after`.
    fn handlers(&mut self, after: Option<HandlerId>, limit: usize) -> R<Vec<HandlerRow>>;
    /// Active handlers responsible for at least one open, non-perpetual
    /// outcome, except those running a pipeline (the daemon's engine drives
    /// them; no agent is spawned for one), ordered by id, after `after`, at most `limit`. Indexed: it
    /// must not scan every outcome.
    fn handlers_with_work(&mut self, after: Option<HandlerId>, limit: usize) -> R<Vec<HandlerId>>;
    /// Whether one handler has work (same rule, one handler).
    fn has_work(&mut self, id: HandlerId) -> R<bool>;
    /// Active handlers in the subtree of `id` (itself included if active),
    /// counted up to `limit`.
    fn active_subtree_size(&mut self, id: HandlerId, limit: usize) -> R<usize>;
}
