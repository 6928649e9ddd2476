//! The typed errors every operation returns. Texts are in "failed to …"
//! form, name the thing, and say what to do next, because LLM agents read
//! them and act on them.

use agency_core::InvalidInput;
use agency_store::{BlobId, StoreError};

#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The thing does not exist, or exists but the caller may not know of
    /// it: the two are deliberately indistinguishable.
    #[error("failed to find {what} {id}: no such {what}")]
    NotFound { what: &'static str, id: String },

    /// The caller may know of the thing but may not do this to it.
    #[error("{0}")]
    PermissionDenied(String),

    /// A compare-and-set write lost: someone wrote first.
    #[error(
        "failed to write KB file {file}: your base version is stale; the current version is {current_version} with hash {current_hash}: re-read the file, merge your change, and write again with that version and hash"
    )]
    Conflict {
        file: String,
        current_version: i64,
        current_hash: BlobId,
    },

    /// The handler already has a live agent (the store holds this rule).
    #[error("failed to start an agent for handler {handler}: agent {agent} is still live")]
    AgentLive { handler: String, agent: String },

    /// This daemon no longer holds the handler's lease: another daemon
    /// took it over, and whatever was asked as its owner was not done.
    #[error(
        "failed to act for handler {handler}: its lease (token {token}) was taken over by another daemon; stop its agent here"
    )]
    LeaseLost { handler: String, token: i64 },

    /// A model call's settlement came after another daemon took its
    /// handler over and released the call's reservation: only the lease's
    /// holder writes for the handler, so its usage is not recorded.
    #[error(
        "failed to record the usage of model call {call} of handler {handler}: another daemon took the handler over and released the call's reservation; nothing was recorded"
    )]
    ReservationReleased { call: i64, handler: String },

    /// A quota of `agency.toml` would be exceeded; the text names the key.
    #[error("{0}")]
    Quota(String),

    /// A limit on how much an outside caller may ask at once
    /// (an agency API key's messages not yet answered): the same request
    /// may succeed later, after about `retry_after_secs`. The text names
    /// the limit and its value.
    #[error("{message}")]
    Limited {
        message: String,
        /// The `agency.toml` key of the limit.
        limit: &'static str,
        value: u64,
        retry_after_secs: u64,
    },

    #[error(transparent)]
    InvalidInput(#[from] InvalidInput),

    /// A value broke a verb's JSON Schema (`agent_call`'s input,
    /// `agent_reply`'s output): nothing was sent. `issues` are the
    /// machine-readable reasons, also listed (as JSON) in the text.
    #[error(
        "{message}; issues (instancePath, keyword, message): {}",
        issues_json(issues)
    )]
    SchemaViolation {
        message: String,
        issues: Vec<agency_api::SchemaIssue>,
    },

    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ServiceError {
    pub fn not_found(what: &'static str, id: impl ToString) -> Self {
        ServiceError::NotFound {
            what,
            id: id.to_string(),
        }
    }

    pub fn denied(msg: impl Into<String>) -> Self {
        ServiceError::PermissionDenied(msg.into())
    }

    pub fn invalid(msg: impl Into<String>) -> Self {
        ServiceError::InvalidInput(InvalidInput::new(msg))
    }

    /// A short machine-readable kind for interfaces.
    pub fn kind(&self) -> &'static str {
        match self {
            ServiceError::NotFound { .. } => "not_found",
            ServiceError::PermissionDenied(_) => "permission_denied",
            ServiceError::Conflict { .. } => "conflict",
            ServiceError::AgentLive { .. } => "agent_live",
            ServiceError::LeaseLost { .. } | ServiceError::ReservationReleased { .. } => {
                "lease_lost"
            }
            ServiceError::Quota(_) => "quota",
            ServiceError::Limited { .. } => "rate_limited",
            ServiceError::InvalidInput(_) => "invalid_input",
            ServiceError::SchemaViolation { .. } => "schema_violation",
            ServiceError::Store(_) => "internal",
        }
    }
}

fn issues_json(issues: &[agency_api::SchemaIssue]) -> String {
    serde_json::to_string(issues).unwrap_or_default()
}
