//! `agency logs RUN`: the captured stdout/stderr of an agent run. The text
//! is the agent's, so untrusted: every control character except newline and
//! tab is printed escaped (`\x1b`, `\u{202e}`), so no terminal escape
//! (clipboard writes, cursor movement, forged lines) reaches the terminal.

use std::process::ExitCode;

use agency_service::RunLog;
use anyhow::Result;

use super::{Ctx, emit, emit_json};
use crate::client::{IdKind, decode};

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
            "no output is kept for run {agent} yet: it is still running (its output is stored when it ends), was reaped after a daemon restart, or ran before logs were kept"
        );
    } else if log.text.is_empty() {
        eprintln!("run {agent} printed nothing");
    } else {
        let mut text = visible(&log.text);
        if !text.ends_with('\n') {
            text.push('\n');
        }
        emit(&text)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `text` with every control character but `\n` and `\t` escaped, and the
/// Unicode controls that reorder or hide text (bidi overrides, isolates)
/// too.
pub(crate) fn visible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '\n' | '\t' => out.push(ch),
            c if (c as u32) < 0x80 && c.is_control() => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control()
                || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}') =>
            {
                out.push_str(&format!("\\u{{{:x}}}", c as u32));
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::visible;

    #[test]
    fn control_characters_are_made_visible() {
        assert_eq!(
            visible("ok\tline\n\x1b]52;c;ZXZpbA==\x07\rforged\u{202e}\u{9b}"),
            "ok\tline\n\\x1b]52;c;ZXZpbA==\\x07\\x0dforged\\u{202e}\\u{9b}"
        );
    }
}
