//! The embeddings client of semantic memory search: the
//! service's [`Embedder`] over an OpenAI-compatible `POST /v1/embeddings`
//! (`{"model", "input": [TEXT…]}` → `data[i].embedding`), configured in
//! `[memory.embeddings]`. The daemon calls it, never an agent; its key is
//! sent only to that URL.
//!
//! The service calls [`Embedder::embed`] on the blocking threads its
//! operations run on, so the request runs on the daemon's runtime through
//! the handle taken at start (`block_on` from a blocking thread), with a
//! deadline: a slow endpoint delays a memory operation by at most
//! [`TIMEOUT`], after which the service goes on without the vector.

use std::time::Duration;

use agency_service::Embedder;
use serde_json::{Value, json};

use agency_config::memory::EmbeddingsConfig;
use agency_config::secrets::{self, ExposeSecret, SecretString, Secrets, TemplateError};

/// The longest one embeddings request may take.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// Largest answer read (a batch of large vectors fits easily).
const MAX_ANSWER_BYTES: usize = 16 << 20;

/// Why the client of `[memory.embeddings]` could not be made.
#[derive(Debug, thiserror::Error)]
pub enum EmbedderError {
    #[error("[memory.embeddings] api_key: {0}")]
    ApiKey(#[from] TemplateError),
    #[error("failed to build the embeddings client: {0}")]
    Client(reqwest::Error),
    #[error("failed to find the daemon's runtime for embeddings: {0}")]
    NoRuntime(tokio::runtime::TryCurrentError),
}

/// An OpenAI-compatible embeddings endpoint.
pub struct HttpEmbedder {
    url: String,
    model: String,
    key: Option<SecretString>,
    dims: Option<usize>,
    client: reqwest::Client,
    rt: tokio::runtime::Handle,
}

impl std::fmt::Debug for HttpEmbedder {
    // Without the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpEmbedder")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("dims", &self.dims)
            .finish_non_exhaustive()
    }
}

impl HttpEmbedder {
    /// The client of `[memory.embeddings]`, its key filled in from the
    /// secrets; call from within the daemon's runtime.
    pub fn new(cfg: &EmbeddingsConfig, secrets: &Secrets) -> Result<HttpEmbedder, EmbedderError> {
        let key = if cfg.api_key.is_empty() {
            None
        } else {
            Some(secrets::interpolate(&cfg.api_key, secrets)?)
        };
        let client = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .build()
            .map_err(EmbedderError::Client)?;
        let rt = tokio::runtime::Handle::try_current().map_err(EmbedderError::NoRuntime)?;
        Ok(HttpEmbedder {
            url: endpoint(&cfg.base_url),
            model: cfg.model.clone(),
            key,
            dims: cfg.dims,
            client,
            rt,
        })
    }

    async fn request(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        let mut req = self
            .client
            .post(&self.url)
            .json(&json!({ "model": self.model, "input": texts }));
        if let Some(k) = &self.key {
            req = req.bearer_auth(k.expose_secret());
        }
        let resp = req
            .send()
            .await
            .map_err(|e| format!("failed to reach the embeddings endpoint {}: {e}", self.url))?;
        let status = resp.status();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| format!("failed to read the answer of {}: {e}", self.url))?;
        if bytes.len() > MAX_ANSWER_BYTES {
            return Err(format!(
                "failed to read the answer of {}: larger than {MAX_ANSWER_BYTES} bytes",
                self.url
            ));
        }
        if !status.is_success() {
            let text = String::from_utf8_lossy(&bytes);
            let short: String = text.chars().take(300).collect();
            return Err(format!(
                "failed to embed with {}: HTTP {status}: {short}",
                self.url
            ));
        }
        let v: Value = serde_json::from_slice(&bytes)
            .map_err(|e| format!("failed to parse the answer of {}: {e}", self.url))?;
        parse(&v, texts.len(), self.dims)
            .map_err(|e| format!("failed to read the answer of {}: {e}", self.url))
    }
}

impl Embedder for HttpEmbedder {
    fn model(&self) -> &str {
        &self.model
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        self.rt.block_on(self.request(texts))
    }
}

/// `/v1/embeddings` under a base URL given with or without its `/v1`.
fn endpoint(base_url: &str) -> String {
    let b = base_url.trim_end_matches('/');
    match b.strip_suffix("/v1") {
        Some(root) => format!("{root}/v1/embeddings"),
        None => format!("{b}/v1/embeddings"),
    }
}

/// The vectors of an OpenAI-compatible answer, in input order.
fn parse(v: &Value, n: usize, dims: Option<usize>) -> Result<Vec<Vec<f32>>, String> {
    let data = v["data"].as_array().ok_or("no `data` array")?;
    if data.len() != n {
        return Err(format!("{} vectors for {n} texts", data.len()));
    }
    let mut out: Vec<Option<Vec<f32>>> = vec![None; n];
    for (pos, item) in data.iter().enumerate() {
        let i = item["index"]
            .as_u64()
            .and_then(|i| usize::try_from(i).ok())
            .unwrap_or(pos);
        let slot = out.get_mut(i).ok_or("an index out of range")?;
        let vec: Vec<f32> = item["embedding"]
            .as_array()
            .ok_or("an item without an `embedding` array")?
            .iter()
            .map(|x| {
                x.as_f64()
                    .map(|f| f as f32)
                    .ok_or("a value that is not a number")
            })
            .collect::<Result<_, _>>()?;
        if vec.is_empty() {
            return Err("an empty vector".to_owned());
        }
        if let Some(d) = dims
            && vec.len() != d
        {
            return Err(format!(
                "a vector of {} dimensions, not the {d} of [memory.embeddings] dims",
                vec.len()
            ));
        }
        *slot = Some(vec);
    }
    out.into_iter()
        .map(|v| v.ok_or_else(|| "a text without a vector".to_owned()))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_is_found_with_or_without_v1() {
        assert_eq!(endpoint("http://h:11434"), "http://h:11434/v1/embeddings");
        assert_eq!(
            endpoint("http://h:11434/v1/"),
            "http://h:11434/v1/embeddings"
        );
    }

    #[test]
    fn answers_are_read_in_index_order_and_checked() {
        let v = json!({"data": [
            {"index": 1, "embedding": [0.0, 1.0]},
            {"index": 0, "embedding": [1.0, 0.0]},
        ]});
        assert_eq!(
            parse(&v, 2, Some(2)).unwrap(),
            vec![vec![1.0, 0.0], vec![0.0, 1.0]]
        );
        assert!(parse(&v, 2, Some(3)).unwrap_err().contains("dimensions"));
        assert!(parse(&v, 3, None).is_err());
        assert!(parse(&json!({"data": [{"embedding": []}]}), 1, None).is_err());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_scripted_server_embeds_through_the_client() {
        let script =
            agency_testkit::Script::from_json(r#"{"scenarios": [], "fallback": {"text": "ok"}}"#)
                .unwrap();
        let server = agency_testkit::ModelServer::start(script).await.unwrap();
        let cfg = EmbeddingsConfig {
            base_url: server.base_url(),
            model: "m".into(),
            api_key: String::new(),
            dims: Some(agency_testkit::embeddings::DIMS),
        };
        let e = HttpEmbedder::new(&cfg, &Secrets::from_pairs(&[])).unwrap();
        let got = tokio::task::spawn_blocking(move || e.embed(&["zebra river", "x"]))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got[0], agency_testkit::embeddings::embed("zebra river"));
        assert_eq!(got[1], agency_testkit::embeddings::embed("x"));
        server.shutdown().await;
    }
}
