//! `agency logs RUN`: the captured stdout/stderr of an agent run. The text
//! is the agent's, so untrusted: every control character except newline and
//! tab is printed escaped (`\u{1b}`, `\u{202e}`; `safe_text::block`), so no terminal escape
//! (clipboard writes, cursor movement, forged lines) reaches the terminal.

use std::process::ExitCode;

use agency_api::RunLog;
use anyhow::Result;

use super::{Ctx, emit, emit_json};
use crate::client::{IdKind, decode};
use crate::safe_text;

pub fn logs(ctx: &Ctx, run: &str) -> Result<ExitCode> {
    let c = ctx.client()?;
    let agent = c.resolve(IdKind::Agent, run)?;
    let v = c.get(c.url(&["runs", &agent, "log"]))?;
    if ctx.json {
        emit_json(&v)?;
        return Ok(ExitCode::SUCCESS);
    }
    let log: RunLog = decode(v, "run log")?;
    if !log.captured {
        eprintln!(
            "no output is kept for run {agent} yet: it is still running (its output is stored when it ends; `agency logs {agent} --follow` shows it live), was reaped after a daemon restart, or ran before logs were kept"
        );
    } else if log.text.is_empty() {
        eprintln!("run {agent} printed nothing");
    } else {
        let mut text = safe_text::block(&log.text);
        if !text.ends_with('\n') {
            text.push('\n');
        }
        emit(&text)?;
    }
    Ok(ExitCode::SUCCESS)
}
