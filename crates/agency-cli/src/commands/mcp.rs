//! `agency mcp pins`, `agency mcp approve-tool SERVER TOOL [--reject]`,
//! `agency mcp approve ID`, `agency mcp reject ID`: the user's view of the
//! pinned tool definitions of extra MCP servers and the decisions on the
//! quarantined ones (REST `/v1/mcp/…` on the admin socket). Approving
//! shows what changed, as a line diff of the two definitions.

use std::fmt::Write as _;
use std::process::ExitCode;

use agency_api::{McpPinChange, McpPinsReport};
use anyhow::Result;
use serde_json::{Value, json};

use super::{Ctx, emit, emit_json, show};
use crate::client::decode;

pub fn pins(ctx: &Ctx) -> Result<ExitCode> {
    let c = ctx.client()?;
    let v = c.get(c.url(&["mcp", "pins"]))?;
    show::<McpPinsReport>(ctx, v, "MCP pins", render_pins)?;
    Ok(ExitCode::SUCCESS)
}

/// Approve (or reject) the change waiting on the definition `tool` of
/// `server` now presents, showing the diff first.
pub fn approve_tool(ctx: &Ctx, server: &str, tool: &str, reject: bool) -> Result<ExitCode> {
    let c = ctx.client()?;
    let v = c.get(c.url(&["mcp", "pins", server, tool, "change"]))?;
    let change: McpPinChange = decode(v, "MCP tool change")?;
    decide(ctx, &change.id, reject, Some(&change))
}

/// Approve (or reject) change `id`, showing its diff first.
pub fn decide_id(ctx: &Ctx, id: &str, reject: bool) -> Result<ExitCode> {
    decide(ctx, id, reject, None)
}

fn decide(ctx: &Ctx, id: &str, reject: bool, known: Option<&McpPinChange>) -> Result<ExitCode> {
    let c = ctx.client()?;
    let before = match known {
        Some(ch) => ch.clone(),
        None => decode(c.get(c.url(&["mcp", "changes", id]))?, "MCP tool change")?,
    };
    let verb = if reject { "reject" } else { "approve" };
    let v = c.post(c.url(&["mcp", "changes", id, verb]), &json!({}))?;
    if ctx.json {
        emit_json(&v)?;
        return Ok(ExitCode::SUCCESS);
    }
    let after: McpPinChange = decode(v, "MCP tool change")?;
    let mut out = render_change(&before);
    let _ = writeln!(
        out,
        "{} change {} of tool {} of MCP server {}",
        if reject { "rejected" } else { "approved" },
        after.id,
        after.tool,
        after.server
    );
    emit(&out)?;
    Ok(ExitCode::SUCCESS)
}

fn render_pins(r: &McpPinsReport) -> String {
    let mut out = String::new();
    if r.pins.is_empty() {
        out.push_str(
            "no MCP tool is pinned yet (a server's tools are pinned at its first listing)\n",
        );
    }
    for p in &r.pins {
        let _ = writeln!(
            out,
            "{:<12} {}/{} ({})",
            p.state,
            p.server,
            p.tool,
            p.approved_hash
                .as_deref()
                .map_or("never approved".to_owned(), |h| format!(
                    "pinned {}",
                    &h[..h.len().min(12)]
                ))
        );
    }
    if !r.pending.is_empty() {
        let _ = writeln!(out, "\nchanges waiting for your decision:");
        for ch in &r.pending {
            let _ = writeln!(
                out,
                "{}  {}/{}  {}  (agency mcp approve-tool {} {})",
                ch.id,
                ch.server,
                ch.tool,
                if ch.old.is_none() {
                    "new tool"
                } else {
                    "changed"
                },
                ch.server,
                ch.tool
            );
        }
    }
    out
}

/// A change as the user reads it before deciding: its id and a line diff
/// of the pretty-printed definitions (`-` approved, `+` new).
pub fn render_change(ch: &McpPinChange) -> String {
    let mut out = format!(
        "change {} of tool {} of MCP server {} ({}):\n",
        ch.id,
        ch.tool,
        ch.server,
        if ch.old.is_none() {
            "a tool that appeared after the first listing"
        } else {
            "its definition differs from the approved one"
        }
    );
    let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_default();
    let old = ch.old.as_ref().map(pretty).unwrap_or_default();
    let new = pretty(&ch.new);
    for line in diff(&old, &new) {
        out.push_str(&crate::safe_text::line(&line));
        out.push('\n');
    }
    out
}

/// A line diff (longest common subsequence): `  ` same, `- ` only in
/// `old`, `+ ` only in `new`. Definitions are small; O(n·m) is fine.
fn diff(old: &str, new: &str) -> Vec<String> {
    let a: Vec<&str> = if old.is_empty() {
        Vec::new()
    } else {
        old.lines().collect()
    };
    let b: Vec<&str> = new.lines().collect();
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0usize; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            out.push(format!("  {}", a[i]));
            i += 1;
            j += 1;
        } else if i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push(format!("- {}", a[i]));
            i += 1;
        } else {
            out.push(format!("+ {}", b[j]));
            j += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::diff;

    #[test]
    fn the_diff_marks_removed_and_added_lines() {
        let d = diff("a\nb\nc", "a\nB\nc\nd");
        assert_eq!(d, ["  a", "- b", "+ B", "  c", "+ d"]);
        assert_eq!(diff("", "x"), ["+ x"]);
    }
}
