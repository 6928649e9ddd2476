//! [`BudgetTx`] on PostgreSQL.
#![allow(unused_variables)]

use agency_core::HandlerId;
use agency_store::model::{BudgetReservationRow, BudgetRow, BudgetSpend, ReservedTotals};
use agency_store::tx::BudgetTx;
use agency_store::tx::R;

use crate::PgTx;
use crate::convert::unported;

impl BudgetTx for PgTx<'_> {
    fn set_budget(&mut self, budget: &BudgetRow) -> R<()> {
        Err(unported("set_budget"))
    }
    fn budget_of(&mut self, handler: HandlerId) -> R<Option<BudgetRow>> {
        Err(unported("budget_of"))
    }
    fn delete_budget(&mut self, handler: HandlerId) -> R<()> {
        Err(unported("delete_budget"))
    }
    fn paused_budgets(&mut self) -> R<Vec<BudgetRow>> {
        Err(unported("paused_budgets"))
    }
    fn budgets_after(&mut self, after: Option<HandlerId>, limit: usize) -> R<Vec<BudgetRow>> {
        Err(unported("budgets_after"))
    }
    fn budget_spend_of(&mut self, handler: HandlerId) -> R<BudgetSpend> {
        Err(unported("budget_spend_of"))
    }
    fn budget_spend_add(&mut self, handlers: &[HandlerId], delta: &BudgetSpend) -> R<()> {
        Err(unported("budget_spend_add"))
    }
    fn insert_budget_reservation(&mut self, r: &BudgetReservationRow) -> R<i64> {
        Err(unported("insert_budget_reservation"))
    }
    fn budget_reservation(&mut self, id: i64) -> R<Option<BudgetReservationRow>> {
        Err(unported("budget_reservation"))
    }
    fn delete_budget_reservation(&mut self, id: i64) -> R<()> {
        Err(unported("delete_budget_reservation"))
    }
    fn budget_reserved_of(&mut self, handlers: &[HandlerId]) -> R<ReservedTotals> {
        Err(unported("budget_reserved_of"))
    }
    fn clear_budget_reservations(&mut self) -> R<usize> {
        Err(unported("clear_budget_reservations"))
    }
    fn handler_hops(&mut self, handler: HandlerId) -> R<i64> {
        Err(unported("handler_hops"))
    }
    fn set_handler_hops(&mut self, handler: HandlerId, hops: i64) -> R<()> {
        Err(unported("set_handler_hops"))
    }
}
