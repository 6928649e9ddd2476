//! The error type of the crate (besides the standby command's encoding,
//! [`crate::ExecRequestError`]). Applying the sandbox reports the step
//! that failed and why (`agency sandbox-exec` prints it after "failed to
//! apply the sandbox: "); the cgroup operations name the file or
//! directory they failed on.

use std::io;
use std::path::PathBuf;

/// What went wrong, with the thing it went wrong on.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The policy is not one this crate can apply (a relative path, `/`
    /// granted, a limit that needs a cgroup without one, …).
    #[error("invalid sandbox policy: {0}")]
    InvalidPolicy(String),

    /// The policy file could not be read or parsed.
    #[error("failed to read the sandbox policy {path}: {why}")]
    ReadPolicy { path: PathBuf, why: String },

    /// A step of [`crate::apply`] failed; the process is then in an
    /// unknown, partly confined state and must not run the program.
    #[error("{step}: {why}")]
    Apply { step: String, why: String },

    /// A file system operation on a cgroup failed.
    #[error("failed to {what} {path}: {source}")]
    Cgroup {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// The machine lacks something the sandbox needs (Landlock, a cgroup
    /// hierarchy, a controller); the message says what and where.
    #[error("{0}")]
    Unavailable(String),
}

impl SandboxError {
    pub(crate) fn apply(step: impl Into<String>, why: impl std::fmt::Display) -> Self {
        SandboxError::Apply {
            step: step.into(),
            why: why.to_string(),
        }
    }

    pub(crate) fn cgroup(what: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        SandboxError::Cgroup {
            what,
            path: path.into(),
            source,
        }
    }
}
