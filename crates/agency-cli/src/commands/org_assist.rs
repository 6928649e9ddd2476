//! `--assist` on the command line (`agency compile`, `agency explain`,
//! `agency up`): text the organisation compiler could not place is sent to
//! a model upstream of the home's `agency.toml` (`[models.default]`, or
//! `--assist-model NAME`), one blocking request per piece of text. The
//! library checks every answer against the same schema as frontmatter, so
//! a wrong answer is a diagnostic; this module only speaks HTTP.
//!
//! The CLI is the user's own process, so it calls the provider directly
//! with the user's key (read by the daemon crate's own loader); no agent
//! and no daemon are involved. The key is sent only to that upstream and
//! never printed.

use std::cell::Cell;
use std::io::Read as _;
use std::path::PathBuf;
use std::time::Duration;

use agency_config::Home;
use agency_config::models::Api;
use agency_config::secrets::ExposeSecret;
use agency_config::upstreams::Upstream;
use agency_org::{Assist, AssistError, AssistRequest};
use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::{Value, json};

/// The most requests one run sends: a folder of many unknown sections is
/// more likely a wrong folder than a wish to pay for that many calls.
pub const MAX_REQUESTS: usize = 50;
/// Per request, connection to last byte.
const TIMEOUT: Duration = Duration::from_secs(30);
/// An answer is one small JSON object; anything longer is refused.
const MAX_ANSWER_BYTES: u64 = 1 << 20;
const MAX_TOKENS: u32 = 1024;

#[derive(Debug, Clone, Args)]
pub struct AssistArgs {
    /// Send text the compiler cannot place (an unknown section, a tool
    /// without an implementation) to the model upstream `[models.default]`
    /// of the home's agency.toml; its answers are checked like frontmatter
    /// and reported as warnings. Off by default.
    #[arg(long)]
    pub assist: bool,
    /// With --assist (implies it): use `[models.NAME]` instead of `default`.
    #[arg(long, value_name = "NAME")]
    pub assist_model: Option<String>,
}

impl AssistArgs {
    fn wanted(&self) -> Option<&str> {
        match (&self.assist_model, self.assist) {
            (Some(n), _) => Some(n),
            (None, true) => Some(agency_config::models::IMPLICIT_UPSTREAM),
            (None, false) => None,
        }
    }
}

/// The model-backed assistant: one upstream, a request counter.
pub struct ModelAssist {
    name: String,
    upstream: Upstream,
    model: String,
    http: reqwest::blocking::Client,
    sent: Cell<usize>,
    over_limit: Cell<bool>,
}

/// The assistant `args` asks for, or `None` without `--assist`. A missing
/// home, upstream or model is an error naming what to add: a run that
/// asked for the model never quietly compiles without it.
pub fn from_args(args: &AssistArgs, home: Option<PathBuf>) -> Result<Option<ModelAssist>> {
    let Some(name) = args.wanted() else {
        return Ok(None);
    };
    let home = Home::resolve(home).context("failed to find the Agency home for --assist")?;
    if !home.exists() {
        bail!(
            "failed to use --assist: {} is not an Agency home (no agency.toml); run `agency init` there (or give --home) and declare [models.{name}] in its agency.toml",
            home.dir().display()
        );
    }
    let cfg = home
        .config()
        .context("failed to read agency.toml for --assist")?;
    let upstream = agency_config::upstreams::load_upstream(&cfg, home.dir(), name)
        .map_err(|e| anyhow::anyhow!("failed to use --assist with [models.{name}]: {e}"))?;
    let Some(upstream) = upstream else {
        bail!(
            "failed to use --assist: {} declares no [models.{name}]; add one (api = \"anthropic\" or \"openai\", base_url, api_key = \"${{secret:NAME}}\", model), or name another with --assist-model",
            home.config_path().display()
        );
    };
    // The upstream's own model, else the model of the runtime that uses
    // this upstream (what the agents of this home would be sent with).
    let a = &cfg.agents;
    let model = upstream
        .model
        .clone()
        .or_else(|| {
            (a.builtin.upstream == name && !a.builtin.model.is_empty())
                .then(|| a.builtin.model.clone())
        })
        .or_else(|| {
            (a.claude_code.upstream == name && !a.claude_code.model.is_empty())
                .then(|| a.claude_code.model.clone())
        });
    let Some(model) = model else {
        bail!(
            "failed to use --assist: [models.{name}] in {} names no model; add model = \"…\" to it",
            home.config_path().display()
        );
    };
    let http = reqwest::blocking::Client::builder()
        .timeout(TIMEOUT)
        .build()
        .context("failed to build the HTTP client for --assist")?;
    Ok(Some(ModelAssist {
        name: name.to_owned(),
        upstream,
        model,
        http,
        sent: Cell::new(0),
        over_limit: Cell::new(false),
    }))
}

impl ModelAssist {
    /// Requests sent so far.
    pub fn sent(&self) -> usize {
        self.sent.get()
    }

    /// Whether some text was not offered because the bound was reached.
    pub fn over_limit(&self) -> bool {
        self.over_limit.get()
    }

    /// `[models.NAME] (model)`, for messages.
    pub fn describe(&self) -> String {
        format!("[models.{}] ({})", self.name, self.model)
    }

    fn ask(&self, prompt: &str) -> Result<String, ModelAssistError> {
        let name = || self.name.clone();
        let (url, body) = match self.upstream.api {
            Api::Anthropic => (
                format!("{}/v1/messages", self.upstream.root),
                json!({"model": self.model, "max_tokens": MAX_TOKENS,
                       "messages": [{"role": "user", "content": prompt}]}),
            ),
            Api::OpenAi => (
                format!("{}/v1/chat/completions", self.upstream.root),
                json!({"model": self.model, "max_tokens": MAX_TOKENS,
                       "messages": [{"role": "user", "content": prompt}]}),
            ),
        };
        let mut req = self.http.post(&url).json(&body);
        if let Some(k) = &self.upstream.key {
            req = match self.upstream.api {
                Api::Anthropic => req.header("x-api-key", k.expose_secret()),
                Api::OpenAi => req.bearer_auth(k.expose_secret()),
            };
        }
        if self.upstream.api == Api::Anthropic {
            req = req.header("anthropic-version", "2023-06-01");
        }
        // reqwest's error text names the URL, never a header: no key in it.
        let resp = req.send().map_err(|cause| ModelAssistError::Reach {
            name: name(),
            url: url.clone(),
            cause,
        })?;
        let status = resp.status();
        let mut text = String::new();
        resp.take(MAX_ANSWER_BYTES)
            .read_to_string(&mut text)
            .map_err(|cause| ModelAssistError::Read {
                name: name(),
                cause,
            })?;
        if !status.is_success() {
            return Err(ModelAssistError::Status {
                name: name(),
                status,
                body: clip(&text, 300),
            });
        }
        let v: Value = serde_json::from_str(&text).map_err(|cause| ModelAssistError::NotJson {
            name: name(),
            cause,
        })?;
        let content = match self.upstream.api {
            Api::Anthropic => v["content"].as_array().map(|blocks| {
                blocks
                    .iter()
                    .filter(|b| b["type"] == "text")
                    .filter_map(|b| b["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n")
            }),
            Api::OpenAi => v["choices"][0]["message"]["content"]
                .as_str()
                .map(str::to_owned),
        };
        content.ok_or_else(|| ModelAssistError::NoText { name: name() })
    }

    /// One request: the bound checked, the model asked, its object found.
    fn try_place(&self, request: &AssistRequest) -> Result<Value, ModelAssistError> {
        if self.sent.get() >= MAX_REQUESTS {
            self.over_limit.set(true);
            return Err(ModelAssistError::OverLimit {
                name: self.name.clone(),
            });
        }
        self.sent.set(self.sent.get() + 1);
        let text = self.ask(&agency_org::assist::prompt(request))?;
        extract_object(&text).map_err(|cause| ModelAssistError::NoObject {
            name: self.name.clone(),
            cause,
        })
    }
}

impl Assist for ModelAssist {
    fn place(&self, request: &AssistRequest) -> Result<Value, AssistError> {
        self.try_place(request).map_err(AssistError::new)
    }
}

/// Why the model upstream `[models.NAME]` placed nothing; reported by the
/// compiler as a warning. Causes are in the message, not `#[source]`s:
/// printed once, however the error is printed.
#[derive(Debug, thiserror::Error)]
pub enum ModelAssistError {
    #[error(
        "not asked: this run already sent {max} requests to [models.{name}], the most one run sends",
        max = MAX_REQUESTS
    )]
    OverLimit { name: String },
    #[error("failed to reach [models.{name}] at {url}: {cause}")]
    Reach {
        name: String,
        url: String,
        cause: reqwest::Error,
    },
    #[error("failed to read the answer of [models.{name}]: {cause}")]
    Read { name: String, cause: std::io::Error },
    /// `body` is the start of the answer.
    #[error("[models.{name}] answered HTTP {status}: {body}")]
    Status {
        name: String,
        status: reqwest::StatusCode,
        body: String,
    },
    #[error("the answer of [models.{name}] is not JSON ({cause})")]
    NotJson {
        name: String,
        cause: serde_json::Error,
    },
    #[error("the answer of [models.{name}] holds no text")]
    NoText { name: String },
    #[error("the answer of [models.{name}] {cause}")]
    NoObject { name: String, cause: NoObject },
}

/// Why a model's answer gives no object; holds the start of the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoObject {
    #[error("is JSON but not an object: {0}")]
    NotAnObject(String),
    #[error("holds no JSON object: {0}")]
    NoJson(String),
}

/// The one JSON object in a model's answer: the whole text, else inside a
/// ```json fence, else from the first `{` to the last `}`.
pub fn extract_object(text: &str) -> Result<Value, NoObject> {
    let t = text.trim();
    let fenced = t.find("```").and_then(|start| {
        let after = &t[start + 3..];
        let body = after.split_once('\n').map_or(after, |(_, rest)| rest);
        body.find("```").map(|end| &body[..end])
    });
    let braces = match (t.find('{'), t.rfind('}')) {
        (Some(a), Some(b)) if a < b => Some(&t[a..=b]),
        _ => None,
    };
    for candidate in [Some(t), fenced, braces].into_iter().flatten() {
        if let Ok(v) = serde_json::from_str::<Value>(candidate.trim()) {
            return if v.is_object() {
                Ok(v)
            } else {
                Err(NoObject::NotAnObject(clip(candidate, 200)))
            };
        }
    }
    Err(NoObject::NoJson(clip(t, 200)))
}

fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::extract_object;
    use serde_json::json;

    #[test]
    fn the_object_is_found_bare_fenced_or_in_prose() {
        let want = json!({"budget": {"usd": 5}});
        for text in [
            r#"{"budget": {"usd": 5}}"#,
            "```json\n{\"budget\": {\"usd\": 5}}\n```",
            "Here it is:\n```\n{\"budget\": {\"usd\": 5}}\n```\nDone.",
            "The answer is {\"budget\": {\"usd\": 5}} as asked.",
        ] {
            assert_eq!(extract_object(text), Ok(want.clone()), "{text}");
        }
        assert!(extract_object("[1, 2]").is_err());
        assert!(extract_object("no idea").is_err());
        assert!(extract_object("{not json}").is_err());
    }
}
