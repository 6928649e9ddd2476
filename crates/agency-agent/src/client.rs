//! One model call over HTTP with retries: build the body for the configured
//! API, post it, read the SSE stream through [`SseParser`] into the API's
//! assembler, and retry transient failures with exponential backoff.
//!
//! Retried: HTTP 429, 500, 502, 503, 504, 529, connection failures and
//! timeouts, and any failure once the answer has started streaming (an
//! `error` event, a cut or unreadable stream). Other statuses fail at once
//! with the server's error body, since repeating a bad request cannot fix
//! it. So does the daemon's model gateway refusing a call by a budget (a
//! 429 whose JSON error has `"kind": "budget"`): no retry makes room in a
//! reached or paused budget, only the user does ([`CallError::Budget`]).

use std::time::Duration;

use futures_util::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap};
use serde_json::Value;

use crate::config::{AgentConfig, Api, RetryConfig};
use crate::error::AgentError;
use crate::model::{Reply, Request, Usage};
use crate::sse::SseParser;
use crate::{anthropic, openai};

/// How much of an error response body is kept for the message.
const ERROR_BODY_CHARS: usize = 4_000;
/// A whole (non-streamed) answer larger than this is refused.
const MAX_WHOLE_BODY: usize = 64 * 1024 * 1024;

/// A retry about to happen, reported to the transcript.
#[derive(Debug, Clone)]
pub(crate) struct RetryNote {
    /// The attempt that failed (1-based).
    pub attempt: u32,
    pub status: Option<u16>,
    pub error: String,
    pub wait: Duration,
}

/// Why a model call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CallError {
    /// The call failed (after the retries it was worth).
    Failed(String),
    /// The daemon's model gateway refused it by a budget: the message
    /// names the budget and how the user continues it.
    Budget(String),
}

/// Why one attempt failed.
#[derive(Debug)]
struct AttemptError {
    /// The gateway's budget refusal: never retried.
    budget: bool,
    retryable: bool,
    status: Option<u16>,
    retry_after: Option<Duration>,
    message: String,
}

impl AttemptError {
    fn transient(message: impl Into<String>) -> AttemptError {
        AttemptError {
            budget: false,
            retryable: true,
            status: None,
            retry_after: None,
            message: message.into(),
        }
    }
}

/// The model server client of one run.
#[derive(Debug)]
pub(crate) struct ModelClient {
    http: reqwest::Client,
    api: Api,
    url: String,
    api_key: Option<String>,
    timeout: Duration,
    retry: RetryConfig,
}

impl ModelClient {
    pub fn new(cfg: &AgentConfig, api_key: Option<String>) -> Result<ModelClient, AgentError> {
        let timeout = cfg.request_timeout();
        let http = reqwest::Client::builder()
            .connect_timeout(timeout.min(Duration::from_secs(30)))
            // Per read, so it bounds the silence between streamed chunks
            // and not the length of a long answer.
            .read_timeout(timeout)
            .tcp_nodelay(true)
            // `x-api-key` is not a header reqwest strips on a cross-host
            // redirect: follow none, so the key goes only where configured.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("agency-agent/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| AgentError::HttpClient(e.to_string()))?;
        Ok(ModelClient {
            http,
            api: cfg.api,
            url: cfg.endpoint(),
            api_key,
            timeout,
            retry: cfg.retry.clone(),
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Make one model call, retrying transient failures. `on_retry` is
    /// told about each retry before its wait. The error names the last
    /// failure (and how many attempts were made).
    pub async fn call(
        &self,
        req: &Request<'_>,
        on_retry: &mut dyn FnMut(&RetryNote),
    ) -> Result<Reply, CallError> {
        let body = match self.api {
            Api::Anthropic => anthropic::request_body(req),
            Api::Openai => openai::request_body(req),
        };
        let body = serde_json::to_vec(&body)
            .map_err(|e| CallError::Failed(format!("failed to encode the request: {e}")))?;
        let mut attempt = 1;
        loop {
            match self.attempt(&body).await {
                Ok(mut reply) => {
                    if reply.usage.is_none() {
                        reply.usage = Some(estimate_usage(body.len(), &reply));
                    }
                    return Ok(reply);
                }
                Err(e) if e.budget => return Err(CallError::Budget(e.message)),
                Err(e) if !e.retryable => return Err(CallError::Failed(e.message)),
                Err(e) if attempt >= self.retry.max_attempts => {
                    return Err(CallError::Failed(if attempt > 1 {
                        format!("{} (gave up after {attempt} attempts)", e.message)
                    } else {
                        e.message
                    }));
                }
                Err(e) => {
                    let wait = backoff(&self.retry, attempt, e.retry_after, jitter_draw());
                    on_retry(&RetryNote {
                        attempt,
                        status: e.status,
                        error: e.message,
                        wait,
                    });
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
            }
        }
    }

    async fn attempt(&self, body: &[u8]) -> Result<Reply, AttemptError> {
        let mut rq = self
            .http
            .post(&self.url)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "text/event-stream")
            .body(body.to_vec());
        match (self.api, &self.api_key) {
            (Api::Anthropic, key) => {
                rq = rq.header("anthropic-version", "2023-06-01");
                if let Some(k) = key {
                    rq = rq.header("x-api-key", k);
                }
            }
            (Api::Openai, Some(k)) => rq = rq.bearer_auth(k),
            (Api::Openai, None) => {}
        }
        let resp = match tokio::time::timeout(self.timeout, rq.send()).await {
            Err(_) => {
                return Err(AttemptError::transient(format!(
                    "no response within {} s",
                    self.timeout.as_secs()
                )));
            }
            // A key that is not a valid header value fails here; that is
            // not transient. The error text names no header value.
            Ok(Err(e)) if e.is_builder() => {
                return Err(AttemptError {
                    retryable: false,
                    ..AttemptError::transient(format!("invalid request: {}", error_chain(&e)))
                });
            }
            Ok(Err(e)) => return Err(AttemptError::transient(error_chain(&e))),
            Ok(Ok(r)) => r,
        };
        let status = resp.status();
        if !status.is_success() {
            let retry_after = retry_after(resp.headers());
            let text = read_error_body(resp).await;
            if let Some(message) = budget_refusal(status.as_u16(), &text) {
                return Err(AttemptError {
                    budget: true,
                    retryable: false,
                    status: Some(status.as_u16()),
                    retry_after: None,
                    message,
                });
            }
            return Err(AttemptError {
                budget: false,
                retryable: is_retryable_status(status.as_u16()),
                status: Some(status.as_u16()),
                retry_after,
                message: format!("HTTP {status}: {text}"),
            });
        }
        let is_json = resp
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().starts_with("application/json"));
        if is_json {
            return self.read_whole(resp).await;
        }
        self.read_stream(resp).await
    }

    async fn read_stream(&self, resp: reqwest::Response) -> Result<Reply, AttemptError> {
        let mut parser = SseParser::new();
        let mut asm = Assembler::new(self.api);
        let mut stream = resp.bytes_stream();
        'read: while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| {
                AttemptError::transient(format!("the stream broke: {}", error_chain(&e)))
            })?;
            for ev in parser.push(&chunk).map_err(AttemptError::transient)? {
                asm.event(&ev).map_err(AttemptError::transient)?;
                if asm.is_done() {
                    // Anything after the final event is of no use; not
                    // waiting for the server to close saves a round trip.
                    break 'read;
                }
            }
        }
        for ev in parser.finish() {
            asm.event(&ev).map_err(AttemptError::transient)?;
        }
        asm.finish().map_err(AttemptError::transient)
    }

    async fn read_whole(&self, resp: reqwest::Response) -> Result<Reply, AttemptError> {
        let mut buf = Vec::new();
        let mut stream = resp.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| {
                AttemptError::transient(format!("the answer broke off: {}", error_chain(&e)))
            })?;
            buf.extend_from_slice(&chunk);
            if buf.len() > MAX_WHOLE_BODY {
                return Err(AttemptError::transient("the answer is too large"));
            }
        }
        let v: Value = serde_json::from_slice(&buf)
            .map_err(|e| AttemptError::transient(format!("unreadable answer ({e})")))?;
        match self.api {
            Api::Anthropic => anthropic::parse_whole(&v),
            Api::Openai => openai::parse_whole(&v),
        }
        .map_err(AttemptError::transient)
    }
}

enum Assembler {
    Anthropic(anthropic::StreamAssembler),
    Openai(openai::StreamAssembler),
}

impl Assembler {
    fn new(api: Api) -> Assembler {
        match api {
            Api::Anthropic => Assembler::Anthropic(Default::default()),
            Api::Openai => Assembler::Openai(Default::default()),
        }
    }
    fn event(&mut self, ev: &crate::sse::SseEvent) -> Result<(), String> {
        match self {
            Assembler::Anthropic(a) => a.event(ev),
            Assembler::Openai(a) => a.event(ev),
        }
    }
    fn is_done(&self) -> bool {
        match self {
            Assembler::Anthropic(a) => a.is_done(),
            Assembler::Openai(a) => a.is_done(),
        }
    }
    fn finish(self) -> Result<Reply, String> {
        match self {
            Assembler::Anthropic(a) => a.finish(),
            Assembler::Openai(a) => a.finish(),
        }
    }
}

/// The statuses worth another attempt: rate limits, overload (529 is
/// Anthropic's) and gateway failures.
pub(crate) fn is_retryable_status(status: u16) -> bool {
    matches!(status, 429 | 500 | 502 | 503 | 504 | 529)
}

/// The daemon's model gateway refusing a call by a budget: HTTP 429 with
/// `{"error": {"kind": "budget", "message": …}}` (a provider's rate
/// limit is a 429 without that kind); its message.
pub(crate) fn budget_refusal(status: u16, body: &str) -> Option<String> {
    if status != 429 {
        return None;
    }
    let v: Value = serde_json::from_str(body).ok()?;
    let e = v.get("error")?;
    if e.get("kind")?.as_str()? != "budget" {
        return None;
    }
    Some(
        e.get("message")
            .and_then(Value::as_str)
            .unwrap_or("a budget is reached")
            .to_owned(),
    )
}

/// The wait before retry number `attempt` (1 = after the first failure):
/// `initial × 2^(attempt-1)` with "equal jitter" (half of it fixed, the
/// other half scaled by `draw`, a number in [0, 1)), or the server's
/// `retry-after` when it sent one (plus up to a tenth more, by `draw`), and
/// never more than `max_backoff_ms`. Without jitter, 500 agents refused
/// with a 429 at once would all retry at the same instant again.
pub(crate) fn backoff(
    retry: &RetryConfig,
    attempt: u32,
    retry_after: Option<Duration>,
    draw: f64,
) -> Duration {
    let draw = if draw.is_finite() {
        draw.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let max = Duration::from_millis(retry.max_backoff_ms);
    let wait = match retry_after {
        Some(d) => d.saturating_add(d.mul_f64(draw / 10.0)),
        None => {
            let factor = 1u64
                .checked_shl(attempt.saturating_sub(1))
                .unwrap_or(u64::MAX);
            let full =
                Duration::from_millis(retry.initial_backoff_ms.saturating_mul(factor)).min(max);
            full / 2 + (full / 2).mul_f64(draw)
        }
    };
    wait.min(max)
}

/// A number in [0, 1) that differs between calls and between processes,
/// for backoff jitter. The standard library's randomly keyed hasher is
/// enough: this needs spread, not secrecy.
fn jitter_draw() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    // The top 53 bits as a fraction of 2^53.
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// `retry-after-ms` (OpenAI) or `retry-after` in seconds; HTTP dates are
/// ignored (the exponential backoff applies then).
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let num = |name: &str| -> Option<f64> {
        let v: f64 = headers.get(name)?.to_str().ok()?.trim().parse().ok()?;
        (v.is_finite() && v >= 0.0).then_some(v)
    };
    if let Some(ms) = num("retry-after-ms") {
        return Some(Duration::from_secs_f64(ms.min(1e9) / 1000.0));
    }
    num("retry-after").map(|s| Duration::from_secs_f64(s.min(1e9)))
}

/// The start of an error response's body, for the error message.
async fn read_error_body(resp: reqwest::Response) -> String {
    let mut buf = Vec::new();
    let mut stream = resp.bytes_stream();
    while let Some(Ok(chunk)) = stream.next().await {
        buf.extend_from_slice(&chunk);
        if buf.len() > ERROR_BODY_CHARS * 4 {
            break;
        }
    }
    let text = String::from_utf8_lossy(&buf);
    let text = text.trim();
    if text.is_empty() {
        return "(empty body)".into();
    }
    match text.char_indices().nth(ERROR_BODY_CHARS) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

/// reqwest's error with its causes ("error sending request: connection
/// refused"), which its Display alone leaves out.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let t = c.to_string();
        if !s.contains(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cur = c.source();
    }
    s
}

/// Token counts for a server that reported none: about four bytes per
/// token, so budgets still bind.
fn estimate_usage(request_bytes: usize, reply: &Reply) -> Usage {
    let out: usize = reply.text.len()
        + reply
            .tool_calls
            .iter()
            .map(|c| c.name.len() + c.raw_arguments.len())
            .sum::<usize>();
    Usage {
        input_tokens: (request_bytes / 4) as u64,
        output_tokens: out.div_ceil(4) as u64,
        estimated: true,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use reqwest::header::HeaderValue;

    fn retry(initial: u64, max: u64) -> RetryConfig {
        RetryConfig {
            max_attempts: 5,
            initial_backoff_ms: initial,
            max_backoff_ms: max,
        }
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let r = retry(100, 1_000);
        // The top of the jitter range (draw just under 1): the full wait.
        let ms = |a, ra| backoff(&r, a, ra, 1.0).as_millis();
        assert_eq!(
            [ms(1, None), ms(2, None), ms(3, None), ms(4, None)],
            [100, 200, 400, 800]
        );
        assert_eq!(ms(5, None), 1_000);
        assert_eq!(ms(64, None), 1_000);
        assert_eq!(ms(u32::MAX, None), 1_000);
        // The server's word wins (plus at most a tenth), within the cap.
        assert_eq!(ms(1, Some(Duration::from_millis(700))), 770);
        assert_eq!(ms(1, Some(Duration::from_secs(30))), 1_000);
        assert_eq!(backoff(&retry(0, 0), 3, None, 0.5), Duration::ZERO);
    }

    /// DEBTS "retry backoff has no jitter": the bottom of the range is
    /// half the exponential wait, the server's retry-after exactly, and
    /// draws spread agents over the whole range.
    #[test]
    fn backoff_is_jittered() {
        let r = retry(100, 1_000);
        let ms = |a, ra, d| backoff(&r, a, ra, d).as_millis();
        assert_eq!([ms(1, None, 0.0), ms(3, None, 0.0)], [50, 200]);
        assert_eq!(ms(3, None, 0.5), 300);
        assert_eq!(ms(1, Some(Duration::from_millis(700)), 0.0), 700);
        // Out-of-range draws are clamped, not trusted.
        assert_eq!(ms(1, None, f64::NAN), 50);
        assert_eq!(ms(1, None, 7.0), 100);
        let draws: std::collections::BTreeSet<u64> =
            (0..64).map(|_| (jitter_draw() * 1e6) as u64).collect();
        assert!(draws.len() > 50, "{draws:?}");
        assert!(draws.iter().all(|d| *d < 1_000_000));
    }

    #[test]
    fn retry_after_headers() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after", HeaderValue::from_static("0.5"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(500)));
        h.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", HeaderValue::from_static("-3"));
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
    }

    #[test]
    fn only_the_gateways_budget_refusal_is_one() {
        let budget = r#"{"error":{"kind":"budget","message":"failed to call the model: budget of handler h reached"}}"#;
        assert_eq!(
            budget_refusal(429, budget).as_deref(),
            Some("failed to call the model: budget of handler h reached")
        );
        // Another status, a provider's rate limit, or no JSON: not one.
        assert_eq!(budget_refusal(403, budget), None);
        let anthropic =
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#;
        assert_eq!(budget_refusal(429, anthropic), None);
        assert_eq!(
            budget_refusal(429, r#"{"error":{"kind":"limited","message":"x"}}"#),
            None
        );
        assert_eq!(budget_refusal(429, "Too Many Requests"), None);
    }

    #[test]
    fn retryable_statuses() {
        for s in [429, 500, 502, 503, 504, 529] {
            assert!(is_retryable_status(s), "{s}");
        }
        for s in [400, 401, 403, 404, 413, 422, 501] {
            assert!(!is_retryable_status(s), "{s}");
        }
    }
}
