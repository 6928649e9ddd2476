//! `token mint` and `token revoke`: bearer tokens for external MCP clients.

use std::path::Path;
use std::process::ExitCode;

use agency_api::MintedToken;
use anyhow::{Context, Result};
use serde_json::{Value, json};

use super::{Ctx, emit, emit_json};
use crate::client::{IdKind, decode};

/// The token alone on stdout (for `> token-file`); what it is, on stderr.
pub fn mint(ctx: &Ctx, handler: &str, workspace: Option<&Path>) -> Result<ExitCode> {
    // Resolved here: the daemon's working directory is not the user's.
    let workspace = workspace
        .map(|w| {
            std::fs::canonicalize(w)
                .with_context(|| format!("failed to find the workspace directory {}", w.display()))
        })
        .transpose()?;
    let c = ctx.client()?;
    let h = c.resolve(IdKind::Handler, handler)?;
    let mut body = json!({ "handler": h });
    if let Some(w) = workspace {
        body["workspace"] = json!(w);
    }
    let v = c.post(c.url(&["tokens"]), &body)?;
    let t: MintedToken = decode(v.clone(), "minted token")?;
    if ctx.json {
        emit_json(&v)?;
    } else {
        emit(&format!("{}\n", t.token))?;
    }
    eprintln!(
        "minted a token for agent {} of handler {}; it is shown only once. Revoke it with `agency token revoke {}`",
        t.agent, t.handler, t.agent
    );
    Ok(ExitCode::SUCCESS)
}

pub fn revoke(ctx: &Ctx, agent: &str) -> Result<ExitCode> {
    let c = ctx.client()?;
    let a = c.resolve(IdKind::Agent, agent)?;
    let v = c.delete(c.url(&["tokens", &a]))?;
    if ctx.json {
        emit_json(&v)?;
    } else if v.get("revoked").and_then(Value::as_bool).unwrap_or(false) {
        emit(&format!(
            "revoked the token of agent {a}; the agent has ended\n"
        ))?;
    } else {
        emit(&format!(
            "agent {a} had no live token; the agent has ended\n"
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}
