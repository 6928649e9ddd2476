//! `agency transcript RUN --follow` and `agency logs RUN --follow`: a live
//! run's transcript or output as it is written, read from the daemon's
//! streams (`GET /v1/runs/{agent}/transcript/stream`, `…/log/stream`,
//! Server-Sent Events), printed as the commands print a stored one: the
//! transcript replayed (`--json`: its events, one per line), the output
//! with control characters escaped (`--json`: one `{"agent", "text"}`
//! piece per line). A run that has ended is printed whole.
//!
//! Exit 0 when the run ends (the daemon's `end` event), on Ctrl-C, and when
//! the reader closes stdout; 1 when the daemon refuses or the stream is
//! cut before the run ended. Nothing reconnects: a daemon that stopped
//! ended its runs.

use std::io::Read;
use std::process::ExitCode;

use agency_api::{FollowEnd, RunLogChunk};
use agency_sse::SseParser;
use anyhow::{Context, Result, bail};
use serde_json::Value;

use super::{Ctx, emit};
use crate::client::IdKind;
use crate::{replay, safe_text};

pub fn transcript(ctx: &Ctx, run: &str) -> Result<ExitCode> {
    let c = ctx.client()?;
    let agent = c.resolve(IdKind::Agent, run)?;
    super::watch::exit_on_ctrl_c();
    let body = c.open_stream(c.url(&["runs", &agent, "transcript", "stream"]), None)?;
    let json = ctx.json;
    follow(body, &agent, "transcript", |data| {
        let ev: Value = serde_json::from_str(data)
            .with_context(|| format!("failed to read a transcript event of the stream: {data}"))?;
        if json {
            // The raw event, one per line, as `agency transcript --json`.
            emit(&format!("{}\n", safe_text::json(&ev.to_string())))
        } else {
            emit(&replay::replay_event(&ev))
        }
    })
}

pub fn logs(ctx: &Ctx, run: &str) -> Result<ExitCode> {
    let c = ctx.client()?;
    let agent = c.resolve(IdKind::Agent, run)?;
    super::watch::exit_on_ctrl_c();
    let body = c.open_stream(c.url(&["runs", &agent, "log", "stream"]), None)?;
    let json = ctx.json;
    let mut line_open = false;
    let code = follow(body, &agent, "output", |data| {
        let piece: RunLogChunk = serde_json::from_str(data)
            .with_context(|| format!("failed to read a piece of output of the stream: {data}"))?;
        if json {
            let text = serde_json::to_string(&piece).unwrap_or_default();
            return emit(&format!("{}\n", safe_text::json(&text)));
        }
        if !piece.text.is_empty() {
            line_open = !piece.text.ends_with('\n');
        }
        emit(&safe_text::block(&piece.text))
    })?;
    // The output ended in the middle of a line: end it, as `agency logs`.
    if line_open && !json {
        emit("\n")?;
    }
    Ok(code)
}

/// Read the stream, handing each piece's data to `each`, until `end`.
fn follow(
    mut body: impl Read,
    agent: &str,
    what: &str,
    mut each: impl FnMut(&str) -> Result<()>,
) -> Result<ExitCode> {
    let mut parser = SseParser::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match body.read(&mut buf) {
            Ok(0) | Err(_) => bail!(
                "failed to follow the {what} of agent {agent}: the daemon's stream ended before the run did (did the daemon stop?); run the command again"
            ),
            Ok(n) => n,
        };
        let events = parser
            .push(&buf[..n])
            .context("failed to read the daemon's stream")?;
        for ev in events {
            match ev.event.as_str() {
                "error" => {
                    let message = serde_json::from_str::<Value>(&ev.data)
                        .ok()
                        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
                        .unwrap_or(ev.data);
                    bail!("{}", safe_text::line(&message));
                }
                "end" => {
                    if let Ok(end) = serde_json::from_str::<FollowEnd>(&ev.data)
                        && let Some(note) = end.note
                    {
                        eprintln!("{}", safe_text::line(&note));
                    }
                    return Ok(ExitCode::SUCCESS);
                }
                _ => each(&ev.data)?,
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn pieces_are_handed_on_until_the_end_event() {
        let body = "data: {\"n\":1}\n\n: keep-alive\n\ndata: {\"n\":2}\n\nevent: end\ndata: {\"agent\":\"a\"}\n\ndata: {\"n\":3}\n\n";
        let mut seen = Vec::new();
        let code = follow(body.as_bytes(), "a", "transcript", |d| {
            seen.push(d.to_owned());
            Ok(())
        })
        .unwrap();
        assert_eq!(code, ExitCode::SUCCESS);
        assert_eq!(seen, ["{\"n\":1}", "{\"n\":2}"], "nothing after the end");
    }

    #[test]
    fn a_stream_cut_before_the_end_or_an_error_event_fails() {
        let cut = follow("data: {}\n\n".as_bytes(), "a", "output", |_| Ok(()));
        assert!(
            cut.unwrap_err()
                .to_string()
                .contains("ended before the run did"),
        );
        let refused = "event: error\ndata: {\"error\":{\"kind\":\"failed\",\"message\":\"failed to follow: \\u001b[2J no\"}}\n\n";
        let e = follow(refused.as_bytes(), "a", "transcript", |_| Ok(())).unwrap_err();
        assert!(e.to_string().starts_with("failed to follow: "), "{e}");
        assert!(!e.to_string().contains('\x1b'), "{e:?}");
    }
}
