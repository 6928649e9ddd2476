//! [`UsageTx`] on PostgreSQL: model calls metered by the daemon's gateway
//! (`model_calls`), one row per call, summed per handler for `agency cost`.

use agency_core::{AgentId, HandlerId};
use agency_store::model::{ModelCallRow, TokenUsage, UsageTotals};
use agency_store::tx::R;
use agency_store::tx::UsageTx;

use crate::PgTx;
use crate::convert::*;

impl UsageTx for PgTx<'_> {
    fn insert_model_call(&mut self, m: &ModelCallRow) -> R<()> {
        execute(
            self.conn,
            "INSERT INTO model_calls (at, handler, agent, upstream, api, model, stream, status,
               input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_micro_usd,
               unpriced, estimated)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)",
            &[
                &m.at.0,
                &m.handler.to_string(),
                &m.agent.to_string(),
                &m.upstream,
                &m.api,
                &m.model,
                &flag(m.stream),
                &m.status,
                &m.usage.input_tokens,
                &m.usage.output_tokens,
                &m.usage.cache_read_tokens,
                &m.usage.cache_write_tokens,
                &m.cost_micro_usd,
                &flag(m.unpriced),
                &flag(m.estimated),
            ],
            || format!("record a model call of agent {}", m.agent),
        )
        .map(drop)
    }

    fn model_usage_of(&mut self, handlers: &[HandlerId]) -> R<Vec<UsageTotals>> {
        let mut totals = Vec::with_capacity(handlers.len());
        for h in handlers {
            let t = query_opt(
                self.conn,
                "SELECT COUNT(*), COALESCE(SUM(input_tokens), 0)::BIGINT,
                        COALESCE(SUM(output_tokens), 0)::BIGINT,
                        COALESCE(SUM(cache_read_tokens), 0)::BIGINT,
                        COALESCE(SUM(cache_write_tokens), 0)::BIGINT,
                        COALESCE(SUM(cost_micro_usd), 0)::BIGINT,
                        COALESCE(SUM(unpriced), 0)::BIGINT,
                        COALESCE(SUM(estimated), 0)::BIGINT
                 FROM model_calls WHERE handler = $1",
                &[&h.to_string()],
                || format!("sum the model calls of handler {h}"),
                |r| {
                    Ok(UsageTotals {
                        calls: col(r, 0, "calls")?,
                        usage: TokenUsage {
                            input_tokens: col(r, 1, "input tokens")?,
                            output_tokens: col(r, 2, "output tokens")?,
                            cache_read_tokens: col(r, 3, "cache-read tokens")?,
                            cache_write_tokens: col(r, 4, "cache-write tokens")?,
                        },
                        cost_micro_usd: col(r, 5, "cost")?,
                        unpriced_calls: col(r, 6, "unpriced calls")?,
                        estimated_calls: col(r, 7, "estimated calls")?,
                    })
                },
            )?;
            totals.push(t.unwrap_or_default());
        }
        Ok(totals)
    }

    fn model_calls_of_agent(&mut self, agent: AgentId, max: usize) -> R<Vec<ModelCallRow>> {
        query_rows(
            self.conn,
            "SELECT at, handler, agent, upstream, api, model, stream, status, input_tokens,
                    output_tokens, cache_read_tokens, cache_write_tokens, cost_micro_usd,
                    unpriced, estimated
             FROM model_calls WHERE agent = $1 ORDER BY id DESC LIMIT $2",
            &[&agent.to_string(), &limit(max)],
            || format!("read the model calls of agent {agent}"),
            |r| {
                Ok(ModelCallRow {
                    at: col_ts(r, 0, "model call at")?,
                    handler: col_id(r, 1, "model call handler")?,
                    agent: col_id(r, 2, "model call agent")?,
                    upstream: col(r, 3, "model call upstream")?,
                    api: col(r, 4, "model call api")?,
                    model: col(r, 5, "model call model")?,
                    stream: col(r, 6, "model call stream")?,
                    status: col(r, 7, "model call status")?,
                    usage: TokenUsage {
                        input_tokens: col(r, 8, "input tokens")?,
                        output_tokens: col(r, 9, "output tokens")?,
                        cache_read_tokens: col(r, 10, "cache-read tokens")?,
                        cache_write_tokens: col(r, 11, "cache-write tokens")?,
                    },
                    cost_micro_usd: col(r, 12, "cost")?,
                    unpriced: col(r, 13, "model call unpriced")?,
                    estimated: col(r, 14, "model call estimated")?,
                })
            },
        )
    }
}
