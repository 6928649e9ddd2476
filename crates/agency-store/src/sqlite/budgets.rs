//! Budgets on handlers and the ledger of model calls in flight
//! (`budgets`, `budget_reservations`): the store side of issue 11 item 3.

use agency_core::HandlerId;
use rusqlite::{Connection, params};

use super::convert::*;
use crate::model::{BudgetLimits, BudgetReservationRow, BudgetRow, ReservedTotals};

pub(crate) fn set_budget(c: &Connection, b: &BudgetRow) -> R<()> {
    execute(
        c,
        "INSERT INTO budgets (handler, max_tokens, max_micro_usd, max_calls, set_at)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (handler) DO UPDATE SET max_tokens = ?2, max_micro_usd = ?3,
           max_calls = ?4, set_at = ?5",
        params![
            b.handler.to_string(),
            b.limits.tokens,
            b.limits.micro_usd,
            b.limits.calls,
            b.set_at.0
        ],
        || format!("set the budget of handler {}", b.handler),
    )
    .map(drop)
}

pub(crate) fn budget_of(c: &Connection, handler: HandlerId) -> R<Option<BudgetRow>> {
    query_opt(
        c,
        "SELECT handler, max_tokens, max_micro_usd, max_calls, set_at
         FROM budgets WHERE handler = ?1",
        [handler.to_string()],
        || format!("read the budget of handler {handler}"),
        |r| {
            Ok(BudgetRow {
                handler: col_id(r, 0, "budget handler")?,
                limits: BudgetLimits {
                    tokens: col(r, 1, "budget tokens")?,
                    micro_usd: col(r, 2, "budget cost")?,
                    calls: col(r, 3, "budget calls")?,
                },
                set_at: col_ts(r, 4, "budget set at")?,
            })
        },
    )
}

pub(crate) fn insert_reservation(c: &Connection, r: &BudgetReservationRow) -> R<i64> {
    execute(
        c,
        "INSERT INTO budget_reservations (at, handler, agent, tokens, micro_usd)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![
            r.at.0,
            r.handler.to_string(),
            r.agent.to_string(),
            r.tokens,
            r.micro_usd
        ],
        || format!("reserve a model call of agent {}", r.agent),
    )?;
    Ok(c.last_insert_rowid())
}

pub(crate) fn delete_reservation(c: &Connection, id: i64) -> R<()> {
    execute(
        c,
        "DELETE FROM budget_reservations WHERE id = ?1",
        [id],
        || format!("release budget reservation {id}"),
    )
    .map(drop)
}

pub(crate) fn reserved_of(c: &Connection, handlers: &[HandlerId]) -> R<ReservedTotals> {
    let mut total = ReservedTotals::default();
    for h in handlers {
        let rows = query_rows(
            c,
            "SELECT COUNT(*), COALESCE(SUM(tokens), 0), COALESCE(SUM(micro_usd), 0)
             FROM budget_reservations WHERE handler = ?1",
            [h.to_string()],
            || format!("sum the budget reservations of handler {h}"),
            |r| {
                Ok(ReservedTotals {
                    calls: col(r, 0, "reserved calls")?,
                    tokens: col(r, 1, "reserved tokens")?,
                    micro_usd: col(r, 2, "reserved cost")?,
                })
            },
        )?;
        for r in rows {
            total.calls += r.calls;
            total.tokens += r.tokens;
            total.micro_usd += r.micro_usd;
        }
    }
    Ok(total)
}

pub(crate) fn clear_reservations(c: &Connection) -> R<usize> {
    execute(c, "DELETE FROM budget_reservations", [], || {
        "clear the budget reservations left by a previous daemon".to_owned()
    })
}
