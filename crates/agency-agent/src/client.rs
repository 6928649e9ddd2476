//! One model call over HTTP with retries: build the body for the configured
//! API, post it, read the SSE stream through [`SseParser`] into the API's
//! assembler, and retry transient failures with jittered exponential
//! backoff (`backon`).
//!
//! Retried: HTTP 429, 500, 502, 503, 504, 529, connection failures and
//! timeouts, and any failure once the answer has started streaming (an
//! `error` event, a cut or unreadable stream). Other statuses fail at once
//! with the server's error body, since repeating a bad request cannot fix
//! it. So does the daemon's model gateway refusing a call by a budget (a
//! 429 whose JSON error has `"kind": "budget"`): no retry makes room in a
//! reached or paused budget, only the user does ([`CallError::Budget`]).

use std::cell::Cell;
use std::time::Duration;

use agency_sse::{SseEvent, SseParser};
use backon::{ExponentialBuilder, Retryable};
use futures_util::StreamExt;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap};
use serde_json::Value;

use crate::config::{AgentConfig, Api, RetryConfig};
use crate::error::{AgentError, ReplyError};
use crate::model::{Reply, Request, Usage};
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

impl From<ReplyError> for AttemptError {
    /// A stream that broke, cut or unreadable, or an error the server
    /// reported in it: worth another attempt.
    fn from(e: ReplyError) -> AttemptError {
        AttemptError::transient(e.to_string())
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
        let body = &body;
        let attempts = Cell::new(0u32);
        let max_wait = Duration::from_millis(self.retry.max_backoff_ms);
        let result = (|| {
            attempts.set(attempts.get() + 1);
            self.attempt(body)
        })
        .retry(schedule(&self.retry))
        // A budget refusal is not retryable either.
        .when(|e: &AttemptError| e.retryable)
        // `None`: the schedule is used up, the call gives up.
        .adjust(|e, wait| wait.map(|w| e.retry_after.map_or(w, |d| server_wait(d, max_wait))))
        .notify(|e, wait| {
            on_retry(&RetryNote {
                attempt: attempts.get(),
                status: e.status,
                error: e.message.clone(),
                wait,
            })
        })
        .await;
        let attempts = attempts.get();
        match result {
            Ok(mut reply) => {
                if reply.usage.is_none() {
                    reply.usage = Some(estimate_usage(body.len(), &reply));
                }
                Ok(reply)
            }
            Err(e) if e.budget => Err(CallError::Budget(e.message)),
            Err(e) if e.retryable && attempts > 1 => Err(CallError::Failed(format!(
                "{} (gave up after {attempts} attempts)",
                e.message
            ))),
            Err(e) => Err(CallError::Failed(e.message)),
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
            for ev in parser.push(&chunk).map_err(ReplyError::from)? {
                asm.event(&ev)?;
                if asm.is_done() {
                    // Anything after the final event is of no use; not
                    // waiting for the server to close saves a round trip.
                    break 'read;
                }
            }
        }
        if let Some(ev) = parser.finish() {
            asm.event(&ev)?;
        }
        asm.finish().map_err(AttemptError::from)
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
        .map_err(AttemptError::from)
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
    fn event(&mut self, ev: &SseEvent) -> Result<(), ReplyError> {
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
    fn finish(self) -> Result<Reply, ReplyError> {
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

/// The waits between attempts, `max_attempts - 1` of them: retry number
/// `n` waits `initial × 2^(n-1)`, at most `max_backoff_ms`, with "equal
/// jitter": half of it fixed, the other half random (backon adds a random
/// part of up to the wait itself, so it is given half of each wait).
/// Without jitter, 500 agents refused with a 429 at once would all retry
/// at the same instant again.
pub(crate) fn schedule(retry: &RetryConfig) -> ExponentialBuilder {
    ExponentialBuilder::new()
        .with_min_delay(Duration::from_millis(retry.initial_backoff_ms) / 2)
        .with_max_delay(Duration::from_millis(retry.max_backoff_ms) / 2)
        .with_factor(2.0)
        .with_jitter()
        .with_max_times(retry.max_attempts.saturating_sub(1) as usize)
}

/// The wait a server asked for with `retry-after`, plus up to a tenth more
/// (the same spread as above, for the agents it told the same), at most
/// `max`.
pub(crate) fn server_wait(asked: Duration, max: Duration) -> Duration {
    asked
        .saturating_add(asked.mul_f64(fastrand::f64() / 10.0))
        .min(max)
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

    /// The waits of a whole schedule, in milliseconds (fractions kept).
    fn waits(r: &RetryConfig) -> Vec<f64> {
        use backon::BackoffBuilder;
        schedule(r).build().map(|d| d.as_secs_f64() * 1e3).collect()
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let r = RetryConfig {
            max_attempts: 70,
            ..retry(100, 1_000)
        };
        for _ in 0..50 {
            let w = waits(&r);
            // One wait between two attempts: 69 retries.
            assert_eq!(w.len(), 69);
            // Each wait is in the upper half of `100 × 2^(n-1)`, capped.
            let full = [100.0, 200.0, 400.0, 800.0, 1_000.0, 1_000.0];
            for (n, (got, full)) in w
                .iter()
                .zip(full.iter().chain([1_000.0; 64].iter()))
                .enumerate()
            {
                assert!(
                    *got >= full / 2.0 - 0.01 && *got <= full + 0.01,
                    "retry {}: {got} ms not in [{}, {full}]",
                    n + 1,
                    full / 2.0
                );
            }
        }
        assert_eq!(waits(&retry(100, 1_000)).len(), 4);
        assert!(
            waits(&RetryConfig {
                max_attempts: 1,
                ..retry(100, 1_000)
            })
            .is_empty()
        );
        assert!(waits(&retry(0, 0)).iter().all(|w| *w == 0.0));
        // The server's word wins (plus at most a tenth), within the cap.
        let max = Duration::from_secs(1);
        for _ in 0..50 {
            let w = server_wait(Duration::from_millis(700), max).as_millis();
            assert!((700..=770).contains(&w), "{w}");
        }
        assert_eq!(server_wait(Duration::from_secs(30), max), max);
        assert_eq!(server_wait(Duration::ZERO, max), Duration::ZERO);
    }

    /// DEBTS "retry backoff has no jitter": draws spread agents over the
    /// whole range (the bottom half of it is the fixed part).
    #[test]
    fn backoff_is_jittered() {
        let r = retry(100_000, 1_000_000);
        let firsts: Vec<f64> = (0..64).map(|_| waits(&r)[0]).collect();
        let distinct: std::collections::BTreeSet<u64> =
            firsts.iter().map(|w| (w * 1e3) as u64).collect();
        assert!(distinct.len() > 50, "{distinct:?}");
        assert!(firsts.iter().all(|w| (50_000.0..=100_000.0).contains(w)));
        // Both halves of the random part are drawn.
        assert!(firsts.iter().any(|w| *w < 75_000.0) && firsts.iter().any(|w| *w > 75_000.0));
        let asked = Duration::from_secs(10);
        let spread: std::collections::BTreeSet<Duration> =
            (0..64).map(|_| server_wait(asked, Duration::MAX)).collect();
        assert!(spread.len() > 50, "{spread:?}");
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
