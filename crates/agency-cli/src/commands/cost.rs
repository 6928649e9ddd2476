//! `agency cost [<handler>]`: model usage and cost as a tree of handlers,
//! self and subtree totals (REST `GET /v1/cost[/{handler}]`).

use std::fmt::Write as _;
use std::process::ExitCode;

use agency_service::{CostNode, UsageTotals};
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
    out.push('\n');
    for c in &n.children {
        line(out, c, depth + 1);
    }
}

fn totals(t: &UsageTotals) -> String {
    format!(
        "{} calls, {} in, {} out, {} cache read, {} cache write, ${}",
        t.calls,
        t.usage.input_tokens,
        t.usage.output_tokens,
        t.usage.cache_read_tokens,
        t.usage.cache_write_tokens,
        dollars(t.cost_micro_usd)
    )
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
    fn dollars_round_to_four_decimals() {
        assert_eq!(dollars(0), "0.0000");
        assert_eq!(dollars(15_000), "0.0150");
        assert_eq!(dollars(1_234_567), "1.2346");
    }
}
