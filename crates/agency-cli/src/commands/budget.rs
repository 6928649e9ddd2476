//! `agency budget set <handler> [--tokens N] [--usd F] [--calls N]` and
//! `agency budget show [<handler>]`: limits on a handler's subtree and
//! spend against them as a tree (REST `POST /v1/budgets/{handler}`,
//! `GET /v1/budgets[/{handler}]`).

use std::fmt::Write as _;
use std::process::ExitCode;

use agency_service::{BudgetLimits, BudgetNode};
use anyhow::{Result, bail};
use serde_json::json;

use super::cost::dollars;
use super::{Ctx, show as emit_tree};
use crate::client::IdKind;

pub fn set(
    ctx: &Ctx,
    handler: &str,
    tokens: Option<i64>,
    usd: Option<f64>,
    calls: Option<i64>,
) -> Result<ExitCode> {
    let micro_usd = usd.map(|d| micro_usd(handler, d)).transpose()?;
    let c = ctx.client()?;
    let id = c.resolve(IdKind::Handler, handler)?;
    let body = json!({ "tokens": tokens, "micro_usd": micro_usd, "calls": calls });
    let v = c.post(c.url(&["budgets", &id]), &body)?;
    if ctx.json {
        super::emit_json(&v)?;
    } else {
        let limits: BudgetLimits = crate::client::decode(v["limits"].clone(), "budget")?;
        super::emit(&format!(
            "budget of handler {id}: {}\n",
            limits_text(&limits)
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn show(ctx: &Ctx, handler: Option<&str>) -> Result<ExitCode> {
    let c = ctx.client()?;
    let url = match handler {
        None => c.url(&["budgets"]),
        Some(h) => {
            let id = c.resolve(IdKind::Handler, h)?;
            c.url(&["budgets", &id])
        }
    };
    let v = c.get(url)?;
    emit_tree::<BudgetNode>(ctx, v, "budgets", render)?;
    Ok(ExitCode::SUCCESS)
}

/// Dollars as micro-dollars; a negative or non-finite amount is refused
/// here, as it cannot be sent as a number.
fn micro_usd(handler: &str, dollars: f64) -> Result<i64> {
    if !dollars.is_finite() || !(0.0..=9.0e12).contains(&dollars) {
        bail!(
            "failed to set the budget of handler {handler}: --usd {dollars} is not an amount of zero or more dollars"
        );
    }
    // In range (checked above), so the conversion cannot saturate.
    Ok((dollars * 1_000_000.0).round() as i64)
}

fn limits_text(l: &BudgetLimits) -> String {
    if l.is_empty() {
        return "no limits".to_owned();
    }
    let mut parts = Vec::new();
    if let Some(t) = l.tokens {
        parts.push(format!("{t} tokens"));
    }
    if let Some(u) = l.micro_usd {
        parts.push(format!("${}", dollars(u)));
    }
    if let Some(c) = l.calls {
        parts.push(format!("{c} calls"));
    }
    parts.join(", ")
}

/// One line per handler, indented by depth: its subtree's spend (and
/// what is in flight), against its limits when it has a budget.
pub(crate) fn render(root: &BudgetNode) -> String {
    let mut out = String::new();
    line(&mut out, root, 0);
    out
}

fn line(out: &mut String, n: &BudgetNode, depth: usize) {
    let id = n.handler.to_string();
    let short = id.get(..8).unwrap_or(&id);
    let s = &n.spent;
    let _ = write!(
        out,
        "{:indent$}{short} ({}) spent: {} tokens, ${}, {} calls",
        "",
        n.status.as_str(),
        s.usage.total(),
        dollars(s.cost_micro_usd),
        s.calls,
        indent = depth * 2
    );
    if n.reserved.calls > 0 {
        let _ = write!(
            out,
            "; in flight: {} calls, up to {} tokens",
            n.reserved.calls, n.reserved.tokens
        );
    }
    if let Some(l) = &n.limits {
        let _ = write!(out, "; limit: {}", limits_text(l));
    }
    out.push('\n');
    for c in &n.children {
        line(out, c, depth + 1);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn dollars_become_micro_dollars_and_nonsense_is_refused() {
        assert_eq!(micro_usd("h", 5.0).unwrap(), 5_000_000);
        assert_eq!(micro_usd("h", 0.25).unwrap(), 250_000);
        for bad in [-1.0, f64::NAN, f64::INFINITY, 1.0e13] {
            let e = micro_usd("h", bad).unwrap_err().to_string();
            assert!(e.contains("budget of handler h"), "{e}");
        }
    }
}
