//! The seam between the ladder and a model: a provider-neutral
//! structured request, the answer, why a call brought none
//! ([`CallError`]: the ladder's transport/refusal classification), the
//! [`ModelClient`] trait, and the injected clock, sleeper and backoff that
//! make the ladder deterministic under test.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use time::OffsetDateTime;

/// A boxed `Send` future: what the client and sleeper traits return (the
/// workspace has no `async-trait`).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

/// One structured model call, provider-neutral (`wire` turns it into a
/// body).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StructuredRequest {
    /// The `[models.NAME]` upstream; `None`: the client's default.
    pub model: Option<String>,
    /// The stage's system prompt, plus the schema when not constrained.
    pub system: String,
    /// User and assistant turns, starting and ending with the user.
    pub messages: Vec<Message>,
    /// The output schema, sent as the constraint when `constrained`.
    pub schema: Value,
    /// A name for the schema (OpenAI requires one): `[A-Za-z0-9_-]{1,64}`.
    pub schema_name: String,
    pub constrained: bool,
    pub max_output_tokens: u64,
}

/// A model's answer to one call.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelAnswer {
    pub text: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub stop_reason: Option<String>,
}

/// Why a call brought no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// Worth trying again later: 5xx, an upstream's 429, a timeout, a
    /// refused connection (`status` `None`).
    #[error("failed to reach the model (status {status:?}): {message}")]
    Transport {
        status: Option<u16>,
        retry_after: Option<Duration>,
        message: String,
    },
    /// The gateway's budget refusal.
    #[error("failed to call the model: budget reached: {0}")]
    Budget(String),
    /// The gateway or policy refused the caller.
    #[error("failed to call the model: refused: {0}")]
    Policy(String),
    /// The request or the answer is malformed; trying again will not help.
    #[error("failed to call the model: {0}")]
    Invalid(String),
}

/// A model client: the daemon's gateway ([`crate::GatewayModel`]) or a
/// scripted fake in tests.
pub trait ModelClient: Send + Sync {
    fn call<'a>(
        &'a self,
        req: &'a StructuredRequest,
    ) -> BoxFuture<'a, Result<ModelAnswer, CallError>>;
    /// Whether the upstream `model` (`None`: the default) supports
    /// constrained output with a JSON Schema.
    fn constrained(&self, model: Option<&str>) -> bool;
    /// The name of the model `model` (`None`: the default) answers with,
    /// as stamped on a judging stage's scorecard (its grader).
    fn model_name(&self, model: Option<&str>) -> String {
        model.unwrap_or("default").to_owned()
    }
}

/// The time an answer arrived, stamped on it.
pub trait Clock: Send + Sync {
    fn now(&self) -> OffsetDateTime;
}

#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> OffsetDateTime {
        OffsetDateTime::now_utc()
    }
}

/// Waits between transport retries (a fake one in tests).
pub trait Sleeper: Send + Sync {
    fn sleep(&self, d: Duration) -> BoxFuture<'_, ()>;
}

#[derive(Debug, Clone, Copy, Default)]
pub struct TokioSleeper;

impl Sleeper for TokioSleeper {
    fn sleep(&self, d: Duration) -> BoxFuture<'_, ()> {
        Box::pin(tokio::time::sleep(d))
    }
}

/// Transport retries: exponential with equal jitter, capped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first retry's ceiling.
    pub base: Duration,
    /// No delay (before jitter's upper half) is longer.
    pub cap: Duration,
    /// Calls of one step, the first included, before `failed_infra`.
    pub max_tries: u32,
    /// Longest `Retry-After` honoured.
    pub max_retry_after: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff {
            base: Duration::from_millis(500),
            cap: Duration::from_secs(20),
            max_tries: 5,
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl Backoff {
    /// The ceiling of retry `n` (0-based): `min(cap, base·2ⁿ)`.
    pub fn ceiling(&self, n: u32) -> Duration {
        self.base
            .saturating_mul(2u32.saturating_pow(n.min(30)))
            .min(self.cap)
    }

    /// The delay before retry `n`: uniform in `[ceiling/2, ceiling]`
    /// (equal jitter: never zero, never in step with other stages), and
    /// at least the upstream's `Retry-After` up to `max_retry_after`.
    pub fn delay(&self, n: u32, retry_after: Option<Duration>) -> Duration {
        let c = self.ceiling(n);
        let half = c / 2;
        let span = u64::try_from((c - half).as_millis()).unwrap_or(u64::MAX);
        let jittered = half + Duration::from_millis(fastrand::u64(0..=span));
        match retry_after {
            Some(r) => jittered.max(r.min(self.max_retry_after)),
            None => jittered,
        }
    }
}
