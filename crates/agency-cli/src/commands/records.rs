//! Records about the organisation's work: `runs`, `run`, `transcript`,
//! `mail status`, `kb audit` and `outcomes --of`.

use std::process::ExitCode;

use agency_api::{KbAuditEntry, RunView};
use agency_api::{MessageView, OutcomeBrief};
use anyhow::Result;
use serde_json::Value;

use super::{Ctx, emit, show};
use crate::client::{IdKind, decode};
use crate::{records, replay};

/// A file argument: a UUID, a unique prefix, or `kb://UUID` (as KB files
/// link to each other).
fn file_arg(arg: &str) -> &str {
    let a = arg.trim();
    match a.get(..5) {
        Some(p) if p.eq_ignore_ascii_case("kb://") => &a[5..],
        _ => a,
    }
}

pub fn runs(ctx: &Ctx, handler: Option<&str>, limit: usize) -> Result<ExitCode> {
    let c = ctx.client()?;
    let mut url = c.url(&["runs"]);
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("limit", &limit.to_string());
        if let Some(h) = handler {
            q.append_pair("handler", &c.resolve(IdKind::Handler, h)?);
        }
    }
    let v = c.get(url)?;
    show::<Vec<RunView>>(ctx, v, "runs", |l| records::runs(l))?;
    Ok(ExitCode::SUCCESS)
}

pub fn run(ctx: &Ctx, id: &str) -> Result<ExitCode> {
    let c = ctx.client()?;
    let id = c.resolve(IdKind::Agent, id)?;
    let v = c.get(c.url(&["runs", &id]))?;
    show::<RunView>(ctx, v, "run", records::run)?;
    Ok(ExitCode::SUCCESS)
}

/// `agency run AGENT --prompt`: the system prompt and first message,
/// each under a heading, agent-written parts escaped for the terminal.
pub fn run_prompt(ctx: &Ctx, id: &str) -> Result<ExitCode> {
    let c = ctx.client()?;
    let id = c.resolve(IdKind::Agent, id)?;
    let v = c.get(c.url(&["runs", &id, "prompt"]))?;
    show::<agency_api::RunPrompt>(ctx, v, "run prompt", |p| {
        format!(
            "== system prompt of agent {} ==\n{}\n\n== first message ==\n{}\n",
            p.agent,
            crate::safe_text::block(p.system_prompt.trim_end()),
            crate::safe_text::block(p.first_message.trim_end())
        )
    })?;
    Ok(ExitCode::SUCCESS)
}

pub fn transcript(ctx: &Ctx, id: &str) -> Result<ExitCode> {
    let c = ctx.client()?;
    let id = c.resolve(IdKind::Agent, id)?;
    let v = c.get(c.url(&["runs", &id, "transcript"]))?;
    let events: Vec<Value> = decode(
        v.get("events").cloned().unwrap_or(Value::Array(Vec::new())),
        "transcript",
    )?;
    if ctx.json {
        // The raw events, one per line (JSONL, as the runtime wrote them):
        // serde_json escapes every control character, so this is safe to
        // print and to pipe into `jq`.
        let mut out = String::new();
        for e in &events {
            out.push_str(&e.to_string());
            out.push('\n');
        }
        emit(&out)?;
    } else {
        emit(&replay::replay(&events))?;
    }
    Ok(ExitCode::SUCCESS)
}

pub fn mail_status(ctx: &Ctx, id: &str) -> Result<ExitCode> {
    let c = ctx.client()?;
    let id = c.resolve(IdKind::Message, id)?;
    let v = c.get(c.url(&["mail", &id]))?;
    show::<MessageView>(ctx, v, "message receipt", records::receipt)?;
    Ok(ExitCode::SUCCESS)
}

pub fn kb_audit(ctx: &Ctx, id: &str, limit: usize) -> Result<ExitCode> {
    let c = ctx.client()?;
    let id = c.resolve(IdKind::File, file_arg(id))?;
    let mut url = c.url(&["kb", &id, "audit"]);
    url.query_pairs_mut()
        .append_pair("limit", &limit.to_string());
    let v = c.get(url)?;
    show::<Vec<KbAuditEntry>>(ctx, v, "KB access log", |l| records::kb_audit(l))?;
    Ok(ExitCode::SUCCESS)
}

pub fn handler_outcomes(ctx: &Ctx, handler: &str) -> Result<ExitCode> {
    let c = ctx.client()?;
    let id = c.resolve(IdKind::Handler, handler)?;
    let v = c.get(c.url(&["handlers", &id, "outcomes"]))?;
    show::<Vec<OutcomeBrief>>(ctx, v, "outcomes", |l| records::handler_outcomes(l))?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #[test]
    fn file_args_accept_kb_links() {
        assert_eq!(super::file_arg(" kb://abc "), "abc");
        assert_eq!(super::file_arg("KB://abc"), "abc");
        assert_eq!(super::file_arg("abcd"), "abcd");
    }
}
