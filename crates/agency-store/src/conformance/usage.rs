//! Model calls: recorded, summed per handler in the order asked, listed
//! per agent newest first.

use agency_core::Timestamp;

use super::New;
use super::fixtures::*;
use crate::{ModelCallRow, TokenUsage, UsageTotals};

pub fn model_calls_are_summed_per_handler(new: &New) {
    let (_d, store) = new();
    let (h1, h2) = wr(&store, |tx| {
        let h1 = add_handler(tx, 1, None)?;
        Ok((h1, add_handler(tx, 2, Some(h1))?))
    });
    let call = |n: i64, agent_n: u128, handler, unpriced| ModelCallRow {
        at: Timestamp(n),
        handler,
        agent: aid(agent_n),
        upstream: "main".into(),
        api: "anthropic".into(),
        model: format!("model {n}"),
        stream: false,
        status: 200,
        usage: TokenUsage {
            input_tokens: 10 * n,
            output_tokens: n,
            cache_read_tokens: 0,
            cache_write_tokens: 1,
        },
        cost_micro_usd: 100 * n,
        unpriced,
        estimated: false,
    };
    wr(&store, |tx| {
        tx.insert_agent(&agent(100, h1, 1))?;
        tx.insert_model_call(&call(1, 100, h1, false))?;
        tx.insert_model_call(&call(2, 100, h1, true))?;
        tx.insert_model_call(&call(3, 100, h1, false))
    });
    rd(&store, |tx| {
        let sums = tx.model_usage_of(&[h2, h1])?;
        assert_eq!(sums[0], UsageTotals::default(), "a handler without calls");
        assert_eq!(
            sums[1],
            UsageTotals {
                calls: 3,
                usage: TokenUsage {
                    input_tokens: 60,
                    output_tokens: 6,
                    cache_read_tokens: 0,
                    cache_write_tokens: 3,
                },
                cost_micro_usd: 600,
                unpriced_calls: 1,
                estimated_calls: 0,
            }
        );
        let latest: Vec<String> = tx
            .model_calls_of_agent(aid(100), 2)?
            .into_iter()
            .map(|c| c.model)
            .collect();
        assert_eq!(latest, ["model 3", "model 2"], "newest first");
        assert_eq!(
            tx.model_calls_of_agent(aid(100), 10)?[2],
            call(1, 100, h1, false)
        );
        assert!(tx.model_calls_of_agent(aid(101), 10)?.is_empty());
        Ok(())
    });
}
