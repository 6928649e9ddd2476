//! What the service is given at construction ([`crate::ServiceBuilder`]):
//! the limits, and the settings the daemon reads from `agency.toml` and
//! may replace at `agency reload` through the [`crate::System`] handle.
//! They live here, below every operation, so that the [`crate::Service`]
//! that holds them depends on no module that reads them.

use std::collections::BTreeSet;
use std::time::Duration;

use agency_core::Limits;

/// Tunables of the service layer.
#[derive(Debug, Clone, Default)]
pub struct ServiceConfig {
    pub limits: Limits,
    /// What `gc` removes, and when.
    pub retention: Retention,
    /// What binds callers of an agency's API (`orgs/messages.rs`).
    pub org_api: OrgApiLimits,
    /// When a signal is a problem (`problems/`).
    pub watch: Watch,
}

/// When a stuck signal becomes a problem (`[watch]` in `agency.toml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watch {
    /// A handler with work and no progress for this long is stuck.
    pub stuck_after_ms: i64,
    /// An approval pending for this long is stale.
    pub approval_stale_after_ms: i64,
}

impl Default for Watch {
    fn default() -> Self {
        Watch {
            stuck_after_ms: 15 * 60 * 1000,
            approval_stale_after_ms: 30 * 60 * 1000,
        }
    }
}

/// What `gc` keeps and for how long (`[retention]` in `agency.toml`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retention {
    /// Acknowledged mail is removed this many days after acknowledgement;
    /// 0 keeps it forever.
    pub acked_mail_days: u32,
    /// Events are removed this many days after they happened; 0 keeps
    /// them forever.
    pub event_days: u32,
    /// A blob no row points at is removed only when it was last put longer
    /// ago than this (a write puts its blob before its row commits).
    pub blob_grace: Duration,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            acked_mail_days: 30,
            event_days: 30,
            blob_grace: Duration::from_secs(3600),
        }
    }
}

/// What binds an agency's API keys in the store (`[agency_api]` of
/// `agency.toml`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OrgApiLimits {
    /// Messages of one key not yet answered, at most.
    pub max_pending_per_key: u64,
}

impl Default for OrgApiLimits {
    fn default() -> Self {
        OrgApiLimits {
            max_pending_per_key: 20,
        }
    }
}

/// The `[memory]` settings of agency.toml the service applies.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryConfig {
    /// Budget of the memories recalled into an agent's first message, in
    /// tokens (about 4 characters each).
    pub recall_tokens: usize,
    /// Live memories past which the next agent is asked to condense.
    pub condense_after: usize,
    /// Most live memories one handler may hold.
    pub max_per_handler: usize,
    /// Cosine similarity below which a memory is not a semantic match.
    pub min_similarity: f32,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig {
            recall_tokens: 1000,
            condense_after: 200,
            max_per_handler: 10_000,
            min_similarity: 0.5,
        }
    }
}

/// Turns texts into vectors (an OpenAI-compatible embeddings endpoint in
/// the daemon). Blocking: it is called from the blocking threads service
/// operations run on, never inside a transaction.
pub trait Embedder: Send + Sync + std::fmt::Debug {
    /// The model name, stored beside each vector.
    fn model(&self) -> &str;
    /// One vector per text, in order.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String>;
}

/// The names declared in `[mcp_servers]` and `[repos]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Declared {
    pub mcp_servers: BTreeSet<String>,
    pub repos: BTreeSet<String>,
    /// The `[models.NAME]` the running runtime can use (`model_set`).
    pub models: BTreeSet<String>,
    /// `agents.runtime`: the one runtime the supervisor runs (`None`: not
    /// told). An organisation's agent asking for another is refused.
    pub runtime: Option<String>,
    /// The `[secrets]` names: an organisation's tool referencing another
    /// (`${secret:NAME}` in a header or environment variable) is refused.
    pub secrets: BTreeSet<String>,
}
