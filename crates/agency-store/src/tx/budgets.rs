//! [`BudgetTx`]: budgets: limits, running totals, reservations of calls in
//! flight, hop counts.

use agency_core::{AgentId, HandlerId};

use super::R;
use crate::model::{BudgetReservationRow, BudgetRow, BudgetSpend, ReservedTotals};

/// Budgets: limits, running totals, reservations of calls in flight, hop
/// counts.
pub trait BudgetTx {
    /// Set (replace) the limits on a handler's subtree.
    fn set_budget(&mut self, budget: &BudgetRow) -> R<()>;
    fn budget_of(&mut self, handler: HandlerId) -> R<Option<BudgetRow>>;
    fn delete_budget(&mut self, handler: HandlerId) -> R<()>;
    /// Every budget paused now, oldest pause first.
    fn paused_budgets(&mut self) -> R<Vec<BudgetRow>>;
    /// Budgets with a limit, by holder, at most `limit` after `after`.
    fn budgets_after(&mut self, after: Option<HandlerId>, limit: usize) -> R<Vec<BudgetRow>>;
    /// The running totals of a handler's subtree (zeros if none yet).
    fn budget_spend_of(&mut self, handler: HandlerId) -> R<BudgetSpend>;
    /// The budgets held by any of `handlers`, each with its running totals
    /// (zeros if none yet), in no particular order: one statement for a
    /// chain of handlers, where `budget_of` and `budget_spend_of` make two
    /// per handler (on PostgreSQL, round trips of every charged call).
    fn budgets_with_spend(&mut self, handlers: &[HandlerId]) -> R<Vec<(BudgetRow, BudgetSpend)>>;
    /// Add `delta` to the running totals of every handler given.
    fn budget_spend_add(&mut self, handlers: &[HandlerId], delta: &BudgetSpend) -> R<()>;
    /// Record the worst case of a model call in flight; returns its id.
    fn insert_budget_reservation(&mut self, r: &BudgetReservationRow) -> R<i64>;
    fn budget_reservation(&mut self, id: i64) -> R<Option<BudgetReservationRow>>;
    fn delete_budget_reservation(&mut self, id: i64) -> R<()>;
    /// The reservations made for the agents given, as `(id, row)` ordered
    /// by id: calls in flight of agents whose daemon is gone.
    fn budget_reservations_of_agents(
        &mut self,
        agents: &[AgentId],
    ) -> R<Vec<(i64, BudgetReservationRow)>>;
    /// The reservations in flight of the handlers given, summed.
    fn budget_reserved_of(&mut self, handlers: &[HandlerId]) -> R<ReservedTotals>;
    /// Drop every reservation (a daemon starting: nothing is in flight),
    /// and the ledger's totals of calls in flight with them.
    fn clear_budget_reservations(&mut self) -> R<usize>;
    /// The hop count of the chain of work a handler is on (0 if none).
    fn handler_hops(&mut self, handler: HandlerId) -> R<i64>;
    fn set_handler_hops(&mut self, handler: HandlerId, hops: i64) -> R<()>;
}
