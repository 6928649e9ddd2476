//! Budgets on handlers and the ledger of model calls in flight
//! (`budgets`, `budget_reservations`) and the ledger's running totals
//! per handler subtree (`budget_spend`).

use agency_core::{AgentId, HandlerId};
use rusqlite::params;

use super::SqliteTx;
use super::convert::*;
use crate::model::{
    BudgetLimits, BudgetPause, BudgetReservationRow, BudgetRow, BudgetSpend, ReservedTotals,
};
use crate::tx::BudgetTx;

const BUDGET_COLUMNS: &str = "handler, max_tokens, max_micro_usd, max_calls, set_at,
    max_tool_calls, max_spawns, max_live_agents, max_handlers, max_depth, max_wall_clock_ms,
    carved_by, paused_at, paused_reason, warned";

/// The running totals in the nine columns from `base` on.
fn spend_at(r: &rusqlite::Row<'_>, base: usize) -> R<BudgetSpend> {
    Ok(BudgetSpend {
        tokens: col(r, base, "spent tokens")?,
        micro_usd: col(r, base + 1, "spent cost")?,
        calls: col(r, base + 2, "spent calls")?,
        tool_calls: col(r, base + 3, "spent tool calls")?,
        spawns: col(r, base + 4, "spent spawns")?,
        handlers: col(r, base + 5, "spent handlers")?,
        reserved_tokens: col(r, base + 6, "reserved tokens")?,
        reserved_micro_usd: col(r, base + 7, "reserved cost")?,
        reserved_calls: col(r, base + 8, "reserved calls")?,
    })
}

fn budget_row(r: &rusqlite::Row<'_>) -> R<BudgetRow> {
    let paused_at = col_opt_ts(r, 12, "budget paused at")?;
    let reason: Option<String> = col(r, 13, "budget paused reason")?;
    Ok(BudgetRow {
        handler: col_id(r, 0, "budget handler")?,
        limits: BudgetLimits {
            tokens: col(r, 1, "budget tokens")?,
            micro_usd: col(r, 2, "budget cost")?,
            calls: col(r, 3, "budget calls")?,
            tool_calls: col(r, 5, "budget tool calls")?,
            spawns: col(r, 6, "budget spawns")?,
            live_agents: col(r, 7, "budget live agents")?,
            handlers: col(r, 8, "budget handlers")?,
            depth: col(r, 9, "budget depth")?,
            wall_clock_ms: col(r, 10, "budget wall clock")?,
        },
        set_at: col_ts(r, 4, "budget set at")?,
        carved_by: col_opt_id(r, 11, "budget carved by")?,
        paused: paused_at.map(|at| BudgetPause {
            at,
            reason: reason.unwrap_or_default(),
        }),
        warned: col(r, 14, "budget warned")?,
    })
}

impl BudgetTx for SqliteTx<'_> {
    fn set_budget(&mut self, b: &BudgetRow) -> R<()> {
        let c = self.conn;
        let l = &b.limits;
        execute(
            c,
            &format!(
                "INSERT OR REPLACE INTO budgets ({BUDGET_COLUMNS})
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)"
            ),
            params![
                b.handler.to_string(),
                l.tokens,
                l.micro_usd,
                l.calls,
                b.set_at.0,
                l.tool_calls,
                l.spawns,
                l.live_agents,
                l.handlers,
                l.depth,
                l.wall_clock_ms,
                b.carved_by.map(|h| h.to_string()),
                b.paused.as_ref().map(|p| p.at.0),
                b.paused.as_ref().map(|p| p.reason.as_str()),
                b.warned
            ],
            || format!("set the budget of handler {}", b.handler),
        )
        .map(drop)
    }

    fn budget_of(&mut self, handler: HandlerId) -> R<Option<BudgetRow>> {
        let c = self.conn;
        query_opt(
            c,
            &format!("SELECT {BUDGET_COLUMNS} FROM budgets WHERE handler = ?1"),
            [handler.to_string()],
            || format!("read the budget of handler {handler}"),
            budget_row,
        )
    }

    fn delete_budget(&mut self, handler: HandlerId) -> R<()> {
        let c = self.conn;
        execute(
            c,
            "DELETE FROM budgets WHERE handler = ?1",
            [handler.to_string()],
            || format!("remove the budget of handler {handler}"),
        )
        .map(drop)
    }

    /// Every paused budget, oldest pause first. A scan of `budgets`: there is
    /// at most one row per handler, and few carry a budget at all.
    fn paused_budgets(&mut self) -> R<Vec<BudgetRow>> {
        let c = self.conn;
        query_rows(
            c,
            &format!(
                "SELECT {BUDGET_COLUMNS} FROM budgets WHERE paused_at IS NOT NULL
                 ORDER BY paused_at, handler"
            ),
            [],
            || "list the paused budgets".to_owned(),
            budget_row,
        )
    }

    fn budgets_after(&mut self, after: Option<HandlerId>, n: usize) -> R<Vec<BudgetRow>> {
        query_rows(
            self.conn,
            &format!(
                "SELECT {BUDGET_COLUMNS} FROM budgets WHERE handler > ?1 ORDER BY handler LIMIT ?2"
            ),
            params![after.map(|h| h.to_string()).unwrap_or_default(), limit(n)],
            || "list the budgets".to_owned(),
            budget_row,
        )
    }

    fn budget_spend_of(&mut self, handler: HandlerId) -> R<BudgetSpend> {
        let c = self.conn;
        Ok(query_opt(
            c,
            "SELECT tokens, micro_usd, calls, tool_calls, spawns, handlers,
                    reserved_tokens, reserved_micro_usd, reserved_calls
             FROM budget_spend WHERE handler = ?1",
            [handler.to_string()],
            || format!("read the budget ledger of handler {handler}"),
            |r| spend_at(r, 0),
        )?
        .unwrap_or_default())
    }

    fn budgets_with_spend(&mut self, handlers: &[HandlerId]) -> R<Vec<(BudgetRow, BudgetSpend)>> {
        let c = self.conn;
        query_rows(
            c,
            &format!(
                "SELECT b.*, coalesce(s.tokens, 0), coalesce(s.micro_usd, 0), coalesce(s.calls, 0),
                    coalesce(s.tool_calls, 0), coalesce(s.spawns, 0), coalesce(s.handlers, 0),
                    coalesce(s.reserved_tokens, 0), coalesce(s.reserved_micro_usd, 0),
                    coalesce(s.reserved_calls, 0)
                 FROM (SELECT {BUDGET_COLUMNS} FROM budgets
                        WHERE handler IN (SELECT value FROM json_each(?1))) b
                 LEFT JOIN budget_spend s ON s.handler = b.handler"
            ),
            [json_list(handlers, true)],
            || format!("read the budgets of {} handler(s)", handlers.len()),
            |r| Ok((budget_row(r)?, spend_at(r, 15)?)),
        )
    }

    /// Add `d` (which may hold negative amounts: a settled reservation) to
    /// the running totals of each handler given.
    fn budget_spend_add(&mut self, handlers: &[HandlerId], d: &BudgetSpend) -> R<()> {
        if handlers.is_empty() {
            return Ok(());
        }
        // One statement for the whole chain (a model call's reservation
        // and settlement each add to every ancestor). `WHERE true`: an
        // upsert from a SELECT needs it to parse.
        execute(
            self.conn,
            "INSERT INTO budget_spend (handler, tokens, micro_usd, calls, tool_calls, spawns,
               handlers, reserved_tokens, reserved_micro_usd, reserved_calls)
             SELECT value, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10 FROM json_each(?1) WHERE true
             ON CONFLICT (handler) DO UPDATE SET tokens = tokens + ?2,
               micro_usd = micro_usd + ?3, calls = calls + ?4, tool_calls = tool_calls + ?5,
               spawns = spawns + ?6, handlers = handlers + ?7,
               reserved_tokens = reserved_tokens + ?8,
               reserved_micro_usd = reserved_micro_usd + ?9,
               reserved_calls = reserved_calls + ?10",
            params![
                json_list(handlers, true),
                d.tokens,
                d.micro_usd,
                d.calls,
                d.tool_calls,
                d.spawns,
                d.handlers,
                d.reserved_tokens,
                d.reserved_micro_usd,
                d.reserved_calls
            ],
            || {
                format!(
                    "update the budget ledger of handlers {}",
                    list_text(handlers)
                )
            },
        )
        .map(drop)
    }

    fn insert_budget_reservation(&mut self, r: &BudgetReservationRow) -> R<i64> {
        let c = self.conn;
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

    fn budget_reservation(&mut self, id: i64) -> R<Option<BudgetReservationRow>> {
        let c = self.conn;
        query_opt(
            c,
            "SELECT at, handler, agent, tokens, micro_usd FROM budget_reservations WHERE id = ?1",
            [id],
            || format!("read budget reservation {id}"),
            |r| {
                Ok(BudgetReservationRow {
                    at: col_ts(r, 0, "reservation at")?,
                    handler: col_id(r, 1, "reservation handler")?,
                    agent: col_id(r, 2, "reservation agent")?,
                    tokens: col(r, 3, "reservation tokens")?,
                    micro_usd: col(r, 4, "reservation cost")?,
                })
            },
        )
    }

    fn budget_reservations_of_agents(
        &mut self,
        agents: &[AgentId],
    ) -> R<Vec<(i64, BudgetReservationRow)>> {
        query_rows(
            self.conn,
            "SELECT id, at, handler, agent, tokens, micro_usd FROM budget_reservations
             WHERE agent IN (SELECT value FROM json_each(?1)) ORDER BY id",
            [json_list(agents, true)],
            || {
                format!(
                    "read the budget reservations of agents {}",
                    list_text(agents)
                )
            },
            |r| {
                Ok((
                    col(r, 0, "reservation id")?,
                    BudgetReservationRow {
                        at: col_ts(r, 1, "reservation at")?,
                        handler: col_id(r, 2, "reservation handler")?,
                        agent: col_id(r, 3, "reservation agent")?,
                        tokens: col(r, 4, "reservation tokens")?,
                        micro_usd: col(r, 5, "reservation cost")?,
                    },
                ))
            },
        )
    }

    fn delete_budget_reservation(&mut self, id: i64) -> R<()> {
        let c = self.conn;
        execute(
            c,
            "DELETE FROM budget_reservations WHERE id = ?1",
            [id],
            || format!("release budget reservation {id}"),
        )
        .map(drop)
    }

    fn budget_reserved_of(&mut self, handlers: &[HandlerId]) -> R<ReservedTotals> {
        let c = self.conn;
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

    fn clear_budget_reservations(&mut self) -> R<usize> {
        let c = self.conn;
        execute(
            c,
            "UPDATE budget_spend SET reserved_tokens = 0, reserved_micro_usd = 0, reserved_calls = 0
             WHERE reserved_tokens <> 0 OR reserved_micro_usd <> 0 OR reserved_calls <> 0",
            [],
            || "clear the budget ledger's calls in flight left by a previous daemon".to_owned(),
        )?;
        execute(c, "DELETE FROM budget_reservations", [], || {
            "clear the budget reservations left by a previous daemon".to_owned()
        })
    }

    fn handler_hops(&mut self, handler: HandlerId) -> R<i64> {
        let c = self.conn;
        Ok(query_opt(
            c,
            "SELECT hops FROM handler_hops WHERE handler = ?1",
            [handler.to_string()],
            || format!("read the hop count of handler {handler}"),
            |r| col(r, 0, "hops"),
        )?
        .unwrap_or(0))
    }

    fn set_handler_hops(&mut self, handler: HandlerId, hops: i64) -> R<()> {
        let c = self.conn;
        execute(
            c,
            "INSERT INTO handler_hops (handler, hops) VALUES (?1, ?2)
             ON CONFLICT (handler) DO UPDATE SET hops = ?2",
            params![handler.to_string(), hops],
            || format!("set the hop count of handler {handler}"),
        )
        .map(drop)
    }
}
