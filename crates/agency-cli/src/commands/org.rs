//! The organisation: `handlers`, `outcomes`, `outcome show`, `agents`,
//! `audit`, `stop`, and the user's capability commands `grant`, `caps` and
//! `revoke`.

use std::process::ExitCode;

use agency_api::{AuditEntry, Capability, OutcomeView};
use agency_api::{HandlerView, StopReport, Subtree};
use anyhow::{Result, bail};

use super::{Ctx, show};
use crate::client::IdKind;
use crate::output::{self, AgentsView};

pub fn handlers(ctx: &Ctx) -> Result<ExitCode> {
    let c = ctx.client()?;
    let v = c.get(c.url(&["handlers"]))?;
    show(ctx, v, "handler list", |l: &Vec<HandlerView>| {
        output::handlers(l)
    })?;
    Ok(ExitCode::SUCCESS)
}

pub fn outcomes(ctx: &Ctx, root: Option<&str>, limit: usize) -> Result<ExitCode> {
    let c = ctx.client()?;
    let mut url = c.url(&["outcomes"]);
    let root = root.map(|r| c.resolve(IdKind::Outcome, r)).transpose()?;
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("limit", &limit.to_string());
        if let Some(r) = &root {
            q.append_pair("root", r);
        }
    }
    let v = c.get(url)?;
    show(ctx, v, "outcome tree", |s: &Subtree| output::outcomes(s))?;
    Ok(ExitCode::SUCCESS)
}

pub fn outcome_show(ctx: &Ctx, id: &str) -> Result<ExitCode> {
    let c = ctx.client()?;
    let id = c.resolve(IdKind::Outcome, id)?;
    let v = c.get(c.url(&["outcomes", &id]))?;
    show(ctx, v, "outcome", |o: &OutcomeView| output::outcome(o))?;
    Ok(ExitCode::SUCCESS)
}

pub fn agents(ctx: &Ctx, limit: usize) -> Result<ExitCode> {
    let c = ctx.client()?;
    let mut url = c.url(&["agents"]);
    url.query_pairs_mut()
        .append_pair("limit", &limit.to_string());
    let v = c.get(url)?;
    show(ctx, v, "agent list", |a: &AgentsView| output::agents(a))?;
    Ok(ExitCode::SUCCESS)
}

pub fn audit(ctx: &Ctx, handler: &str) -> Result<ExitCode> {
    let c = ctx.client()?;
    let id = c.resolve(IdKind::Handler, handler)?;
    let v = c.get(c.url(&["handlers", &id, "audit"]))?;
    show(ctx, v, "audit log", |l: &Vec<AuditEntry>| output::audit(l))?;
    Ok(ExitCode::SUCCESS)
}

pub fn stop(ctx: &Ctx, handler: &str) -> Result<ExitCode> {
    let c = ctx.client()?;
    let id = c.resolve(IdKind::Handler, handler)?;
    let v = c.post(c.url(&["handlers", &id, "stop"]), &serde_json::json!({}))?;
    show(ctx, v, "stop report", |r: &StopReport| output::stop(r))?;
    Ok(ExitCode::SUCCESS)
}

pub fn grant(ctx: &Ctx, a: &crate::cli::GrantArgs) -> Result<ExitCode> {
    let Some((kind, key)) = a.resource.split_once(':') else {
        bail!(
            "failed to parse resource {:?}: write KIND:KEY, e.g. mcp_server:github, repo:site, egress:api.github.com, tool:WeatherTool or kb:<file-id>",
            a.resource
        );
    };
    let c = ctx.client()?;
    let id = c.resolve(IdKind::Handler, &a.handler)?;
    // A file id may be given as a prefix, like every id on the command line.
    let key = if kind == "kb" {
        c.resolve(IdKind::File, key)?
    } else {
        key.to_owned()
    };
    let mut body = serde_json::json!({
        "kind": kind, "key": key, "level": a.level, "delegatable": a.delegatable,
    });
    if let Some(o) = &a.outcome {
        body["outcome"] = serde_json::Value::String(c.resolve(IdKind::Outcome, o)?);
    }
    if let Some(ap) = &a.approval {
        body["approval"] = serde_json::Value::String(ap.clone());
    }
    let v = c.post(c.url(&["handlers", &id, "capabilities"]), &body)?;
    show(ctx, v, "grant", |g: &serde_json::Value| {
        format!(
            "granted {} {kind}:{key} to handler {id} (capability {})\n",
            a.level, g["capability"]
        )
    })?;
    Ok(ExitCode::SUCCESS)
}

pub fn caps(ctx: &Ctx, handler: &str) -> Result<ExitCode> {
    let c = ctx.client()?;
    let id = c.resolve(IdKind::Handler, handler)?;
    let v = c.get(c.url(&["handlers", &id, "capabilities"]))?;
    show(ctx, v, "capability list", |l: &Vec<Capability>| {
        output::capabilities(l)
    })?;
    Ok(ExitCode::SUCCESS)
}

pub fn revoke(ctx: &Ctx, capability: &str) -> Result<ExitCode> {
    let c = ctx.client()?;
    let v = c.delete(c.url(&["capabilities", capability]))?;
    show(ctx, v, "revocation", |r: &serde_json::Value| {
        let ids: Vec<String> = r["revoked"]
            .as_array()
            .map(|a| a.iter().map(|i| i.to_string()).collect())
            .unwrap_or_default();
        format!("revoked capabilities {}\n", ids.join(", "))
    })?;
    Ok(ExitCode::SUCCESS)
}
