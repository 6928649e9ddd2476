//! `agency cost [<handler>]`: model usage and cost as a tree of handlers,
//! self and subtree totals (REST `GET /v1/cost[/{handler}]`).

use std::fmt::Write as _;
use std::process::ExitCode;

use agency_api::CostNode;
use agency_core::usage::UsageTotals;
use anyhow::Result;

use super::{Ctx, show};
use crate::client::IdKind;

pub fn cost(ctx: &Ctx, handler: Option<&str>) -> Result<ExitCode> {
    let c = ctx.client()?;
    let url = match handler {
        None => c.url(&["cost"]),
        Some(h) => {
            let id = c.resolve(IdKind::Handler, h)?;
            c.url(&["cost", &id])
        }
    };
    let v = c.get(url)?;
    show::<CostNode>(ctx, v, "cost", render)?;
    Ok(ExitCode::SUCCESS)
}

/// One line per handler, indented by depth: its own calls, then its
/// subtree's (when it has underlings).
pub(crate) fn render(root: &CostNode) -> String {
    let mut out = String::new();
    line(&mut out, root, 0);
    out
}

fn line(out: &mut String, n: &CostNode, depth: usize) {
    // One handler's line, wrapped to the terminal's width (`--wide`: whole).
    let start = out.len();
    let id = n.handler.to_string();
    let short = id.get(..8).unwrap_or(&id);
    let _ = write!(
        out,
        "{:indent$}{short} ({}) self: {}",
        "",
        n.status.as_str(),
        totals(&n.own),
        indent = depth * 2
    );
    if !n.children.is_empty() {
        let _ = write!(out, "; subtree: {}", totals(&n.subtree));
    }
    let one = out.split_off(start);
    out.push_str(&crate::output::layout::wrap(&one, depth * 2));
    for c in &n.children {
        line(out, c, depth + 1);
    }
}

fn totals(t: &UsageTotals) -> String {
    let mut s = format!(
        "{} calls, {} in, {} out, {} cache read, {} cache write, ${}",
        t.calls,
        t.usage.input_tokens,
        t.usage.output_tokens,
        t.usage.cache_read_tokens,
        t.usage.cache_write_tokens,
        dollars(t.cost_micro_usd)
    );
    // A model without a price costs an unknown amount, not $0: say so
    // beside the dollars rather than let them read as the whole cost.
    if t.unpriced_calls > 0 {
        let _ = write!(
            s,
            " + {} unpriced call{} (no price: cost unknown)",
            t.unpriced_calls,
            if t.unpriced_calls == 1 { "" } else { "s" }
        );
    }
    if t.estimated_calls > 0 {
        let _ = write!(
            s,
            ", {} charged at reservation (answer cut off)",
            t.estimated_calls
        );
    }
    s
}

/// Micro-dollars as dollars with four decimals (`$0.0123`).
pub(crate) fn dollars(micro: i64) -> String {
    let cents_e2 = (micro + 50) / 100; // in 1/10000 dollars, rounded
    format!("{}.{:04}", cents_e2 / 10_000, cents_e2 % 10_000)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn unpriced_and_estimated_calls_are_shown() {
        let t = UsageTotals {
            calls: 3,
            cost_micro_usd: 15_000,
            unpriced_calls: 2,
            estimated_calls: 1,
            ..UsageTotals::default()
        };
        let s = totals(&t);
        assert!(
            s.ends_with(
                "$0.0150 + 2 unpriced calls (no price: cost unknown), 1 charged at reservation (answer cut off)"
            ),
            "{s}"
        );
        assert!(!totals(&UsageTotals::default()).contains("unpriced"));
    }

    #[test]
    fn dollars_round_to_four_decimals() {
        assert_eq!(dollars(0), "0.0000");
        assert_eq!(dollars(15_000), "0.0150");
        assert_eq!(dollars(1_234_567), "1.2346");
    }
}
