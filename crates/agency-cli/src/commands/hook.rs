//! `agency hook pre-tool-use` (hidden): Claude Code's `PreToolUse` hook,
//! which the daemon configures for every Claude Code agent. It reads the
//! hook's JSON on stdin (`tool_name`, `tool_input`), asks the daemon's
//! `POST /agent/tool-check` as `claude:TOOL` with the agent's token (from
//! the private file `--config` names, which the daemon writes in the run's
//! directory; else `AGENCY_TOKEN`, `AGENCY_MCP_URL`) and
//! prints the hook's decision:
//!
//! - allowed: no output, exit 0 — Claude Code's own permission rules
//!   (`--allowedTools`, `dontAsk`) still decide, so the hook only ever
//!   narrows;
//! - pending or denied: `{"hookSpecificOutput": {"hookEventName":
//!   "PreToolUse", "permissionDecision": "deny",
//!   "permissionDecisionReason": …}}` (the reason is what the model reads:
//!   "pending approval N: …"), exit 0.
//!
//! `agency hook post-tool-use` (hidden), Claude Code's `PostToolUse` hook,
//! reports how each such call ended to `POST /agent/tool-done` (a
//! `tool.ended` event); it never blocks or fails the run: any error is
//! ignored, it prints nothing and exits 0.
//!
//! It fails closed: any error (no daemon, no token, unreadable input) is a
//! deny with the reason, printed the same way and with exit status 2 (which
//! Claude Code also treats as a block, with stderr as the reason). Agency's
//! own MCP tools (`mcp__agency__*`) and extra servers' tools (`mcp__*`) are
//! not checked here: the daemon checks those itself when they reach it.

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

const URL_VAR: &str = "AGENCY_MCP_URL";
const TOKEN_VAR: &str = "AGENCY_TOKEN";
/// Largest hook input read (a Write of a large file carries its content).
const MAX_INPUT: u64 = 16 * 1024 * 1024;

pub fn pre_tool_use(config: Option<&Path>) -> Result<ExitCode> {
    match decide(config) {
        Ok(None) => Ok(ExitCode::SUCCESS),
        Ok(Some(reason)) => {
            super::emit(&format!("{}\n", deny_json(&reason)))?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            let reason = format!(
                "failed to check the tool call with Agency's daemon ({e:#}); the call is refused until the check works"
            );
            // Both channels: the JSON for a reader of stdout, stderr for
            // exit status 2.
            let _ = super::emit(&format!("{}\n", deny_json(&reason)));
            eprintln!("{reason}");
            Ok(ExitCode::from(2))
        }
    }
}

fn deny_json(reason: &str) -> Value {
    json!({
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    })
}

/// `agency hook post-tool-use`: always exit 0 (see the module doc).
pub fn post_tool_use(config: Option<&Path>) -> ExitCode {
    if let Err(e) = report(config) {
        // Claude Code shows a PostToolUse hook's stderr only in its
        // verbose mode; the run goes on either way.
        eprintln!("failed to report the tool call's end to Agency: {e:#}");
    }
    ExitCode::SUCCESS
}

fn report(config: Option<&Path>) -> Result<()> {
    let input = read_input()?;
    let Some(name) = input.get("tool_name").and_then(Value::as_str) else {
        bail!("the hook input has no tool_name");
    };
    // Agency's and extra servers' MCP tools are logged by the daemon.
    if name.starts_with("mcp__") {
        return Ok(());
    }
    let args = input.get("tool_input").cloned().unwrap_or(json!({}));
    let response = input.get("tool_response").unwrap_or(&Value::Null);
    let error = failure(response);
    let (root, token) = endpoint(config)?;
    let resp = client(Duration::from_secs(5))?
        .post(format!("{root}/agent/tool-done"))
        .bearer_auth(token.trim())
        .json(&json!({
            "tool": format!("claude:{name}"),
            "args": args,
            "ok": error.is_none(),
            "error": error,
            "call_id": input.get("tool_use_id").and_then(Value::as_str),
        }))
        .send()
        .map_err(|e| anyhow::anyhow!("{}", e.without_url()))?;
    if !resp.status().is_success() {
        bail!("HTTP {}", resp.status());
    }
    Ok(())
}

/// What went wrong, if Claude Code's `tool_response` says the call failed
/// (an `is_error` flag, an `error` field, an interrupted command).
fn failure(response: &Value) -> Option<String> {
    if response.get("is_error").and_then(Value::as_bool) == Some(true) {
        let text = response
            .get("content")
            .map(|c| c.as_str().map_or_else(|| c.to_string(), str::to_owned))
            .unwrap_or_default();
        return Some(text.chars().take(300).collect());
    }
    if let Some(e) = response.get("error").filter(|e| !e.is_null()) {
        let text = e.as_str().map_or_else(|| e.to_string(), str::to_owned);
        return Some(text.chars().take(300).collect());
    }
    if response.get("interrupted").and_then(Value::as_bool) == Some(true) {
        return Some("interrupted".to_owned());
    }
    None
}

fn read_input() -> Result<Value> {
    let mut text = String::new();
    std::io::stdin()
        .take(MAX_INPUT)
        .read_to_string(&mut text)
        .context("failed to read the hook input")?;
    serde_json::from_str(&text).context("failed to parse the hook input")
}

fn client(timeout: Duration) -> Result<reqwest::blocking::Client> {
    reqwest::blocking::Client::builder()
        .no_proxy()
        .connect_timeout(Duration::from_secs(5))
        .timeout(timeout)
        .build()
        .context("failed to build the HTTP client")
}

/// The daemon's agents' listener (no `/mcp`) and the agent's token.
fn endpoint(config: Option<&Path>) -> Result<(String, String)> {
    let (url, token) = match config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("failed to read {}", path.display()))?;
            let v: Value = serde_json::from_str(&text)
                .with_context(|| format!("failed to parse {}", path.display()))?;
            let field = |k: &str| {
                v.get(k)
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .with_context(|| format!("{} has no {k:?}", path.display()))
            };
            (field("url")?, field("token")?)
        }
        None => (
            std::env::var(URL_VAR).with_context(|| format!("{URL_VAR} is not set"))?,
            std::env::var(TOKEN_VAR).with_context(|| format!("{TOKEN_VAR} is not set"))?,
        ),
    };
    let root = url.trim_end_matches('/');
    let root = root.strip_suffix("/mcp").unwrap_or(root);
    Ok((root.to_owned(), token))
}

/// `None`: allowed; `Some(reason)`: refused with that text.
fn decide(config: Option<&Path>) -> Result<Option<String>> {
    let input = read_input()?;
    let Some(name) = input.get("tool_name").and_then(Value::as_str) else {
        bail!("the hook input has no tool_name");
    };
    if name.starts_with("mcp__") {
        return Ok(None);
    }
    let args = input.get("tool_input").cloned().unwrap_or(json!({}));
    let (root, token) = endpoint(config)?;
    let resp = client(Duration::from_secs(30))?
        .post(format!("{root}/agent/tool-check"))
        .bearer_auth(token.trim())
        .json(&json!({ "tool": format!("claude:{name}"), "args": args }))
        .send()
        .map_err(|e| anyhow::anyhow!("{}", e.without_url()))?;
    let status = resp.status();
    let body: Value = resp
        .json()
        .map_err(|e| anyhow::anyhow!("unreadable answer: {}", e.without_url()))?;
    if !status.is_success() {
        let msg = body
            .pointer("/error/message")
            .and_then(Value::as_str)
            .unwrap_or("no message");
        bail!("HTTP {status}: {msg}");
    }
    let message = body.get("message").and_then(Value::as_str).unwrap_or("");
    match body.get("decision").and_then(Value::as_str) {
        Some("allow") => Ok(None),
        Some("pending") | Some("deny") => Ok(Some(message.to_string())),
        other => bail!("unknown decision {other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What Claude Code's `tool_response` says of a call's end.
    #[test]
    fn failure_reads_the_tool_response() {
        let cases = [
            (
                json!({"stdout": "a", "stderr": "", "interrupted": false}),
                None,
            ),
            (json!({"interrupted": true}), Some("interrupted")),
            (
                json!({"is_error": true, "content": "no such file"}),
                Some("no such file"),
            ),
            (json!({"error": "denied"}), Some("denied")),
            (json!({"error": null, "filePath": "/x"}), None),
            (json!("plain text result"), None),
            (Value::Null, None),
        ];
        for (response, want) in cases {
            assert_eq!(failure(&response).as_deref(), want, "{response}");
        }
        let long = json!({"is_error": true, "content": "x".repeat(1000)});
        assert_eq!(failure(&long).unwrap().len(), 300);
    }
}
