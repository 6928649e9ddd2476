//! `agency budget set <handler> [--tokens N] [--usd F] [--calls N]
//! [--tool-calls N] [--spawns N] [--live-agents N] [--handlers N] [--depth N]
//! [--wall-clock 2h]`, `agency budget show [<handler>]` (spend against
//! limit as a tree) and `agency resume <handler>` (REST
//! `POST /v1/budgets/{handler}`, `GET /v1/budgets[/{handler}]`,
//! `POST /v1/budgets/{handler}/resume`).

use std::fmt::Write as _;
use std::process::ExitCode;

use agency_api::{BudgetNode, PauseReport, ResumeReport};
use agency_core::usage::BudgetLimits;
use anyhow::{Result, bail};
use serde_json::json;

use super::cost::dollars;
use super::{Ctx, show as emit_tree};
use crate::cli::BudgetLimitArgs;
use crate::client::IdKind;

pub fn set(ctx: &Ctx, handler: &str, a: &BudgetLimitArgs) -> Result<ExitCode> {
    let c = ctx.client()?;
    let id = c.resolve(IdKind::Handler, handler)?;
    let body = serde_json::to_value(limits_of(handler, a)?)?;
    let v = c.post(c.url(&["budgets", &id]), &body)?;
    if ctx.json {
        super::emit_json(&v)?;
    } else {
        let limits: BudgetLimits = crate::client::decode(v["limits"].clone(), "budget")?;
        let mut out = format!("budget of handler {id}: {}\n", limits_text(&limits));
        // Set at or under what the subtree already spent: it pauses now.
        if let Some(reason) = v["paused"]["reason"].as_str() {
            let _ = writeln!(
                out,
                "PAUSED NOW: the subtree has already spent this ({}): no new model calls, agent starts or delegations; calls in flight finish. Raise the limit to continue (agency budget set {id} …).",
                crate::safe_text::line(reason)
            );
        }
        super::emit(&out)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The limits given on the command line (dollars become micro-dollars).
pub(crate) fn limits_of(handler: &str, a: &BudgetLimitArgs) -> Result<BudgetLimits> {
    Ok(BudgetLimits {
        tokens: a.tokens,
        micro_usd: a.usd.map(|d| micro_usd(handler, d)).transpose()?,
        calls: a.calls,
        tool_calls: a.tool_calls,
        spawns: a.spawns,
        live_agents: a.live_agents,
        handlers: a.handlers,
        depth: a.depth,
        wall_clock_ms: a.wall_clock,
    })
}

/// `agency pause <handler> [--note]`.
pub fn pause(ctx: &Ctx, handler: &str, note: Option<&str>) -> Result<ExitCode> {
    let c = ctx.client()?;
    let id = c.resolve(IdKind::Handler, handler)?;
    let v = c.post(c.url(&["budgets", &id, "pause"]), &json!({ "note": note }))?;
    if ctx.json {
        super::emit_json(&v)?;
        return Ok(ExitCode::SUCCESS);
    }
    let r: PauseReport = crate::client::decode(v, "pause report")?;
    let mut out = if r.paused {
        format!("paused the subtree of handler {id} (agency resume {id} continues it)\n")
    } else {
        format!("handler {id} was already paused; nothing changed\n")
    };
    if r.live_agents > 0 {
        let _ = writeln!(
            out,
            "{} agent(s) live in it finish their model call in flight and get no other",
            r.live_agents
        );
    }
    super::emit(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// `agency resume <handler>`.
pub fn resume(ctx: &Ctx, handler: &str) -> Result<ExitCode> {
    let c = ctx.client()?;
    let id = c.resolve(IdKind::Handler, handler)?;
    let v = c.post(c.url(&["budgets", &id, "resume"]), &json!({}))?;
    if ctx.json {
        super::emit_json(&v)?;
        return Ok(ExitCode::SUCCESS);
    }
    let r: ResumeReport = crate::client::decode(v, "resume report")?;
    let mut out = if r.resumed.is_empty() {
        format!("no budget in the subtree of handler {id} was paused\n")
    } else {
        let ids: Vec<String> = r.resumed.iter().map(|h| h.to_string()).collect();
        format!("resumed: {}\n", ids.join(", "))
    };
    for h in &r.paused_above {
        let _ = writeln!(
            out,
            "still paused by the budget of handler {h} above it: agency resume {h}"
        );
    }
    super::emit(&out)?;
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
    for (v, what) in [
        (l.tool_calls, "tool calls"),
        (l.spawns, "spawns"),
        (l.live_agents, "live agents"),
        (l.handlers, "handlers"),
        (l.depth, "levels deep"),
    ] {
        if let Some(v) = v {
            parts.push(format!("{v} {what}"));
        }
    }
    if let Some(ms) = l.wall_clock_ms {
        parts.push(format!("{} wall clock", duration(ms)));
    }
    parts.join(", ")
}

/// Milliseconds as e.g. "2h", "1h30m", "45s".
fn duration(ms: i64) -> String {
    let s = ms / 1000;
    let (h, m, sec) = (s / 3600, (s % 3600) / 60, s % 60);
    let mut out = String::new();
    if h > 0 {
        let _ = write!(out, "{h}h");
    }
    if m > 0 {
        let _ = write!(out, "{m}m");
    }
    if sec > 0 || out.is_empty() {
        let _ = write!(out, "{sec}s");
    }
    out
}

/// One line per handler, indented by depth: its subtree's spend (and
/// what is in flight), against its limits when it has a budget.
pub(crate) fn render(root: &BudgetNode) -> String {
    let mut out = String::new();
    line(&mut out, root, 0);
    out
}

fn line(out: &mut String, n: &BudgetNode, depth: usize) {
    // One handler's line, wrapped to the terminal's width (`--wide`: whole).
    let start = out.len();
    let id = n.handler.to_string();
    let short = id.get(..8).unwrap_or(&id);
    let s = &n.spent;
    let _ = write!(
        out,
        "{:indent$}{short} ({}) spent: {} tokens, ${}, {} calls, {} tool calls, {} spawns, {} handlers, {} live",
        "",
        n.status.as_str(),
        s.tokens,
        dollars(s.micro_usd),
        s.calls,
        s.tool_calls,
        s.spawns,
        s.handlers,
        n.live_agents,
        indent = depth * 2
    );
    if s.reserved_calls > 0 {
        let _ = write!(
            out,
            "; in flight: {} calls, up to {} tokens",
            s.reserved_calls, s.reserved_tokens
        );
    }
    if let Some(l) = &n.limits {
        let _ = write!(out, "; limit: {}", limits_text(l));
        if let (Some(_), Some(e)) = (l.wall_clock_ms, n.elapsed_ms) {
            let _ = write!(out, " ({} elapsed)", duration(e));
        }
        if let Some(b) = n.carved_by {
            let b = b.to_string();
            let _ = write!(out, " (carved by {})", b.get(..8).unwrap_or(&b));
        }
    }
    if let Some(p) = &n.paused {
        let _ = write!(out, "; PAUSED: {} (agency resume {short})", p.reason);
    }
    let one = out.split_off(start);
    out.push_str(&crate::output::layout::wrap(&one, depth * 2));
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
