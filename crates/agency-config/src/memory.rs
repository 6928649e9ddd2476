//! `[memory]` in `agency.toml`: how much of a handler's memory is
//! recalled into its agents' first message, when an agent is asked to
//! condense it, how large it may grow, and the optional embeddings endpoint
//! for semantic search (`[memory.embeddings]`, any OpenAI-compatible
//! `/v1/embeddings`, e.g. a local Ollama). Without that endpoint search is
//! full-text alone, and nothing fails.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::secrets::{self, SecretSource};

/// `[memory]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemorySettings {
    /// Budget of recalled memories in an agent's first message, in tokens
    /// (about 4 characters each); 0: recall nothing.
    pub recall_tokens: usize,
    /// Live memories of a handler past which its next agent is asked to
    /// condense them.
    pub condense_after: usize,
    /// Most live memories one handler may hold.
    pub max_per_handler: usize,
    /// The embeddings endpoint; none: full-text search only.
    pub embeddings: Option<EmbeddingsConfig>,
}

impl Default for MemorySettings {
    fn default() -> Self {
        let d = agency_service::MemoryConfig::default();
        MemorySettings {
            recall_tokens: d.recall_tokens,
            condense_after: d.condense_after,
            max_per_handler: d.max_per_handler,
            embeddings: None,
        }
    }
}

/// `[memory.embeddings]`: an OpenAI-compatible embeddings endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmbeddingsConfig {
    /// The server's root or its `/v1` (`/v1/embeddings` is added).
    pub base_url: String,
    pub model: String,
    /// Sent as `Authorization: Bearer`; normally `${secret:NAME}`; empty:
    /// none (a local server).
    #[serde(default)]
    pub api_key: String,
    /// The vector length the model gives; an answer of another length is
    /// refused (unset: whatever the model gives).
    #[serde(default)]
    pub dims: Option<usize>,
}

impl MemorySettings {
    /// What the service applies.
    pub fn service_config(&self) -> agency_service::MemoryConfig {
        agency_service::MemoryConfig {
            recall_tokens: self.recall_tokens,
            condense_after: self.condense_after,
            max_per_handler: self.max_per_handler,
            ..agency_service::MemoryConfig::default()
        }
    }
}

/// Check `[memory]`: ranges, the endpoint's URL and its secret references.
pub(crate) fn validate(
    m: &MemorySettings,
    declared: &BTreeMap<String, SecretSource>,
) -> Result<(), String> {
    if m.recall_tokens > 100_000 {
        return Err(format!(
            "memory.recall_tokens = {} is out of range (0 to 100000)",
            m.recall_tokens
        ));
    }
    if m.condense_after == 0 || m.max_per_handler == 0 || m.max_per_handler > 1_000_000 {
        return Err(
            "memory.condense_after must be at least 1 and memory.max_per_handler 1 to 1000000"
                .to_owned(),
        );
    }
    let Some(e) = &m.embeddings else {
        return Ok(());
    };
    let url = url::Url::parse(&e.base_url)
        .map_err(|err| format!("[memory.embeddings] base_url {:?}: {err}", e.base_url))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(format!(
            "[memory.embeddings] base_url {:?} is not an http(s) URL with a host",
            e.base_url
        ));
    }
    if !url.username().is_empty() || url.password().is_some() || url.query().is_some() {
        return Err(
            "[memory.embeddings] base_url must hold no credentials or query: put the key in api_key = \"${secret:NAME}\""
                .to_owned(),
        );
    }
    if e.model.is_empty() {
        return Err("[memory.embeddings] needs model".to_owned());
    }
    if e.dims == Some(0) {
        return Err("[memory.embeddings] dims must be at least 1".to_owned());
    }
    for s in secrets::references(&e.api_key)
        .map_err(|err| format!("[memory.embeddings] api_key: {err}"))?
    {
        if !declared.contains_key(s) {
            return Err(format!(
                "[memory.embeddings] api_key: secret {s:?} is not declared in [secrets]"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::path::Path;

    use crate::config::Config;

    fn parse(text: &str) -> Result<Config, String> {
        Config::parse(Path::new("/h/agency.toml"), text).map_err(|e| e.to_string())
    }

    #[test]
    fn memory_settings_parse_with_defaults_and_refuse_mistakes() {
        let c = parse("").unwrap();
        assert_eq!(c.memory.recall_tokens, 1000);
        assert_eq!(c.memory.condense_after, 200);
        assert_eq!(c.memory.max_per_handler, 10_000);
        assert_eq!(c.memory.embeddings, None);
        let c = parse(
            "[secrets]\noai = { env = \"K\" }\n[memory]\nrecall_tokens = 0\n[memory.embeddings]\nbase_url = \"http://127.0.0.1:11434/v1\"\nmodel = \"nomic\"\napi_key = \"${secret:oai}\"\ndims = 768\n",
        )
        .unwrap();
        assert_eq!(c.memory.recall_tokens, 0);
        let e = c.memory.embeddings.unwrap();
        assert_eq!((e.model.as_str(), e.dims), ("nomic", Some(768)));

        let err = parse("[memory]\nrecal_tokens = 5\n").unwrap_err();
        assert!(err.contains("recal_tokens"), "{err}");
        let err =
            parse("[memory.embeddings]\nbase_url = \"http://h\"\nmodel = \"m\"\nkey = \"x\"\n")
                .unwrap_err();
        assert!(err.contains("key"), "{err}");
        let err = parse(
            "[memory.embeddings]\nbase_url = \"http://h\"\nmodel = \"m\"\napi_key = \"${secret:nope}\"\n",
        )
        .unwrap_err();
        assert!(err.contains("not declared in [secrets]"), "{err}");
        let err =
            parse("[memory.embeddings]\nbase_url = \"ftp://h\"\nmodel = \"m\"\n").unwrap_err();
        assert!(err.contains("not an http(s) URL"), "{err}");
        let err = parse("[memory]\ncondense_after = 0\n").unwrap_err();
        assert!(err.contains("memory.condense_after"), "{err}");
    }
}
