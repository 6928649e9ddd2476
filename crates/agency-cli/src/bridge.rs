//! `agency mcp-stdio`: a bridge for MCP clients that only speak stdio.
//! Newline-delimited JSON-RPC from stdin is POSTed to the daemon's
//! streamable-HTTP endpoint (`/mcp`) with the agent's bearer token, and
//! every JSON-RPC message that comes back — plain JSON or an SSE stream —
//! is written to stdout, one per line.
//!
//! `initialize` is awaited (its answer carries the session id and protocol
//! version every later request needs), and notifications are sent in stdin
//! order; every other request is sent and answered on its own thread, so a
//! slow tool call (a `mail_wait` holds its request for minutes) does not
//! hold up the next request.
//!
//! Why not rmcp's stdio and streamable-HTTP transports: they are the two
//! ends of a typed client or server, which answer `initialize` themselves
//! and parse every message into the protocol version rmcp knows. A bridge
//! must pass the client's messages through unchanged (its capabilities,
//! its protocol version, methods newer than rmcp) and turn the daemon's
//! HTTP refusals into JSON-RPC errors that name the cause; so it forwards
//! bytes and reads the answers with `agency-sse`.

use std::io::{BufRead, Read};
use std::path::Path;
use std::process::ExitCode;
use std::thread::JoinHandle;

use agency_config::Home;
use agency_sse::{SseEvent, SseParser};
use anyhow::{Context, Result, bail};
use reqwest::Url;
use reqwest::blocking::{Client as Http, RequestBuilder, Response};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue};
use serde_json::{Value, json};

use crate::client::{self, http_client, no_daemon};

const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";

/// Write one JSON-RPC message to stdout as one line. Stdout's lock keeps
/// lines from concurrent answers whole.
fn write_message(msg: &Value) -> Result<()> {
    write_line(&msg.to_string())
}

fn write_line(line: &str) -> Result<()> {
    crate::commands::write_stdout(format!("{line}\n").as_bytes())
}

/// A JSON-RPC error for a request whose answer never came, so the client
/// is not left waiting for it.
fn error_response(id: &Value, code: i64, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

/// Parse each payload and write it; a payload that is not JSON is reported
/// on stderr and skipped (the client could not parse it either).
fn forward_payloads(
    payloads: impl IntoIterator<Item = String>,
    mut seen: impl FnMut(&Value),
) -> Result<()> {
    for p in payloads {
        match serde_json::from_str::<Value>(&p) {
            Ok(Value::Array(batch)) => {
                for m in batch {
                    seen(&m);
                    write_message(&m)?;
                }
            }
            Ok(m) => {
                seen(&m);
                // Pass the daemon's bytes on when they are already one line.
                if p.contains('\n') {
                    write_message(&m)?
                } else {
                    write_line(p.trim())?
                }
            }
            Err(e) => eprintln!(
                "agency mcp-stdio: skipped a message from the daemon that is not JSON ({e}): {p}"
            ),
        }
    }
    Ok(())
}

/// An event's data when it is a message. Other fields (`event`, `id`,
/// `retry`) are ignored: every MCP event's data is one JSON-RPC message,
/// and an event without data (e.g. a priming event carrying only an id)
/// is not one.
fn message_data(ev: SseEvent) -> Option<String> {
    (!ev.data.is_empty()).then_some(ev.data)
}

/// Read an event stream to its end, handing each message's data to
/// `on_data` as its event ends. The standard discards an event without
/// its closing blank line at the end of the stream; it is delivered here,
/// last line included, because a server that closes right after its last
/// write would otherwise lose the response the client is waiting for.
fn read_sse(mut body: impl Read, mut on_data: impl FnMut(String) -> Result<()>) -> Result<()> {
    let mut parser = SseParser::new();
    let mut buf = vec![0; 16 * 1024];
    loop {
        let n = match body.read(&mut buf) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).context("failed to read the daemon's event stream"),
        };
        if n == 0 {
            return match parser
                .finish_with_unterminated_line()
                .and_then(message_data)
            {
                Some(data) => on_data(data),
                None => Ok(()),
            };
        }
        let events = parser
            .push(&buf[..n])
            .context("failed to read the daemon's event stream")?;
        for data in events.into_iter().filter_map(message_data) {
            on_data(data)?;
        }
    }
}

/// Read an SSE body to its end, writing each message as it arrives.
fn pump_sse(body: impl Read, mut seen: impl FnMut(&Value)) -> Result<()> {
    read_sse(body, |data| forward_payloads([data], &mut seen))
}

/// Write every message of an answer to stdout, and return the
/// `protocolVersion` of an initialize result in it. A request whose answer
/// never came (the stream broke, or held only other messages) gets a
/// JSON-RPC error instead, so the client does not wait forever.
fn relay(resp: Response, sse: bool, id: Option<&Value>) -> Result<Option<String>> {
    let mut version = None;
    let mut answered = false;
    let mut seen = |m: &Value| {
        if id.is_some_and(|id| m.get("id") == Some(id) && m.get("method").is_none()) {
            answered = true;
        }
        if let Some(v) = m.pointer("/result/protocolVersion").and_then(Value::as_str) {
            version = Some(v.to_owned());
        }
    };
    let read = if sse {
        pump_sse(resp, &mut seen)
    } else {
        resp.text()
            .context("failed to read the daemon's answer")
            .and_then(|t| match t.trim() {
                "" => Ok(()),
                _ => forward_payloads([t], &mut seen),
            })
    };
    if let Some(id) = id
        && !answered
    {
        let why = match &read {
            Err(e) => format!("{e:#}"),
            Ok(()) => "its answer held no response to this request".to_owned(),
        };
        let msg = format!("failed to get an answer from the Agency daemon: {why}");
        write_message(&error_response(id, -32603, &msg))?;
    }
    read.map(|()| version)
}

/// Who is at the other end, for error messages.
#[derive(Clone)]
enum Peer {
    /// Agency's daemon, with the agent token read from `token_file`.
    Daemon { home: Home, token_file: String },
    /// An extra MCP server started by `agency mcp-launch`.
    Server { name: String },
}

/// What an `initialize` answer carried for every later request.
#[derive(Debug, Default)]
struct Exchanged {
    session: Option<HeaderValue>,
    version: Option<String>,
}

/// One stdio session against a streamable-HTTP MCP endpoint.
#[derive(Clone)]
struct Bridge {
    http: Http,
    url: Url,
    /// Sent with every request (the bearer token, a server's headers).
    headers: HeaderMap,
    peer: Peer,
    session: Option<HeaderValue>,
    protocol: Option<HeaderValue>,
}

impl Bridge {
    fn request(&self, req: RequestBuilder) -> RequestBuilder {
        let mut req = req.headers(self.headers.clone());
        if let Some(s) = &self.session {
            req = req.header(SESSION_HEADER, s.clone());
        }
        if let Some(v) = &self.protocol {
            req = req.header(VERSION_HEADER, v.clone());
        }
        req
    }

    /// Forward one line from stdin. Returns the thread still working on its
    /// answer, if any.
    fn forward(&mut self, line: &str) -> Result<Option<JoinHandle<()>>> {
        let msg: Value = match serde_json::from_str(line) {
            Ok(m) => m,
            Err(e) => {
                write_message(&error_response(
                    &Value::Null,
                    -32700,
                    &format!("Parse error: {e}"),
                ))?;
                return Ok(None);
            }
        };
        // A request has a method and an id; notifications and the client's
        // own responses get 202 and no body.
        let id = msg.get("method").and(msg.get("id")).cloned();
        let initialize = msg.get("method").and_then(Value::as_str) == Some("initialize");
        if initialize {
            // Awaited: every later request needs the session id and
            // protocol version its answer carries.
            let got = self.exchange(line, id.as_ref(), true)?;
            self.session = got.session;
            self.protocol = got.version.and_then(|v| HeaderValue::from_str(&v).ok());
            return Ok(None);
        }
        let Some(id) = id else {
            // Sent before the next line is read, so the peer sees
            // notifications (`notifications/initialized` first) in order.
            self.exchange(line, None, false)?;
            return Ok(None);
        };
        // Every other request runs on its own thread, from sending to its
        // last answer: a server answering in plain JSON (Agency's endpoint
        // does) sends nothing before the tool is done, and a `mail_wait`
        // can take minutes, which must not hold up the calls behind it.
        let bridge = self.clone();
        let line = line.to_owned();
        Ok(Some(std::thread::spawn(move || {
            if let Err(e) = bridge.exchange(&line, Some(&id), false) {
                eprintln!("agency mcp-stdio: {e:#}");
                let _ = write_message(&error_response(&id, -32603, &format!("{e:#}")));
            }
        })))
    }

    /// Send one message and write its answers to stdout.
    fn exchange(&self, line: &str, id: Option<&Value>, initialize: bool) -> Result<Exchanged> {
        let req = self
            .request(self.http.post(self.url.clone()))
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream")
            .body(line.to_owned());
        let resp = match (req.send(), &self.peer) {
            (Ok(r), _) => r,
            (Err(e), Peer::Daemon { home, .. }) if e.is_connect() => return Err(no_daemon(home)),
            (Err(e), _) => {
                return Err(e).with_context(|| format!("failed to send a message to {}", self.url));
            }
        };
        let status = resp.status();
        if status == reqwest::StatusCode::UNAUTHORIZED {
            let why = client::api_error(status.as_u16(), &resp.text().unwrap_or_default());
            match &self.peer {
                Peer::Daemon { token_file, .. } => bail!(
                    "failed to authenticate to the Agency daemon with the token in {token_file}: {why}; mint a new one with `agency token mint --handler <id>`"
                ),
                Peer::Server { name } => bail!(
                    "failed to authenticate to MCP server {name} at {}: {why}; check its headers in agency.toml",
                    self.url
                ),
            }
        }
        if !status.is_success() {
            let body = resp.text().unwrap_or_default();
            self.refused(status, &body, id)?;
            return Ok(Exchanged::default());
        }
        let session = match initialize {
            true => resp.headers().get(SESSION_HEADER).cloned(),
            false => None,
        };
        let sse = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let version = relay(resp, sse, id)?;
        Ok(Exchanged { session, version })
    }

    /// The daemon refused a message (not for authentication): pass its
    /// JSON-RPC error on, or make one, so a request is always answered.
    fn refused(&self, status: reqwest::StatusCode, body: &str, id: Option<&Value>) -> Result<()> {
        if let Ok(m) = serde_json::from_str::<Value>(body)
            && m.get("jsonrpc").is_some()
        {
            return write_message(&m);
        }
        let peer = match &self.peer {
            Peer::Daemon { .. } => "the Agency daemon".to_owned(),
            Peer::Server { name } => format!("MCP server {name}"),
        };
        let mut why = format!("failed to forward to {peer}: HTTP {status}");
        if status == reqwest::StatusCode::NOT_FOUND && self.session.is_some() {
            why.push_str(" (the MCP session is gone; did the daemon restart?)");
        }
        let detail = client::api_error(status.as_u16(), body).to_string();
        match id {
            Some(id) => write_message(&error_response(id, -32603, &format!("{why}: {detail}"))),
            None => {
                eprintln!("agency mcp-stdio: {why}: {detail}");
                Ok(())
            }
        }
    }

    /// End the session (best effort: the daemon may already be gone).
    fn close(&self) {
        if self.session.is_some() {
            let _ = self.request(self.http.delete(self.url.clone())).send();
        }
    }
}

pub fn run(home: &Home, token_file: &Path) -> Result<ExitCode> {
    let token = std::fs::read_to_string(token_file)
        .with_context(|| format!("failed to read the token file {}", token_file.display()))?
        .trim()
        .to_owned();
    if token.is_empty() {
        bail!(
            "failed to read a token from {}: the file is empty",
            token_file.display()
        );
    }
    let url = client::live_daemon_base(home)?
        .join("mcp")
        .context("failed to make the MCP endpoint's URL")?;
    let mut headers = HeaderMap::new();
    headers.insert(
        AUTHORIZATION,
        HeaderValue::from_str(&format!("Bearer {token}")).with_context(|| {
            format!(
                "failed to use the token in {}: it is not a valid header value",
                token_file.display()
            )
        })?,
    );
    serve(Bridge {
        http: http_client()?,
        url,
        headers,
        peer: Peer::Daemon {
            home: home.clone(),
            token_file: token_file.display().to_string(),
        },
        session: None,
        protocol: None,
    })
}

/// Bridge stdio to an extra MCP server's URL with its headers (secrets
/// filled in by the daemon; they stay in this process).
pub fn run_remote(name: &str, url: &str, headers: HeaderMap) -> Result<ExitCode> {
    let url =
        Url::parse(url).with_context(|| format!("failed to parse the URL of MCP server {name}"))?;
    serve(Bridge {
        http: http_client()?,
        url,
        headers,
        peer: Peer::Server {
            name: name.to_owned(),
        },
        session: None,
        protocol: None,
    })
}

/// Forward stdin to the peer until stdin ends, then end the session.
fn serve(mut bridge: Bridge) -> Result<ExitCode> {
    let mut readers: Vec<JoinHandle<()>> = Vec::new();
    for line in std::io::stdin().lock().lines() {
        let line = line.context("failed to read stdin")?;
        if line.trim().is_empty() {
            continue;
        }
        readers.retain(|r| !r.is_finished());
        readers.extend(bridge.forward(&line)?);
    }
    // Answers still streaming are delivered before the session ends.
    for r in readers {
        let _ = r.join();
    }
    bridge.close();
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A body that hands out its bytes `size` at a time, as a network
    /// would, in pieces that split lines, CRLFs and characters.
    struct Pieces<'a> {
        rest: &'a [u8],
        size: usize,
    }

    impl Read for Pieces<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.size.min(self.rest.len()).min(buf.len());
            buf[..n].copy_from_slice(&self.rest[..n]);
            self.rest = &self.rest[n..];
            Ok(n)
        }
    }

    /// Every message's data in a complete SSE text, read whole and in
    /// every piece size (which must all agree).
    fn parse_sse(text: &str) -> Vec<String> {
        let read = |size| {
            let mut out = Vec::new();
            let body = Pieces {
                rest: text.as_bytes(),
                size,
            };
            read_sse(body, |d| {
                out.push(d);
                Ok(())
            })
            .unwrap();
            out
        };
        let whole = read(usize::MAX);
        for size in 1..text.len() {
            assert_eq!(read(size), whole, "pieces of {size}");
        }
        whole
    }

    #[test]
    fn sse_events_are_split_on_blank_lines_and_data_lines_joined() {
        let text =
            "event: message\ndata: {\"a\":1}\n\n: a comment\nid: 7\ndata: {\"b\":\ndata: 2}\n\n";
        assert_eq!(parse_sse(text), ["{\"a\":1}", "{\"b\":\n2}"]);
    }

    #[test]
    fn sse_accepts_crlf_and_no_space_after_the_colon() {
        assert_eq!(
            parse_sse("data:{\"x\":true}\r\n\r\ndata: y\r\n\r\n"),
            ["{\"x\":true}", "y"]
        );
    }

    #[test]
    fn sse_accepts_cr_line_ends_a_bom_and_split_characters() {
        assert_eq!(
            parse_sse("\u{feff}data: {\"é\":\"→\"}\r\rdata: 2\r\n\n"),
            ["{\"é\":\"→\"}", "2"]
        );
    }

    #[test]
    fn sse_skips_events_without_data_and_keeps_a_final_unterminated_one() {
        // A priming event (id and retry only), an empty data field, then a
        // message whose stream closed before the blank line.
        let text = "id: 0\nretry: 1000\n\ndata:\n\ndata: {\"last\":1}";
        assert_eq!(parse_sse(text), ["{\"last\":1}"]);
        assert!(parse_sse("").is_empty());
        assert_eq!(parse_sse("data: {\"last\":2}\n"), ["{\"last\":2}"]);
    }

    #[test]
    fn sse_data_without_a_colon_is_an_empty_line_of_it() {
        assert_eq!(parse_sse("data: 1\ndata\n\n\n"), ["1\n"]);
    }

    #[test]
    fn sse_stops_at_a_line_without_end_and_reports_a_failed_write() {
        let endless = vec![b'x'; agency_sse::DEFAULT_MAX_LINE + 1];
        let e = read_sse(&endless[..], |_| Ok(())).unwrap_err();
        assert!(
            format!("{e:#}").contains("failed to read the daemon's event stream"),
            "{e:#}"
        );
        let e = read_sse(&b"data: 1\n\ndata: 2\n\n"[..], |_| bail!("stdout closed")).unwrap_err();
        assert_eq!(e.to_string(), "stdout closed");
    }

    #[test]
    fn error_responses_answer_the_request_id() {
        let e = error_response(&json!(3), -32603, "boom");
        assert_eq!(
            e,
            json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32603, "message": "boom"}})
        );
    }
}
