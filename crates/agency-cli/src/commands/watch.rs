//! `agency watch`: the event log, live. Reads the daemon's event stream
//! (`GET /v1/events/stream`, Server-Sent Events) and prints one line per
//! event; `--json` prints each event as the API gives it, one per line.
//!
//! A lost stream (the daemon restarting) is reopened with `Last-Event-ID`
//! set to the last event printed, so nothing is shown twice or skipped.
//! Ctrl-C ends it with status 0, and so does a reader that closed stdout
//! (`agency watch | head`).

use std::io::{IsTerminal, Read};
use std::process::ExitCode;
use std::time::Duration;

use agency_api::{Event, EventsPage};
use agency_sse::SseParser;
use anyhow::{Context, Result};

use super::{Ctx, emit};
use crate::cli::WatchArgs;
use crate::client::{Client, ClientError, IdKind, decode};
use crate::safe_text;

/// How far back `--no-follow` reads when no `--since` is given.
const NO_FOLLOW_DEFAULT_MS: i64 = 3_600_000;
/// Events per page for `--no-follow`.
const PAGE: usize = 1000;

pub fn watch(ctx: &Ctx, a: &WatchArgs) -> Result<ExitCode> {
    let c = ctx.client()?;
    let handler = match &a.handler {
        Some(h) => Some(c.resolve(IdKind::Handler, h)?),
        None => None,
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let since = a
        .since
        .or(a.no_follow.then_some(NO_FOLLOW_DEFAULT_MS))
        .map(|ms| now.saturating_sub(ms));
    let style = Style {
        json: ctx.json,
        colour: !ctx.json
            && std::io::stdout().is_terminal()
            && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
    };
    let query = Query {
        handler,
        subtree: a.subtree,
        kinds: a.kind.clone(),
        since,
    };
    if a.no_follow {
        return print_pages(&c, &query, style);
    }
    exit_on_ctrl_c();
    follow(&c, &query, style)
}

#[derive(Debug, Clone)]
struct Query {
    handler: Option<String>,
    subtree: bool,
    kinds: Vec<String>,
    since: Option<i64>,
}

impl Query {
    fn url(&self, c: &Client, path: &[&str], after: Option<i64>) -> reqwest::Url {
        let mut url = c.url(path);
        {
            let mut q = url.query_pairs_mut();
            if let Some(h) = &self.handler {
                q.append_pair("handler", h);
            }
            if self.subtree {
                q.append_pair("subtree", "true");
            }
            if !self.kinds.is_empty() {
                q.append_pair("kind", &self.kinds.join(","));
            }
            if let Some(s) = self.since {
                q.append_pair("since", &s.to_string());
            }
            if let Some(a) = after {
                q.append_pair("after", &a.to_string());
            }
        }
        url
    }
}

/// `--no-follow`: every matching event recorded so far, then exit.
fn print_pages(c: &Client, q: &Query, style: Style) -> Result<ExitCode> {
    let mut after = 0;
    loop {
        let mut url = q.url(c, &["events"], Some(after));
        url.query_pairs_mut()
            .append_pair("limit", &PAGE.to_string());
        let page: EventsPage = decode(c.get(url)?, "events page")?;
        for e in &page.events {
            emit(&style.line(e))?;
        }
        if page.events.len() < PAGE {
            return Ok(ExitCode::SUCCESS);
        }
        after = page.next;
    }
}

/// Follow the stream until Ctrl-C, reconnecting when it drops.
fn follow(c: &Client, q: &Query, style: Style) -> Result<ExitCode> {
    let mut last: Option<i64> = None;
    let mut waiting = false;
    loop {
        let opened = c.open_stream(q.url(c, &["events", "stream"], None), last);
        let body = match opened {
            Ok(b) => b,
            // The daemon is restarting (or gone): wait for it, once said.
            Err(e) if e.downcast_ref::<ClientError>().is_some_and(is_no_daemon) => {
                if !waiting {
                    eprintln!("agency watch: {e}; waiting for it to come back (Ctrl-C to stop)");
                    waiting = true;
                }
                std::thread::sleep(Duration::from_secs(1));
                continue;
            }
            Err(e) => return Err(e),
        };
        if waiting {
            eprintln!("agency watch: reconnected");
            waiting = false;
        }
        match read_stream(body, style, &mut last)? {
            Ended::Refused(message) => anyhow::bail!("{message}"),
            Ended::Dropped => {
                eprintln!("agency watch: the daemon's stream ended; reconnecting");
                std::thread::sleep(Duration::from_millis(500));
            }
        }
    }
}

enum Ended {
    /// The connection closed: reconnect.
    Dropped,
    /// The daemon ended the stream with an error event.
    Refused(String),
}

/// Print the events of one connection; `last` follows the last one shown.
fn read_stream(mut body: impl Read, style: Style, last: &mut Option<i64>) -> Result<Ended> {
    let mut parser = SseParser::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match body.read(&mut buf) {
            Ok(0) | Err(_) => return Ok(Ended::Dropped),
            Ok(n) => n,
        };
        let events = parser
            .push(&buf[..n])
            .context("failed to read the daemon's event stream")?;
        for ev in events {
            if ev.event == "error" {
                let message = serde_json::from_str::<serde_json::Value>(&ev.data)
                    .ok()
                    .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
                    .unwrap_or(ev.data);
                return Ok(Ended::Refused(message));
            }
            let e: Event = serde_json::from_str(&ev.data)
                .with_context(|| format!("failed to read an event of the stream: {}", ev.data))?;
            // A reconnect resumes after `last`: never print one twice.
            if last.is_some_and(|l| e.seq <= l) {
                continue;
            }
            emit(&style.line(&e))?;
            *last = Some(e.seq);
        }
    }
}

fn is_no_daemon(e: &ClientError) -> bool {
    matches!(e, ClientError::NoDaemon { .. })
}

/// Ctrl-C is how a watch (or a follow) ends: status 0, not the signal's
/// 130.
pub(super) fn exit_on_ctrl_c() {
    std::thread::spawn(|| {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        else {
            return;
        };
        if rt.block_on(tokio::signal::ctrl_c()).is_ok() {
            std::process::exit(0);
        }
    });
}

/// How events are printed.
#[derive(Debug, Clone, Copy)]
struct Style {
    json: bool,
    colour: bool,
}

impl Style {
    fn line(&self, e: &Event) -> String {
        if self.json {
            // One object per line: the API's event, unchanged.
            return format!(
                "{}\n",
                safe_text::json(&serde_json::to_string(e).unwrap_or_default())
            );
        }
        let time = e.at.to_rfc3339().get(11..19).unwrap_or_default().to_owned();
        let who = match (&e.handler, &e.handler_title) {
            (Some(h), Some(t)) => format!("{} {}", short(&h.to_string()), safe_text::line(t)),
            (Some(h), None) => short(&h.to_string()),
            (None, _) => "agency".to_owned(),
        };
        let kind = e.kind.as_str();
        let summary = safe_text::line(&e.summary);
        if !self.colour {
            return format!("{time}  {who}  {kind}  {summary}\n");
        }
        let colour = match e.kind.family() {
            "mail" => "36",
            "outcome" => "32",
            "agent" => "35",
            "approval" | "budget" => "33",
            "handler" if kind == "handler.stalled" => "31",
            "lease" if kind == "lease.lost" => "31",
            "model_call" => "34",
            "tool" => "94",
            _ => "37",
        };
        format!(
            "\x1b[2m{time}\x1b[0m  \x1b[1m{who}\x1b[0m  \x1b[{colour}m{kind}\x1b[0m  {summary}\n"
        )
    }
}

fn short(id: &str) -> String {
    id.chars().take(8).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use agency_core::Timestamp;

    fn event(kind: &str, title: Option<&str>, summary: &str) -> Event {
        Event {
            seq: 7,
            at: Timestamp(1_767_225_600_000 + 3_723_000),
            kind: kind.into(),
            handler: title.map(|_| agency_core::HandlerId(uuid::Uuid::from_u128(0xabcdef12 << 96))),
            handler_title: title.map(str::to_owned),
            agent: None,
            outcome: None,
            summary: summary.to_owned(),
            data: serde_json::json!({}),
        }
    }

    #[test]
    fn plain_lines_show_time_handler_kind_and_what_happened() {
        let plain = Style {
            json: false,
            colour: false,
        };
        insta::assert_snapshot!(
            plain.line(&event("mail.sent", Some("Write the report"), "mail from the user to \"Write the report\": \"hi\"")),
            @r#"01:02:03  abcdef12 Write the report  mail.sent  mail from the user to "Write the report": "hi""#
        );
        insta::assert_snapshot!(
            plain.line(&event("agency.answered", None, "agency \"x\" answered")),
            @r#"01:02:03  agency  agency.answered  agency "x" answered"#
        );
    }

    #[test]
    fn text_agents_wrote_cannot_reach_the_terminal_as_control_codes() {
        let plain = Style {
            json: false,
            colour: true,
        };
        let line = plain.line(&event(
            "outcome.created",
            Some("t\x1b[2Jx"),
            "s\x1b]0;pwned\x07\nfake",
        ));
        assert!(
            !line.contains("\x1b[2J") && !line.contains("\x1b]0"),
            "{line:?}"
        );
        assert_eq!(line.matches('\n').count(), 1, "one line: {line:?}");
    }

    #[test]
    fn json_lines_are_the_api_event_one_per_line() {
        let json = Style {
            json: true,
            colour: false,
        };
        let line = json.line(&event("tool.called", Some("a\nb"), "kb_read ok"));
        assert_eq!(line.matches('\n').count(), 1, "{line:?}");
        let back: Event = serde_json::from_str(line.trim_end()).unwrap();
        assert_eq!(back.seq, 7);
        assert_eq!(back.kind, "tool.called");
        assert_eq!(back.handler_title.as_deref(), Some("a\nb"));
    }

    #[test]
    fn a_resumed_stream_prints_nothing_twice() {
        let body = "id: 1\ndata: {\"seq\":1,\"at\":0,\"kind\":\"mail.sent\",\"summary\":\"one\",\"data\":{}}\n\n\
                    id: 2\ndata: {\"seq\":2,\"at\":0,\"kind\":\"mail.sent\",\"summary\":\"two\",\"data\":{}}\n\n";
        let mut last = Some(1);
        let ended = read_stream(
            body.as_bytes(),
            Style {
                json: false,
                colour: false,
            },
            &mut last,
        )
        .unwrap();
        assert!(matches!(ended, Ended::Dropped));
        assert_eq!(last, Some(2), "the second only was printed");
    }

    #[test]
    fn an_error_event_ends_the_stream_with_its_message() {
        let body = "event: error\ndata: {\"error\":{\"kind\":\"unauthorized\",\"message\":\"failed to read events: no\"}}\n\n";
        let mut last = None;
        match read_stream(
            body.as_bytes(),
            Style {
                json: false,
                colour: false,
            },
            &mut last,
        )
        .unwrap()
        {
            Ended::Refused(m) => assert_eq!(m, "failed to read events: no"),
            Ended::Dropped => panic!("an error event must end the stream"),
        }
    }
}
