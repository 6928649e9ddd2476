//! [`GatewayModel`]: the [`ModelClient`] of the daemon's runner, over its
//! own model gateway (`POST /model/NAME/v1/messages` or
//! `/model/NAME/v1/chat/completions`, `Authorization: Bearer` with an
//! agent token), so that every call of a stage is reserved, metered and
//! charged like any agent's.
//!
//! How answers are classified (agency-gateway's refusals are
//! `{"error": {"kind", "message"}}`): a 429 whose kind is `budget` is the
//! gateway's budget refusal ([`CallError::Budget`]); any other 429 (the
//! upstream's rate limit, with its `Retry-After`), 408 (the gateway's body
//! deadline), a 5xx (the gateway's 502 `unavailable`, an upstream's 500,
//! 503, 529), a timeout or a refused connection is
//! [`CallError::Transport`]; 401 and 403 (`denied`: the token, a paused
//! subtree, another handler's upstream) are [`CallError::Policy`]; any
//! other status, or a 2xx body that is not the API's answer, is
//! [`CallError::Invalid`].

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, RETRY_AFTER};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::client::{BoxFuture, CallError, ModelAnswer, ModelClient, StructuredRequest};
use crate::wire::WireApi;

/// The `anthropic-version` header of Messages API calls.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Most characters of an error body quoted in a [`CallError`].
const MAX_ERROR_CHARS: usize = 500;

/// A `[models.NAME]` upstream as the runner sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Upstream {
    pub api: WireApi,
    /// The model id put in the body (the gateway replaces it when the
    /// upstream names its own).
    pub model: String,
    /// Whether it supports constrained output with a JSON Schema.
    pub constrained: bool,
}

/// Why a [`GatewayModel`] could not be built.
#[derive(Debug, thiserror::Error)]
pub enum GatewayError {
    #[error("failed to configure the model gateway client: {0:?} is not an http(s) URL")]
    Base(String),
    #[error(
        "failed to configure the model gateway client: upstream name {0:?} is not [A-Za-z0-9_.-]+"
    )]
    Name(String),
    #[error(
        "failed to configure the model gateway client: the default upstream {0} is not among the upstreams"
    )]
    Default(String),
    #[error("failed to configure the model gateway client: {0}")]
    Client(String),
}

/// The HTTP client of [`GatewayModel`]: `timeout` is the longest one call
/// may take, answer included; redirects are not followed.
pub fn http_client(timeout: Duration) -> Result<reqwest::Client, GatewayError> {
    reqwest::Client::builder()
        .timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| GatewayError::Client(e.to_string()))
}

/// Calls through the daemon's model gateway with an agent token.
pub struct GatewayModel {
    client: reqwest::Client,
    base: String,
    token: String,
    default: String,
    upstreams: BTreeMap<String, Upstream>,
}

impl std::fmt::Debug for GatewayModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayModel")
            .field("base", &self.base)
            .field("token", &"<redacted>")
            .field("default", &self.default)
            .field("upstreams", &self.upstreams)
            .finish()
    }
}

impl GatewayModel {
    /// `base`: the agents' listener (`http://127.0.0.1:PORT`); `timeout`:
    /// the longest one call may take, answer included.
    pub fn new(
        base: &str,
        token: String,
        default: &str,
        upstreams: BTreeMap<String, Upstream>,
        timeout: Duration,
    ) -> Result<Self, GatewayError> {
        Self::with_client(http_client(timeout)?, base, token, default, upstreams)
    }

    /// [`GatewayModel::new`] over an HTTP client made by [`http_client`]
    /// and shared: the runner keeps one for every stage, so a stage reuses
    /// a pooled connection to the gateway instead of building a client and
    /// opening a connection of its own. The client holds no credential;
    /// each request carries this model's token.
    pub fn with_client(
        client: reqwest::Client,
        base: &str,
        token: String,
        default: &str,
        upstreams: BTreeMap<String, Upstream>,
    ) -> Result<Self, GatewayError> {
        let url = reqwest::Url::parse(base).map_err(|_| GatewayError::Base(base.to_owned()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(GatewayError::Base(base.to_owned()));
        }
        for name in upstreams.keys() {
            let ok = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'));
            if !ok {
                return Err(GatewayError::Name(name.clone()));
            }
        }
        if !upstreams.contains_key(default) {
            return Err(GatewayError::Default(default.to_owned()));
        }
        Ok(GatewayModel {
            client,
            base: base.trim_end_matches('/').to_owned(),
            token,
            default: default.to_owned(),
            upstreams,
        })
    }

    fn upstream(&self, model: Option<&str>) -> Option<(&str, &Upstream)> {
        let name = model.unwrap_or(&self.default);
        self.upstreams
            .get_key_value(name)
            .map(|(k, u)| (k.as_str(), u))
    }

    async fn send(&self, req: &StructuredRequest) -> Result<ModelAnswer, CallError> {
        let Some((name, up)) = self.upstream(req.model.as_deref()) else {
            return Err(CallError::Invalid(format!(
                "no model upstream {:?} is configured",
                req.model
            )));
        };
        let url = format!("{}/model/{name}/{}", self.base, up.api.path());
        let mut rq = self
            .client
            .post(&url)
            .header(AUTHORIZATION, format!("Bearer {}", self.token))
            .json(&up.api.body(req, &up.model));
        if up.api == WireApi::Anthropic {
            // The Messages API requires it; the gateway passes it on.
            rq = rq.header("anthropic-version", ANTHROPIC_VERSION);
        }
        let sent = rq.send().await;
        let answer = sent.map_err(|e| CallError::Transport {
            status: None,
            retry_after: None,
            message: format!("failed to reach the model gateway: {}", e.without_url()),
        })?;
        let status = answer.status();
        let retry_after = answer
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let body = answer.bytes().await.map_err(|e| CallError::Transport {
            status: Some(status.as_u16()),
            retry_after: None,
            message: format!("failed to read the model's answer: {}", e.without_url()),
        })?;
        classify(up.api, status, retry_after, &body)
    }
}

/// An answer's status and body as the model's answer or a [`CallError`].
fn classify(
    api: WireApi,
    status: StatusCode,
    retry_after: Option<Duration>,
    body: &[u8],
) -> Result<ModelAnswer, CallError> {
    if status.is_success() {
        return api.parse(body).map_err(CallError::Invalid);
    }
    let (kind, message) = error_of(body);
    let message = format!("{status}: {message}");
    let code = status.as_u16();
    if code == 429 && kind.as_deref() == Some("budget") {
        return Err(CallError::Budget(message));
    }
    match code {
        429 | 408 | 500..=599 => Err(CallError::Transport {
            status: Some(code),
            retry_after,
            message,
        }),
        401 | 403 => Err(CallError::Policy(message)),
        _ => Err(CallError::Invalid(message)),
    }
}

/// The kind (agency's `error.kind`, a provider's `error.type`) and the
/// message of an error body; the body itself, cut short, when it is not
/// JSON.
fn error_of(body: &[u8]) -> (Option<String>, String) {
    let short = |s: &str| s.chars().take(MAX_ERROR_CHARS).collect::<String>();
    let Ok(v) = serde_json::from_slice::<Value>(body) else {
        return (None, short(&String::from_utf8_lossy(body)));
    };
    let e = &v["error"];
    let kind = e["kind"]
        .as_str()
        .or_else(|| e["type"].as_str())
        .map(str::to_owned);
    let message = e["message"]
        .as_str()
        .map_or_else(|| short(&v.to_string()), short);
    (kind, message)
}

impl ModelClient for GatewayModel {
    fn call<'a>(
        &'a self,
        req: &'a StructuredRequest,
    ) -> BoxFuture<'a, Result<ModelAnswer, CallError>> {
        Box::pin(self.send(req))
    }

    fn constrained(&self, model: Option<&str>) -> bool {
        self.upstream(model).is_some_and(|(_, u)| u.constrained)
    }

    /// `UPSTREAM/MODEL`: the `[models.UPSTREAM]` and the model id it sends.
    fn model_name(&self, model: Option<&str>) -> String {
        match self.upstream(model) {
            Some((name, u)) => format!("{name}/{}", u.model),
            None => model.unwrap_or(&self.default).to_owned(),
        }
    }
}

#[cfg(test)]
mod tests;
