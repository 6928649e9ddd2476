//! Errors of the persistence layer. They carry the failing operation and the
//! thing it was about, in "failed to …" form.

use std::error::Error;
use std::path::PathBuf;
use std::sync::Arc;

use crate::blob::BlobId;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database refused or failed an operation.
    #[error("failed to {op}: {cause}")]
    Backend {
        op: String,
        /// The backend's own error, kept whole (e.g. a `rusqlite::Error`,
        /// reachable with [`StoreError::cause`] and a downcast). In the
        /// message, not `#[source]`, like `Io`'s: printed once, however
        /// the error is printed (`{e}` or the chain with `{e:#}`). Shared
        /// (`Arc`) because one failed group commit fails every write in it.
        cause: Cause,
    },

    /// A uniqueness rule held by the store was violated (e.g. a second live
    /// agent for one handler).
    #[error("failed to {op}: {message}")]
    Unique { op: String, message: String },

    #[error("failed to {action} {}: {cause}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        /// In the message, not `#[source]`: printed once, however the
        /// error is printed (`{e}` or the chain with `{e:#}`).
        cause: std::io::Error,
    },

    /// A stored value could not be decoded into its type.
    #[error("failed to decode stored {what}: {value:?}")]
    Corrupt { what: &'static str, value: String },

    #[error("failed to read blob {0}: it is missing from the blob store")]
    MissingBlob(BlobId),

    #[error("failed to read blob {id}: its content hashes to {actual}")]
    CorruptBlob { id: BlobId, actual: BlobId },

    /// A fault injected by a test (crash-consistency and fault suites).
    #[error("failed to {0}: injected fault")]
    Injected(String),

    /// The closure of a transaction asked for a rollback; [`crate::write`]
    /// turns this back into the closure's own error.
    #[error("transaction rolled back")]
    Rollback,
}

/// A backend's error behind [`StoreError::Backend`].
pub type Cause = Arc<dyn Error + Send + Sync + 'static>;

impl StoreError {
    /// A failure of `op` caused by `cause`: a backend's error, kept whole,
    /// or a message (`&str`, `String`) when the store itself refuses.
    pub fn backend(op: impl Into<String>, cause: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        StoreError::Backend {
            op: op.into(),
            cause: Arc::from(cause.into()),
        }
    }

    /// The error underneath, when there is one: the backend's (`Backend`)
    /// or the operating system's (`Io`).
    pub fn cause(&self) -> Option<&(dyn Error + Send + Sync + 'static)> {
        match self {
            StoreError::Backend { cause, .. } => Some(&**cause),
            StoreError::Io { cause, .. } => Some(cause),
            _ => None,
        }
    }

    pub fn corrupt(what: &'static str, value: impl Into<String>) -> Self {
        StoreError::Corrupt {
            what,
            value: value.into(),
        }
    }
}
