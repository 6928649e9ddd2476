//! [`BudgetTx`] on PostgreSQL: budgets on handlers and the ledger of model
//! calls in flight (`budgets`, `budget_reservations`) and the ledger's
//! running totals per handler subtree (`budget_spend`).

use agency_core::{AgentId, HandlerId};
use agency_store::model::{
    BudgetLimits, BudgetPause, BudgetReservationRow, BudgetRow, BudgetSpend, ReservedTotals,
};
use agency_store::tx::BudgetTx;
use agency_store::tx::R;
use tokio_postgres::Row;

use crate::PgTx;
use crate::convert::*;

macro_rules! budget_cols {
    () => {
        "handler, max_tokens, max_micro_usd, max_calls, set_at,
    max_tool_calls, max_spawns, max_live_agents, max_handlers, max_depth, max_wall_clock_ms,
    carved_by, paused_at, paused_reason, warned"
    };
}

/// The running totals in the nine columns from `base` on.
fn spend_at(r: &Row, base: usize) -> R<BudgetSpend> {
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

fn budget_row(r: &Row) -> R<BudgetRow> {
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

impl BudgetTx for PgTx<'_> {
    /// Set (or replace whole) the budget of a handler.
    fn set_budget(&mut self, b: &BudgetRow) -> R<()> {
        let l = &b.limits;
        execute(
            self.conn,
            concat!(
                "INSERT INTO budgets (",
                budget_cols!(),
                ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)
                 ON CONFLICT (handler) DO UPDATE SET max_tokens = EXCLUDED.max_tokens,
                   max_micro_usd = EXCLUDED.max_micro_usd, max_calls = EXCLUDED.max_calls,
                   set_at = EXCLUDED.set_at, max_tool_calls = EXCLUDED.max_tool_calls,
                   max_spawns = EXCLUDED.max_spawns, max_live_agents = EXCLUDED.max_live_agents,
                   max_handlers = EXCLUDED.max_handlers, max_depth = EXCLUDED.max_depth,
                   max_wall_clock_ms = EXCLUDED.max_wall_clock_ms, carved_by = EXCLUDED.carved_by,
                   paused_at = EXCLUDED.paused_at, paused_reason = EXCLUDED.paused_reason,
                   warned = EXCLUDED.warned"
            ),
            &[
                &b.handler.to_string(),
                &l.tokens,
                &l.micro_usd,
                &l.calls,
                &b.set_at.0,
                &l.tool_calls,
                &l.spawns,
                &l.live_agents,
                &l.handlers,
                &l.depth,
                &l.wall_clock_ms,
                &opt_text(b.carved_by),
                &b.paused.as_ref().map(|p| p.at.0),
                &b.paused.as_ref().map(|p| p.reason.as_str()),
                &b.warned,
            ],
            || format!("set the budget of handler {}", b.handler),
        )
        .map(drop)
    }

    fn budget_of(&mut self, handler: HandlerId) -> R<Option<BudgetRow>> {
        query_opt(
            self.conn,
            concat!(
                "SELECT ",
                budget_cols!(),
                " FROM budgets WHERE handler = $1"
            ),
            &[&handler.to_string()],
            || format!("read the budget of handler {handler}"),
            budget_row,
        )
    }

    fn delete_budget(&mut self, handler: HandlerId) -> R<()> {
        execute(
            self.conn,
            "DELETE FROM budgets WHERE handler = $1",
            &[&handler.to_string()],
            || format!("remove the budget of handler {handler}"),
        )
        .map(drop)
    }

    /// Every paused budget, oldest pause first. A scan of `budgets`: there is
    /// at most one row per handler, and few carry a budget at all.
    fn paused_budgets(&mut self) -> R<Vec<BudgetRow>> {
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                budget_cols!(),
                " FROM budgets WHERE paused_at IS NOT NULL ORDER BY paused_at, handler"
            ),
            &[],
            || "list the paused budgets".to_owned(),
            budget_row,
        )
    }

    fn budgets_after(&mut self, after: Option<HandlerId>, n: usize) -> R<Vec<BudgetRow>> {
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                budget_cols!(),
                " FROM budgets WHERE handler > $1 ORDER BY handler LIMIT $2"
            ),
            &[&opt_text(after).unwrap_or_default(), &limit(n)],
            || "list the budgets".to_owned(),
            budget_row,
        )
    }

    fn budget_spend_of(&mut self, handler: HandlerId) -> R<BudgetSpend> {
        Ok(query_opt(
            self.conn,
            "SELECT tokens, micro_usd, calls, tool_calls, spawns, handlers,
                    reserved_tokens, reserved_micro_usd, reserved_calls
             FROM budget_spend WHERE handler = $1",
            &[&handler.to_string()],
            || format!("read the budget ledger of handler {handler}"),
            |r| spend_at(r, 0),
        )?
        .unwrap_or_default())
    }

    fn budgets_with_spend(&mut self, handlers: &[HandlerId]) -> R<Vec<(BudgetRow, BudgetSpend)>> {
        query_rows(
            self.conn,
            concat!(
                "SELECT b.*, coalesce(s.tokens, 0), coalesce(s.micro_usd, 0), coalesce(s.calls, 0),
                    coalesce(s.tool_calls, 0), coalesce(s.spawns, 0), coalesce(s.handlers, 0),
                    coalesce(s.reserved_tokens, 0), coalesce(s.reserved_micro_usd, 0),
                    coalesce(s.reserved_calls, 0)
                 FROM (SELECT ",
                budget_cols!(),
                " FROM budgets WHERE handler = ANY($1)) b
                 LEFT JOIN budget_spend s ON s.handler = b.handler"
            ),
            &[&text_list(handlers)],
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
        // One statement (one round trip) for the whole chain. The rows are
        // locked in the order given, handler first and root last, as every
        // caller's chain runs: two chains that share ancestors lock them in
        // the same order. A handler given twice counts twice, as on SQLite
        // (an upsert may not touch a row twice: repeats go one at a time).
        let mut seen = std::collections::HashSet::new();
        let (once, again): (Vec<HandlerId>, Vec<HandlerId>) =
            handlers.iter().partition(|h| seen.insert(**h));
        for list in std::iter::once(once).chain(again.into_iter().map(|h| vec![h])) {
            execute(
                self.conn,
                "INSERT INTO budget_spend AS s (handler, tokens, micro_usd, calls, tool_calls, spawns,
                   handlers, reserved_tokens, reserved_micro_usd, reserved_calls)
                 SELECT h, $2, $3, $4, $5, $6, $7, $8, $9, $10
                 FROM unnest($1::text[]) WITH ORDINALITY AS u(h, n) ORDER BY n
                 ON CONFLICT (handler) DO UPDATE SET tokens = s.tokens + $2,
                   micro_usd = s.micro_usd + $3, calls = s.calls + $4,
                   tool_calls = s.tool_calls + $5, spawns = s.spawns + $6,
                   handlers = s.handlers + $7,
                   reserved_tokens = s.reserved_tokens + $8,
                   reserved_micro_usd = s.reserved_micro_usd + $9,
                   reserved_calls = s.reserved_calls + $10",
                &[
                    &text_list(&list),
                    &d.tokens,
                    &d.micro_usd,
                    &d.calls,
                    &d.tool_calls,
                    &d.spawns,
                    &d.handlers,
                    &d.reserved_tokens,
                    &d.reserved_micro_usd,
                    &d.reserved_calls,
                ],
                || format!("update the budget ledger of {} handler(s)", list.len()),
            )?;
        }
        Ok(())
    }

    fn insert_budget_reservation(&mut self, r: &BudgetReservationRow) -> R<i64> {
        query_value(
            self.conn,
            "INSERT INTO budget_reservations (at, handler, agent, tokens, micro_usd)
             VALUES ($1, $2, $3, $4, $5) RETURNING id",
            &[
                &r.at.0,
                &r.handler.to_string(),
                &r.agent.to_string(),
                &r.tokens,
                &r.micro_usd,
            ],
            || format!("reserve a model call of agent {}", r.agent),
        )
    }

    fn budget_reservation(&mut self, id: i64) -> R<Option<BudgetReservationRow>> {
        query_opt(
            self.conn,
            "SELECT at, handler, agent, tokens, micro_usd FROM budget_reservations WHERE id = $1",
            &[&id],
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
             WHERE agent = ANY($1) ORDER BY id",
            &[&text_list(agents)],
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
        execute(
            self.conn,
            "DELETE FROM budget_reservations WHERE id = $1",
            &[&id],
            || format!("release budget reservation {id}"),
        )
        .map(drop)
    }

    fn budget_reserved_of(&mut self, handlers: &[HandlerId]) -> R<ReservedTotals> {
        let mut total = ReservedTotals::default();
        for h in handlers {
            let rows = query_rows(
                self.conn,
                "SELECT COUNT(*), COALESCE(SUM(tokens), 0)::BIGINT, COALESCE(SUM(micro_usd), 0)::BIGINT
                 FROM budget_reservations WHERE handler = $1",
                &[&h.to_string()],
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
        execute(
            self.conn,
            "UPDATE budget_spend SET reserved_tokens = 0, reserved_micro_usd = 0, reserved_calls = 0
             WHERE reserved_tokens <> 0 OR reserved_micro_usd <> 0 OR reserved_calls <> 0",
            &[],
            || "clear the budget ledger's calls in flight left by a previous daemon".to_owned(),
        )?;
        execute(self.conn, "DELETE FROM budget_reservations", &[], || {
            "clear the budget reservations left by a previous daemon".to_owned()
        })
    }

    fn handler_hops(&mut self, handler: HandlerId) -> R<i64> {
        Ok(query_opt(
            self.conn,
            "SELECT hops FROM handler_hops WHERE handler = $1",
            &[&handler.to_string()],
            || format!("read the hop count of handler {handler}"),
            |r| col(r, 0, "hops"),
        )?
        .unwrap_or(0))
    }

    fn set_handler_hops(&mut self, handler: HandlerId, hops: i64) -> R<()> {
        execute(
            self.conn,
            "INSERT INTO handler_hops (handler, hops) VALUES ($1, $2)
             ON CONFLICT (handler) DO UPDATE SET hops = EXCLUDED.hops",
            &[&handler.to_string(), &hops],
            || format!("set the hop count of handler {handler}"),
        )
        .map(drop)
    }
}
