//! `agency claude-warm` (hidden): runs Claude Code warm
//! for the daemon's `claude-code` runtime. Claude Code runs in its
//! stream-json input mode (`--input-format stream-json`), a user message a
//! line on its stdin; this program writes the first message, copies
//! Claude Code's stdout (the stream-json transcript) to the transcript
//! file, and when a turn ends (its `result` event) waits for mail in
//! Agency's `mail_wait` — no model call — writing the next user message
//! when mail comes, and closing Claude Code's stdin (which ends its
//! session) when the keep-warm time has passed or the daemon released the
//! agent. It runs inside the agent's sandbox and process group, as the
//! agent; its exit status is Claude Code's.

use std::process::{ExitCode, Stdio};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::cli::ClaudeWarmArgs;

/// One stream-json input line: a user message.
fn user_line(text: &str) -> String {
    let mut line = json!({
        "type": "user",
        "message": { "role": "user", "content": [ { "type": "text", "text": text } ] }
    })
    .to_string();
    line.push('\n');
    line
}

pub fn run(a: &ClaudeWarmArgs) -> Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")?;
    let code = rt.block_on(drive(a))?;
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(1)))
}

async fn drive(a: &ClaudeWarmArgs) -> Result<i32> {
    let Some((program, args)) = a.command.split_first() else {
        bail!("failed to run Claude Code warm: no command after --");
    };
    // The token reaches Claude Code only as its model key (already in its
    // environment); this program needs it for `mail_wait`.
    let token = std::env::var("AGENCY_TOKEN")
        .context("failed to read the agent's token from AGENCY_TOKEN")?;
    let first = std::fs::read_to_string(&a.message)
        .with_context(|| format!("failed to read the first message {}", a.message.display()))?;
    let mut transcript = tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&a.transcript)
        .await
        .with_context(|| format!("failed to open the transcript {}", a.transcript.display()))?;
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .env_remove("AGENCY_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("failed to run {program}"))?;
    let mut stdin = child.stdin.take();
    let stdout = child
        .stdout
        .take()
        .context("failed to read Claude Code's output")?;
    write(&mut stdin, &user_line(&first)).await;
    let mut lines = BufReader::new(stdout).lines();
    let mut waiter: Option<agency_agent::MailWaiter> = None;
    let mut log = |event: &str, v: Value| eprintln!("agency claude-warm: {event} {v}");
    while let Some(line) = lines
        .next_line()
        .await
        .context("failed to read Claude Code's output")?
    {
        transcript
            .write_all(format!("{line}\n").as_bytes())
            .await
            .with_context(|| {
                format!("failed to write the transcript {}", a.transcript.display())
            })?;
        if stdin.is_none() || !is_turn_end(&line) {
            continue;
        }
        // The turn is over: flush what it wrote, then wait for mail.
        let _ = transcript.flush().await;
        if waiter.is_none() {
            match agency_agent::MailWaiter::connect(&a.mcp_url, &token).await {
                Ok(w) => waiter = Some(w),
                Err(e) => log(
                    "warm_end",
                    json!({ "why": "failed to connect", "error": e.to_string() }),
                ),
            }
        }
        let news = match waiter.as_mut() {
            Some(w) => w.wait(a.keep_warm_ms, &mut log).await,
            None => None,
        };
        match news {
            Some(text) => write(&mut stdin, &user_line(&text)).await,
            // Closing stdin ends Claude Code's session.
            None => drop(stdin.take()),
        }
    }
    drop(stdin);
    if let Some(w) = waiter {
        w.close().await;
    }
    let _ = transcript.flush().await;
    let status = child
        .wait()
        .await
        .context("failed to wait for Claude Code")?;
    Ok(status.code().unwrap_or(1))
}

/// A `result` event ends a turn.
fn is_turn_end(line: &str) -> bool {
    serde_json::from_str::<Value>(line).is_ok_and(|v| v["type"] == "result")
}

/// Write to Claude Code's stdin; if it is gone, so is the session (its
/// exit ends the loop).
async fn write(stdin: &mut Option<tokio::process::ChildStdin>, text: &str) {
    if let Some(s) = stdin.as_mut()
        && (s.write_all(text.as_bytes()).await.is_err() || s.flush().await.is_err())
    {
        *stdin = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_messages_are_one_stream_json_line() {
        let l = user_line("hi\nthere");
        assert!(l.ends_with('\n') && l.matches('\n').count() == 1, "{l}");
        let v: Value = serde_json::from_str(l.trim()).unwrap_or(Value::Null);
        assert_eq!(v["type"], "user");
        assert_eq!(v["message"]["content"][0]["text"], "hi\nthere");
        assert!(is_turn_end(r#"{"type":"result","subtype":"success"}"#));
        assert!(!is_turn_end(r#"{"type":"assistant"}"#));
        assert!(!is_turn_end("not json"));
    }
}
