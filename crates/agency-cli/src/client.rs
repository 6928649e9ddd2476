//! The REST client: speaks HTTP to the home's daemon over its Unix socket
//! (`daemon.sock`, checked first), sends the admin token, and turns the
//! API's error JSON into a typed error. Every command except `init` and
//! `serve` goes through here.
//!
//! The admin token never travels over TCP: a stale `daemon.json` after a
//! crash may name a port another user's process now holds, while the
//! socket is a file in a home only its owner can write.

use std::fmt;
use std::time::Duration;

use agency_config::Home;
use anyhow::{Context, Result};
use reqwest::Url;
use reqwest::blocking::{Client as Http, RequestBuilder};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Why a request failed. `status` tells "not running" apart from other
/// failures by it.
#[derive(Debug)]
pub enum ClientError {
    /// No `daemon.json`, or nothing listens at its address (a stale file).
    NoDaemon { home: String },
    /// The API refused: the message of `{"error": {"kind", "message"}}`
    /// (the service's messages already say what failed and what to do).
    Api { message: String },
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::NoDaemon { home } => write!(
                f,
                "no Agency daemon is running for home {home}; start one with `agency serve` (or `agency --home {home} serve`)"
            ),
            ClientError::Api { message } => f.write_str(message),
        }
    }
}

impl std::error::Error for ClientError {}

/// The kinds of id the API resolves from a prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdKind {
    Handler,
    Outcome,
    File,
    Agent,
    Message,
    OrgMessage,
    OrgKey,
    Memory,
    MemoryCompaction,
    Lesson,
}

impl IdKind {
    fn path(self) -> &'static str {
        match self {
            IdKind::Handler => "handler",
            IdKind::Outcome => "outcome",
            IdKind::File => "file",
            IdKind::Agent => "agent",
            IdKind::Message => "message",
            IdKind::OrgMessage => "agency_message",
            IdKind::OrgKey => "key",
            IdKind::Memory => "memory",
            IdKind::MemoryCompaction => "compaction",
            IdKind::Lesson => "lesson",
        }
    }
}

/// The running daemon's TCP address as the daemon itself reports it over
/// the home's socket, not as a `daemon.json` (perhaps stale) claims it:
/// the MCP bridge sends an agent token there.
pub fn live_daemon_base(home: &Home) -> Result<Url> {
    let c = Client::new(home)?;
    let status = c.get(c.url(&["status"]))?;
    let addr = status
        .get("addr")
        .and_then(Value::as_str)
        .context("failed to find the daemon's address: its status has none")?;
    Url::parse(&format!("http://{addr}/"))
        .with_context(|| format!("failed to make a URL from the daemon address {addr}"))
}

pub fn no_daemon(home: &Home) -> anyhow::Error {
    ClientError::NoDaemon {
        home: home.dir().display().to_string(),
    }
    .into()
}

/// A blocking HTTP client for loopback use. No overall timeout (fsck of a
/// large store, or an SSE stream, may take long), and no proxy: a proxy
/// from the environment must never see the admin or an agent token.
pub fn http_client() -> Result<Http> {
    Http::builder()
        .no_proxy()
        .connect_timeout(Duration::from_secs(5))
        .timeout(None)
        .build()
        .context("failed to build the HTTP client")
}

/// The user's connection to the daemon's REST API.
#[derive(Debug)]
pub struct Client {
    home: Home,
    base: Url,
    token: String,
    http: Http,
}

impl Client {
    /// Locate the daemon of `home` (not yet contacting it): its admin
    /// socket, after checking that only the home's owner could have made
    /// it.
    pub fn new(home: &Home) -> Result<Client> {
        if !home.exists() {
            return Err(agency_config::ConfigError::NoHome(home.dir().to_owned()).into());
        }
        let socket = home
            .checked_admin_socket()?
            .ok_or_else(|| no_daemon(home))?;
        let token = home.admin_token()?;
        let http = Http::builder()
            .unix_socket(socket)
            .connect_timeout(Duration::from_secs(5))
            .timeout(None)
            .build()
            .context("failed to build the HTTP client")?;
        Ok(Client {
            home: home.clone(),
            // The host is only the `Host` header: the socket is the address.
            base: Url::parse("http://localhost/").context("failed to make the daemon's URL")?,
            token,
            http,
        })
    }

    /// `/v1/<segments…>`, each segment percent-encoded (a prefix typed by
    /// the user must not be able to change the path).
    pub fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.clear().push("v1").extend(segments);
        }
        url
    }

    pub fn get(&self, url: Url) -> Result<Value> {
        self.send(self.http.get(url), 0)
    }

    pub fn post(&self, url: Url, body: &impl Serialize) -> Result<Value> {
        let bytes = serde_json::to_vec(body).context("failed to encode the request as JSON")?;
        let len = bytes.len();
        let req = self
            .http
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(bytes);
        self.send(req, len)
    }

    pub fn delete(&self, url: Url) -> Result<Value> {
        self.send(self.http.delete(url), 0)
    }

    /// `body_len`: the request body's size, for the error when the daemon
    /// refuses a body too large before reading all of it.
    fn send(&self, req: RequestBuilder, body_len: usize) -> Result<Value> {
        let resp = self.dispatch(req, body_len)?;
        let status = resp.status();
        let text = resp
            .text()
            .with_context(|| format!("failed to read the daemon's answer ({status})"))?;
        if status.is_success() {
            return serde_json::from_str(&text).with_context(|| {
                format!(
                    "failed to parse the daemon's answer as JSON: {}",
                    excerpt(&text)
                )
            });
        }
        Err(api_error(status.as_u16(), &text).into())
    }

    /// Send `req` with the admin token; the daemon's response, whatever its
    /// status, or the error of not reaching it.
    fn dispatch(
        &self,
        req: RequestBuilder,
        body_len: usize,
    ) -> Result<reqwest::blocking::Response> {
        match req.bearer_auth(&self.token).send() {
            Ok(r) => Ok(r),
            // A socket left by a crashed daemon: nothing listens there.
            Err(e) if e.is_connect() => Err(no_daemon(&self.home)),
            // The daemon answers a body over its limit before reading it
            // all and closes the connection; the answer may be lost in the
            // race with our write, so say what it almost certainly was.
            Err(e) if body_len > 0 && closed_while_sending(&e) => {
                anyhow::bail!(
                    "failed to send the request to the Agency daemon at {}: it closed the connection before reading the whole body ({body_len} bytes), which it does when a body is larger than the limit that follows from limits.max_file_bytes in agency.toml; send less, or raise that limit",
                    self.home.admin_socket_path().display()
                );
            }
            Err(e) => Err(e).with_context(|| {
                format!(
                    "failed to reach the Agency daemon at {}",
                    self.home.admin_socket_path().display()
                )
            }),
        }
    }

    /// Open a stream (`GET`, e.g. Server-Sent Events): the response once
    /// the daemon answered with success, its body unread.
    pub fn open_stream(
        &self,
        url: Url,
        last_event_id: Option<i64>,
    ) -> Result<reqwest::blocking::Response> {
        let mut req = self.http.get(url);
        if let Some(id) = last_event_id {
            req = req.header("Last-Event-ID", id.to_string());
        }
        let resp = self.dispatch(req, 0)?;
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        let text = resp.text().unwrap_or_default();
        Err(api_error(status.as_u16(), &text).into())
    }

    /// The full UUID for a full UUID or a unique prefix of one (asking the
    /// daemon, which gives a clear error for unknown or ambiguous ones).
    pub fn resolve(&self, kind: IdKind, arg: &str) -> Result<String> {
        if let Ok(id) = uuid::Uuid::parse_str(arg.trim()) {
            return Ok(id.hyphenated().to_string());
        }
        let v = self.get(self.url(&["resolve", kind.path(), arg]))?;
        v.get("id")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .with_context(|| {
                format!(
                    "failed to resolve {} id {arg:?}: the daemon's answer has no id: {v}",
                    kind.path()
                )
            })
    }
}

/// Decode an error response; a body that is not the API's error JSON (a
/// proxy, an older daemon) is reported with its status and an excerpt.
pub fn api_error(status: u16, body: &str) -> ClientError {
    let parsed = serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| Some(v.get("error")?.get("message")?.as_str()?.to_owned()));
    let message = parsed.unwrap_or_else(|| {
        format!(
            "failed to get an answer from the daemon: HTTP {status}: {}",
            excerpt(body)
        )
    });
    ClientError::Api { message }
}

fn excerpt(text: &str) -> String {
    let t = text.trim();
    match t.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &t[..i]),
        None => t.to_owned(),
    }
}

/// Deserialize an API answer into a view type.
pub fn decode<T: DeserializeOwned>(v: Value, what: &str) -> Result<T> {
    serde_json::from_value(v).with_context(|| format!("failed to decode the daemon's {what}"))
}

/// Whether a request failed because the peer closed the connection while
/// we were still writing it (EPIPE or a reset).
fn closed_while_sending(e: &reqwest::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                std::io::ErrorKind::BrokenPipe | std::io::ErrorKind::ConnectionReset
            )
        {
            return true;
        }
        source = s.source();
    }
    false
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn api_errors_are_decoded() {
        let e = api_error(
            404,
            r#"{"error":{"kind":"not_found","message":"failed to find handler x: no such handler"}}"#,
        );
        assert_eq!(e.to_string(), "failed to find handler x: no such handler");
        let e = api_error(502, "Bad gateway");
        assert_eq!(
            e.to_string(),
            "failed to get an answer from the daemon: HTTP 502: Bad gateway"
        );
    }

    #[test]
    fn no_daemon_says_how_to_start_one() {
        let e = ClientError::NoDaemon { home: "/h".into() };
        assert_eq!(
            e.to_string(),
            "no Agency daemon is running for home /h; start one with `agency serve` (or `agency --home /h serve`)"
        );
    }
}
