//! `[models.NAME]` and `[prices]`: the upstreams the daemon's model
//! gateway forwards to, and the price table that turns a call's usage
//! into cost.
//!
//! An upstream's `api_key` may hold `${secret:NAME}`: it is filled in from
//! `[secrets]` in the daemon and sent only to that upstream's `base_url`
//! (`x-api-key` for the Anthropic API, `Authorization: Bearer` for the
//! OpenAI one). Agents get the gateway's URL and their own token instead.

use std::collections::BTreeMap;

use agency_store::TokenUsage;
use serde::{Deserialize, Serialize};

use crate::secrets;

/// One upstream model API.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelUpstreamConfig {
    /// `anthropic` (Messages API, `count_tokens`) or `openai` (chat
    /// completions: OpenAI, Ollama, vLLM, llama.cpp server).
    pub api: String,
    /// The API's root URL, e.g. `https://api.anthropic.com` or
    /// `https://api.openai.com/v1` (a trailing `/v1` is optional).
    pub base_url: String,
    /// The provider key, normally `${secret:NAME}` (empty: none, e.g. a
    /// local server).
    #[serde(default)]
    pub api_key: String,
    /// The model every call through this upstream uses (the gateway sets
    /// the request's `model` to it, and agents are started with it), so
    /// that a handler given this upstream cannot pick a dearer model.
    /// Empty: the runtime's `model`, and whatever the agent asks for.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub model: String,
    /// The output tokens a budget reserves for a call that sets no cap
    /// (`max_tokens` / `max_completion_tokens`; a chat completion may omit
    /// it): without a worst case, parallel calls could spend far past a
    /// cap before any of them settled. Times `n`. Settling corrects it.
    #[serde(default = "default_reserve_output_tokens")]
    pub reserve_output_tokens: i64,
    /// The price of a model this upstream serves that `[prices]` and the
    /// defaults do not list (e.g. `{ input = 0.0, output = 0.0 }` for a
    /// local server). Without it such a model is *unpriced*: its calls are
    /// flagged in `agency cost` and refused under a budget that limits cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_price: Option<Price>,
    /// Seconds a request's whole body may take to arrive; a stalled upload
    /// is refused (408) rather than held.
    #[serde(default = "default_request_timeout_secs")]
    pub request_timeout_secs: u64,
    /// Bytes of request bodies one agent may have in flight through the
    /// gateway at once (being read, or waiting for the upstream); past it
    /// the request is refused (413).
    #[serde(default = "default_agent_request_bytes")]
    pub agent_request_bytes: u64,
    /// Only for the upstream made from the deprecated direct settings
    /// (`route_direct_settings`): where its key comes from. Never
    /// serialized; the value itself is read by the daemon alone.
    #[serde(skip)]
    pub implicit_key: Option<ImplicitKey>,
}

fn default_reserve_output_tokens() -> i64 {
    DEFAULT_RESERVE_OUTPUT_TOKENS
}
fn default_request_timeout_secs() -> u64 {
    DEFAULT_REQUEST_TIMEOUT_SECS
}
fn default_agent_request_bytes() -> u64 {
    DEFAULT_AGENT_REQUEST_BYTES
}

/// `reserve_output_tokens` when not set: a long answer of most models.
pub const DEFAULT_RESERVE_OUTPUT_TOKENS: i64 = 8192;
/// `request_timeout_secs` when not set.
pub const DEFAULT_REQUEST_TIMEOUT_SECS: u64 = 60;
/// `agent_request_bytes` when not set: two requests of the largest size
/// the gateway reads (32 MiB each).
pub const DEFAULT_AGENT_REQUEST_BYTES: u64 = 64 << 20;

impl ModelUpstreamConfig {
    /// An upstream with every optional setting at its default.
    pub fn new(api: &str, base_url: String) -> ModelUpstreamConfig {
        ModelUpstreamConfig {
            api: api.to_owned(),
            base_url,
            api_key: String::new(),
            model: String::new(),
            reserve_output_tokens: DEFAULT_RESERVE_OUTPUT_TOKENS,
            default_price: None,
            request_timeout_secs: DEFAULT_REQUEST_TIMEOUT_SECS,
            agent_request_bytes: DEFAULT_AGENT_REQUEST_BYTES,
            implicit_key: None,
        }
    }
}

/// The key of an upstream made from deprecated direct settings.
#[derive(Clone, PartialEq, Eq)]
pub enum ImplicitKey {
    /// A variable of the daemon's environment (`api_key_env`), read when
    /// the daemon starts; unset means no key, as it did before.
    Env(String),
    /// `agents.claude_code.env.ANTHROPIC_API_KEY` as written.
    Literal(String),
}

impl std::fmt::Debug for ImplicitKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A literal key must not reach a log; the variable's name may.
        match self {
            ImplicitKey::Env(var) => f.debug_tuple("Env").field(var).finish(),
            ImplicitKey::Literal(_) => f.write_str("Literal(…)"),
        }
    }
}

impl std::fmt::Debug for ModelUpstreamConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A key written into agency.toml as it is must not reach a log.
        f.debug_struct("ModelUpstreamConfig")
            .field("api", &self.api)
            .field("base_url", &self.base_url)
            .finish_non_exhaustive()
    }
}

/// Prices of one model in US dollars per million tokens.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    #[serde(default)]
    pub cache_read: f64,
    #[serde(default)]
    pub cache_write: f64,
}

// Prices are compared only to tell whether a configuration changed; the
// bit patterns are what was parsed, so bitwise equality is the right one.
impl PartialEq for Price {
    fn eq(&self, o: &Self) -> bool {
        [self.input, self.output, self.cache_read, self.cache_write].map(f64::to_bits)
            == [o.input, o.output, o.cache_read, o.cache_write].map(f64::to_bits)
    }
}
impl Eq for Price {}

impl Price {
    const fn new(input: f64, output: f64, cache_read: f64, cache_write: f64) -> Price {
        Price {
            input,
            output,
            cache_read,
            cache_write,
        }
    }

    /// Finite and not negative.
    fn is_valid(&self) -> bool {
        [self.input, self.output, self.cache_read, self.cache_write]
            .iter()
            .all(|v| v.is_finite() && *v >= 0.0)
    }

    /// The cost of `u` in micro-dollars (a price per million tokens is a
    /// price in micro-dollars per token), rounded to the nearest.
    pub fn cost_micro_usd(&self, u: &TokenUsage) -> i64 {
        let c = u.input_tokens as f64 * self.input
            + u.output_tokens as f64 * self.output
            + u.cache_read_tokens as f64 * self.cache_read
            + u.cache_write_tokens as f64 * self.cache_write;
        c.round() as i64
    }
}

/// Default prices (USD per million tokens: input, output, cache read,
/// cache write), matched by the longest prefix of the model name, so that
/// dated names (`claude-sonnet-4-5-20250929`) find their family.
/// `[prices."NAME"]` overrides or extends them.
pub const DEFAULT_PRICES: &[(&str, Price)] = &[
    ("claude-opus-4-5", Price::new(5.0, 25.0, 0.5, 6.25)),
    ("claude-opus-4", Price::new(15.0, 75.0, 1.5, 18.75)),
    ("claude-sonnet-4", Price::new(3.0, 15.0, 0.3, 3.75)),
    ("claude-3-7-sonnet", Price::new(3.0, 15.0, 0.3, 3.75)),
    ("claude-3-5-sonnet", Price::new(3.0, 15.0, 0.3, 3.75)),
    ("claude-haiku-4-5", Price::new(1.0, 5.0, 0.1, 1.25)),
    ("claude-3-5-haiku", Price::new(0.8, 4.0, 0.08, 1.0)),
    ("claude-3-haiku", Price::new(0.25, 1.25, 0.03, 0.3)),
    ("gpt-5-mini", Price::new(0.25, 2.0, 0.025, 0.0)),
    ("gpt-5-nano", Price::new(0.05, 0.4, 0.005, 0.0)),
    ("gpt-5", Price::new(1.25, 10.0, 0.125, 0.0)),
    ("gpt-4.1-mini", Price::new(0.4, 1.6, 0.1, 0.0)),
    ("gpt-4.1-nano", Price::new(0.1, 0.4, 0.025, 0.0)),
    ("gpt-4.1", Price::new(2.0, 8.0, 0.5, 0.0)),
    ("gpt-4o-mini", Price::new(0.15, 0.6, 0.075, 0.0)),
    ("gpt-4o", Price::new(2.5, 10.0, 1.25, 0.0)),
    ("o4-mini", Price::new(1.1, 4.4, 0.275, 0.0)),
    ("o3", Price::new(2.0, 8.0, 0.5, 0.0)),
    // Agency's own scripted model server (`agency model-server`, the
    // demos, the tests): its answers cost nothing, and saying so keeps it
    // usable under the cost budget `agency init` sets (an unpriced model
    // is refused there).
    ("scripted", Price::new(0.0, 0.0, 0.0, 0.0)),
];

/// The price table: the defaults, then `[prices]`.
#[derive(Debug, Clone, Default)]
pub struct Prices {
    table: BTreeMap<String, Price>,
}

impl Prices {
    pub fn new(configured: &BTreeMap<String, Price>) -> Prices {
        let mut table: BTreeMap<String, Price> = DEFAULT_PRICES
            .iter()
            .map(|(k, p)| ((*k).to_owned(), *p))
            .collect();
        table.extend(configured.iter().map(|(k, p)| (k.clone(), *p)));
        Prices { table }
    }

    /// The price of `model`: an exact entry, else the longest entry the
    /// name starts with; `None` for a model nobody priced (unless its
    /// upstream has a `default_price`, it is unpriced: see
    /// the daemon's `Models::price`).
    pub fn of(&self, model: &str) -> Option<&Price> {
        if let Some(p) = self.table.get(model) {
            return Some(p);
        }
        self.table
            .iter()
            .filter(|(k, _)| model.starts_with(k.as_str()))
            .max_by_key(|(k, _)| k.len())
            .map(|(_, p)| p)
    }

    /// The cost of `usage` of `model`; 0 for an unpriced one, which the
    /// gateway records as unpriced, never as free.
    pub fn cost_micro_usd(&self, model: &str, usage: &TokenUsage) -> i64 {
        self.of(model).map_or(0, |p| p.cost_micro_usd(usage))
    }
}

/// The two APIs the gateway speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    Anthropic,
    OpenAi,
}

impl Api {
    pub fn as_str(self) -> &'static str {
        match self {
            Api::Anthropic => "anthropic",
            Api::OpenAi => "openai",
        }
    }
}

/// An `api` that is not one Agency speaks; holds the value given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("api = {0:?} is not \"anthropic\" or \"openai\"")]
pub struct UnknownApi(pub String);

/// The API named by `[models.NAME] api`.
pub fn parse_api(api: &str) -> Result<Api, UnknownApi> {
    match api {
        "anthropic" => Ok(Api::Anthropic),
        "openai" => Ok(Api::OpenAi),
        other => Err(UnknownApi(other.to_owned())),
    }
}

/// The largest `reserve_output_tokens` (no model answers more).
const MAX_RESERVE_OUTPUT_TOKENS: i64 = 10_000_000;
/// The smallest `agent_request_bytes`: a small conversation.
const MIN_AGENT_REQUEST_BYTES: u64 = 64 << 10;

/// Check `[models]` and `[prices]`: API names, URLs, secret references,
/// and prices that are finite and not negative. Errors name the entry.
pub(crate) fn validate(
    models: &BTreeMap<String, ModelUpstreamConfig>,
    prices: &BTreeMap<String, Price>,
    declared: &BTreeMap<String, secrets::SecretSource>,
) -> Result<(), String> {
    for (name, m) in models {
        agency_core::validate::check_name("model upstream", name)
            .map_err(|e| format!("[models]: {e}"))?;
        parse_api(&m.api).map_err(|e| format!("[models.{name}] {e}"))?;
        let url = url::Url::parse(&m.base_url)
            .map_err(|e| format!("[models.{name}] base_url {:?}: {e}", m.base_url))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(format!(
                "[models.{name}] base_url {:?} is not an http(s) URL with a host",
                m.base_url
            ));
        }
        if !url.username().is_empty() || url.password().is_some() || url.query().is_some() {
            return Err(format!(
                "[models.{name}] base_url must hold no credentials or query: put the key in api_key = \"${{secret:NAME}}\""
            ));
        }
        // Each is enforced by the gateway; one it could not honour is
        // refused here rather than accepted and ignored.
        if !(1..=MAX_RESERVE_OUTPUT_TOKENS).contains(&m.reserve_output_tokens) {
            return Err(format!(
                "[models.{name}] reserve_output_tokens = {}: it must be a whole number of tokens from 1 to {MAX_RESERVE_OUTPUT_TOKENS} (the output a budget reserves for a call without max_tokens)",
                m.reserve_output_tokens
            ));
        }
        if !(1..=3600).contains(&m.request_timeout_secs) {
            return Err(format!(
                "[models.{name}] request_timeout_secs = {}: it must be from 1 to 3600 seconds",
                m.request_timeout_secs
            ));
        }
        if m.agent_request_bytes < MIN_AGENT_REQUEST_BYTES {
            return Err(format!(
                "[models.{name}] agent_request_bytes = {}: it must be at least {MIN_AGENT_REQUEST_BYTES} bytes (the request bodies one agent may have in flight)",
                m.agent_request_bytes
            ));
        }
        if let Some(p) = &m.default_price
            && !p.is_valid()
        {
            return Err(format!(
                "[models.{name}] default_price: prices are US dollars per million tokens, finite and not negative"
            ));
        }
        for s in
            secrets::references(&m.api_key).map_err(|e| format!("[models.{name}] api_key: {e}"))?
        {
            if !declared.contains_key(s) {
                return Err(format!(
                    "[models.{name}] api_key: secret {s:?} is not declared in [secrets]"
                ));
            }
        }
    }
    for (model, p) in prices {
        if !p.is_valid() {
            return Err(format!(
                "[prices.{model:?}]: prices are US dollars per million tokens, finite and not negative"
            ));
        }
    }
    Ok(())
}

/// The runtimes' `upstream`: a declared `[models.NAME]` of an API the
/// runtime speaks, and no setting left that would still hand the agent a
/// provider key or point it past the gateway.
pub(crate) fn check_upstreams(cfg: &crate::config::Config) -> Result<(), String> {
    let declared = |field: &str, name: &str| -> Result<&ModelUpstreamConfig, String> {
        cfg.models
            .get(name)
            .ok_or_else(|| format!("{field} = {name:?}: agency.toml declares no [models.{name}]"))
    };
    let b = &cfg.agents.builtin;
    if !b.upstream.is_empty() {
        declared("agents.builtin.upstream", &b.upstream)?;
        if !b.api_key_env.is_empty() {
            return Err(
                "agents.builtin.upstream and agents.builtin.api_key_env: with an upstream the key stays in the daemon ([models.NAME] api_key); remove api_key_env".to_owned(),
            );
        }
    }
    if !cfg.agents.command.upstream.is_empty() {
        declared("agents.command.upstream", &cfg.agents.command.upstream)?;
    }
    let c = &cfg.agents.claude_code;
    if !c.upstream.is_empty() {
        let m = declared("agents.claude_code.upstream", &c.upstream)?;
        if m.api != "anthropic" {
            return Err(format!(
                "agents.claude_code.upstream = {:?}: Claude Code speaks the Anthropic API, [models.{}] has api = {:?}",
                c.upstream, c.upstream, m.api
            ));
        }
        if !c.api_key_env.is_empty() {
            return Err(
                "agents.claude_code.upstream and agents.claude_code.api_key_env: with an upstream the key stays in the daemon ([models.NAME] api_key); remove api_key_env".to_owned(),
            );
        }
        for k in GATEWAY_ENV {
            if c.env.contains_key(*k) {
                return Err(format!(
                    "agents.claude_code.env.{k}: with agents.claude_code.upstream the daemon sets it (the gateway's URL and the agent's own token)"
                ));
            }
        }
    }
    Ok(())
}

/// The upstream the deprecated direct settings become.
pub const IMPLICIT_UPSTREAM: &str = "default";

/// Route the deprecated direct settings through the gateway: the running
/// runtime's `agents.builtin.base_url` (+ `api_key_env`), or Claude Code's
/// `api_key_env` and `env.ANTHROPIC_BASE_URL` / `env.ANTHROPIC_API_KEY`
/// (Claude Code's default `https://api.anthropic.com` when none is set),
/// become the upstream [`IMPLICIT_UPSTREAM`] and the runtime's `upstream`
/// names it. The agent then gets the gateway's URL and its own token, the
/// key stays in the daemon, and every call is metered and budgeted like
/// any other: no agent reaches a model past the gateway. Returns one
/// deprecation notice per rewritten runtime (the daemon logs them).
pub(crate) fn route_direct_settings(
    cfg: &mut crate::config::Config,
) -> Result<Vec<String>, String> {
    let taken = |field: &str| -> Result<(), String> {
        if cfg.models.contains_key(IMPLICIT_UPSTREAM) {
            return Err(format!(
                "{field} would become the upstream [models.{IMPLICIT_UPSTREAM}], which agency.toml already declares; set the runtime's upstream = \"{IMPLICIT_UPSTREAM}\" and remove {field}"
            ));
        }
        Ok(())
    };
    let mut notices = Vec::new();
    if cfg.agents.runtime == "builtin"
        && !cfg.agents.builtin.upstream.is_empty()
        && !cfg.agents.builtin.base_url.is_empty()
    {
        notices.push(format!(
            "agents.builtin.base_url = {:?} is not used: the agents reach agents.builtin.upstream = {:?} through the daemon's model gateway; remove base_url",
            cfg.agents.builtin.base_url, cfg.agents.builtin.upstream
        ));
    }
    match cfg.agents.runtime.as_str() {
        "builtin" if cfg.agents.builtin.upstream.is_empty() => {
            let b = &cfg.agents.builtin;
            if b.base_url.is_empty() {
                return Ok(notices); // refused by the runtime's own check
            }
            taken("agents.builtin.base_url")?;
            let b = &mut cfg.agents.builtin;
            let implicit_key =
                (!b.api_key_env.is_empty()).then(|| ImplicitKey::Env(b.api_key_env.clone()));
            let upstream = ModelUpstreamConfig {
                implicit_key,
                ..ModelUpstreamConfig::new(&b.api, std::mem::take(&mut b.base_url))
            };
            notices.push(format!(
                "agents.builtin.base_url{} is deprecated: the agents reach {} through the daemon's model gateway as [models.{IMPLICIT_UPSTREAM}] (the key stays in the daemon); write [models.NAME] with api_key = \"${{secret:NAME}}\" and agents.builtin.upstream = \"NAME\" instead",
                if b.api_key_env.is_empty() { "" } else { " and api_key_env" },
                upstream.base_url,
            ));
            b.api_key_env.clear();
            b.upstream = IMPLICIT_UPSTREAM.to_owned();
            cfg.models.insert(IMPLICIT_UPSTREAM.to_owned(), upstream);
        }
        "claude-code" if cfg.agents.claude_code.upstream.is_empty() => {
            if cfg
                .agents
                .claude_code
                .env
                .contains_key("ANTHROPIC_AUTH_TOKEN")
            {
                return Err(
                    "agents.claude_code.env.ANTHROPIC_AUTH_TOKEN: Claude Code reaches its model only through the daemon's model gateway, with its own token; declare [models.NAME] (api = \"anthropic\", api_key = \"${secret:NAME}\") and set agents.claude_code.upstream = \"NAME\"".to_owned(),
                );
            }
            taken("agents.claude_code (no upstream)")?;
            let c = &mut cfg.agents.claude_code;
            let url = c.env.remove("ANTHROPIC_BASE_URL");
            let literal = c.env.remove("ANTHROPIC_API_KEY");
            let implicit_key = if c.api_key_env.is_empty() {
                literal.map(ImplicitKey::Literal)
            } else {
                Some(ImplicitKey::Env(std::mem::take(&mut c.api_key_env)))
            };
            let base_url = url.unwrap_or_else(|| "https://api.anthropic.com".to_owned());
            notices.push(format!(
                "agents.claude_code has no upstream: Claude Code reaches {base_url} through the daemon's model gateway as [models.{IMPLICIT_UPSTREAM}] (api_key_env and env.ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY are deprecated; the key stays in the daemon); write [models.NAME] with api_key = \"${{secret:NAME}}\" and agents.claude_code.upstream = \"NAME\" instead"
            ));
            c.upstream = IMPLICIT_UPSTREAM.to_owned();
            cfg.models.insert(
                IMPLICIT_UPSTREAM.to_owned(),
                ModelUpstreamConfig {
                    implicit_key,
                    ..ModelUpstreamConfig::new("anthropic", base_url)
                },
            );
        }
        _ => {}
    }
    Ok(notices)
}

/// What Claude Code is given to reach the gateway; `env` may not set them.
const GATEWAY_ENV: &[&str] = &[
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
];

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "models_tests.rs"]
mod tests;
