//! Errors of reading the home and its configuration, naming the file.

use std::path::PathBuf;

/// Why the home or its configuration could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("failed to {action} {}: {cause}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        /// In the message, not `#[source]`: printed once, however the
        /// error is printed (`{e}` or the chain with `{e:#}`).
        cause: std::io::Error,
    },
    /// A file of the home that is not as it must be: the message says why.
    #[error("failed to read configuration {}: {message}", path.display())]
    Invalid { path: PathBuf, message: String },
    #[error("failed to find an Agency home at {}: run `agency init` first", .0.display())]
    NoHome(PathBuf),
    #[error("failed to determine the Agency home: set AGENCY_HOME or HOME")]
    NoHomeDir,
    /// Opening the home's store (`agency init`, [`crate::Home::open_service`]).
    #[error(transparent)]
    Store(#[from] agency_store::StoreError),
    #[error(transparent)]
    Service(#[from] agency_service::ServiceError),
}

impl ConfigError {
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        ConfigError::Io {
            action,
            path: path.into(),
            cause: source,
        }
    }
}
