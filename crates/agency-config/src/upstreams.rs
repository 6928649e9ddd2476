//! The model upstreams at run time: each `[models.NAME]` with its key
//! filled in from the secrets read at start ([`Models`], what the gateway
//! forwards to) and the choice of each agent's upstream ([`ModelRoutes`]).
//! Their configuration (`[models]`, `[prices]`) is `crate::models`.

use std::collections::BTreeMap;

use crate::models::{Api, ImplicitKey, ModelUpstreamConfig, Price, Prices, UnknownApi, parse_api};
use crate::secrets::{self, SecretError, SecretString, Secrets, TemplateError};

/// Why an upstream could not be made ready; names `[models.NAME]`.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("[models.{name}] api_key: {cause}")]
    ApiKey { name: String, cause: TemplateError },
    #[error("[models.{name}] {cause}")]
    Api { name: String, cause: UnknownApi },
    /// A secret its `api_key` references could not be read.
    #[error(transparent)]
    Secret(#[from] SecretError),
}

/// An upstream ready to forward to: the key filled in (its `Debug`
/// redacted, as a `SecretString`'s).
#[derive(Debug, Clone)]
pub struct Upstream {
    pub api: Api,
    /// The root, without a trailing `/` or `/v1`.
    pub root: String,
    /// Sent upstream as its API wants it; read only there.
    pub key: Option<SecretString>,
    /// `[models.NAME] model`: the model every call is sent with.
    pub model: Option<String>,
    /// Output tokens reserved for a call without a cap.
    pub reserve_output_tokens: i64,
    /// The price of a model the table lacks (`None`: unpriced).
    pub default_price: Option<Price>,
    /// How long a request body may take to arrive.
    pub request_timeout: std::time::Duration,
    /// Request bytes one agent may have in flight at once.
    pub agent_request_bytes: usize,
}

/// The upstreams by name, with their keys, and the price table.
#[derive(Debug, Clone, Default)]
pub struct Models {
    upstreams: BTreeMap<String, Upstream>,
    pub prices: Prices,
    /// The running runtime's `upstream` (empty: none, e.g. `none`: an
    /// attached client may use any upstream) and the API it speaks.
    runtime_default: String,
    runtime_api: Option<Api>,
}

impl Models {
    /// Fill the keys in (validation already checked every reference).
    pub fn new(
        cfg: &BTreeMap<String, ModelUpstreamConfig>,
        prices: &BTreeMap<String, Price>,
        secrets: &Secrets,
    ) -> Result<Models, UpstreamError> {
        let mut upstreams = BTreeMap::new();
        for (name, m) in cfg {
            let key = if let Some(k) = &m.implicit_key {
                match k {
                    ImplicitKey::Env(var) => std::env::var(var).ok().map(SecretString::from),
                    ImplicitKey::Literal(v) => Some(SecretString::from(v.as_str())),
                }
            } else if m.api_key.is_empty() {
                None
            } else {
                Some(secrets::interpolate(&m.api_key, secrets).map_err(|cause| {
                    UpstreamError::ApiKey {
                        name: name.clone(),
                        cause,
                    }
                })?)
            };
            upstreams.insert(
                name.clone(),
                Upstream {
                    api: parse_api(&m.api).map_err(|cause| UpstreamError::Api {
                        name: name.clone(),
                        cause,
                    })?,
                    root: root_of(&m.base_url),
                    key,
                    model: (!m.model.is_empty()).then(|| m.model.clone()),
                    reserve_output_tokens: m.reserve_output_tokens,
                    default_price: m.default_price,
                    request_timeout: std::time::Duration::from_secs(m.request_timeout_secs),
                    agent_request_bytes: usize::try_from(m.agent_request_bytes)
                        .unwrap_or(usize::MAX),
                },
            );
        }
        Ok(Models {
            upstreams,
            prices: Prices::new(prices),
            runtime_default: String::new(),
            runtime_api: None,
        })
    }

    pub fn get(&self, name: &str) -> Option<&Upstream> {
        self.upstreams.get(name)
    }

    /// The price of `model` called through `upstream`: the table's, else
    /// the upstream's `default_price`; `None`: unpriced.
    pub fn price(&self, upstream: &Upstream, model: &str) -> Option<Price> {
        self.prices.of(model).copied().or(upstream.default_price)
    }

    /// Name the running runtime's `upstream` and the API it speaks.
    pub fn set_runtime(&mut self, default: &str, api: Option<Api>) {
        default.clone_into(&mut self.runtime_default);
        self.runtime_api = api;
    }

    /// The upstreams the runtime can use (for `agency model set`).
    pub fn usable(&self) -> impl Iterator<Item = &str> {
        self.upstreams
            .iter()
            .filter(|(_, u)| self.runtime_api.is_none_or(|a| a == u.api))
            .map(|(n, _)| n.as_str())
    }

    /// The one upstream an agent whose handler chose `chosen` may use, as
    /// [`ModelRoutes::route`] picks it at spawn; `None`: any (no runtime
    /// default and no choice).
    pub fn allowed_for<'a>(&'a self, chosen: Option<&'a str>) -> Option<&'a str> {
        if let Some(c) = chosen
            && self.usable().any(|n| n == c)
        {
            return Some(c);
        }
        (!self.runtime_default.is_empty()).then_some(self.runtime_default.as_str())
    }
}

/// The upstream `[models.NAME]` with its key read, for the user's own
/// process rather than the daemon (the CLI's `compile --assist`, which
/// calls the provider directly: no agent is involved). Only the secrets
/// its `api_key` references are read, so another upstream's password
/// manager is not woken; `None` when agency.toml declares no such upstream.
pub fn load_upstream(
    cfg: &crate::Config,
    home: &std::path::Path,
    name: &str,
) -> Result<Option<Upstream>, UpstreamError> {
    let Some(m) = cfg.models.get(name) else {
        return Ok(None);
    };
    let wanted = secrets::references(&m.api_key).map_err(|cause| UpstreamError::ApiKey {
        name: name.to_owned(),
        cause,
    })?;
    let sources: BTreeMap<String, secrets::SecretSource> = cfg
        .secrets
        .iter()
        .filter(|(k, _)| wanted.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let read = Secrets::load(&sources, home)?;
    let one = BTreeMap::from([(name.to_owned(), m.clone())]);
    let models = Models::new(&one, &BTreeMap::new(), &read)?;
    Ok(models.get(name).cloned())
}

/// `https://h/v1/` → `https://h`: the gateway's paths carry the `/v1`.
fn root_of(base_url: &str) -> String {
    let r = base_url.trim_end_matches('/');
    r.strip_suffix("/v1").unwrap_or(r).to_owned()
}

/// The model upstream one agent reaches through the gateway.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelRoute {
    /// `[models.NAME]`: the gateway's `/model/NAME`.
    pub upstream: String,
    /// The API it speaks.
    pub api: Api,
    /// `[models.NAME] model`, when set.
    pub model: Option<String>,
}

/// How a runtime picks each agent's upstream: the handler's own (`agency
/// model set`, inherited down the tree), else the runtime's `upstream`.
#[derive(Debug, Clone, Default)]
pub struct ModelRoutes {
    /// The runtime's `upstream` (empty: none).
    pub default: String,
    /// Only upstreams of this API are usable (Claude Code: Anthropic).
    pub only: Option<Api>,
    upstreams: BTreeMap<String, (Api, Option<String>)>,
}

impl ModelRoutes {
    pub fn new(
        models: &BTreeMap<String, ModelUpstreamConfig>,
        default: &str,
        only: Option<Api>,
    ) -> ModelRoutes {
        ModelRoutes {
            default: default.to_owned(),
            only,
            upstreams: models
                .iter()
                .filter_map(|(n, m)| {
                    let api = parse_api(&m.api).ok()?;
                    Some((
                        n.clone(),
                        (api, (!m.model.is_empty()).then(|| m.model.clone())),
                    ))
                })
                .collect(),
        }
    }

    /// The route of an agent whose handler chose `chosen`. A choice the
    /// configuration no longer declares (or of an API the runtime does not
    /// speak) falls back to the runtime's default, with a warning: the
    /// agent still starts, on the model the user configured for all.
    pub fn route(&self, chosen: Option<&str>) -> Option<ModelRoute> {
        let usable = |n: &str| {
            self.upstreams
                .get(n)
                .filter(|(api, _)| self.only.is_none_or(|o| o == *api))
                .map(|(api, model)| ModelRoute {
                    upstream: n.to_owned(),
                    api: *api,
                    model: model.clone(),
                })
        };
        if let Some(c) = chosen {
            if let Some(r) = usable(c) {
                return Some(r);
            }
            tracing::warn!(
                upstream = c,
                default = %self.default,
                "a handler's model upstream is not a usable [models.NAME] of this runtime; its agent uses the runtime's upstream"
            );
        }
        usable(&self.default)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "upstreams_tests.rs"]
mod tests;
