//! Errors of the daemon, naming the file or address.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("failed to {action} {}: {cause}", path.display())]
    Io {
        action: &'static str,
        path: PathBuf,
        /// In the message, not `#[source]`: printed once, however the
        /// error is printed (`{e}` or the chain with `{e:#}`).
        cause: std::io::Error,
    },
    #[error("failed to read configuration {}: {message}", path.display())]
    Config { path: PathBuf, message: String },
    #[error("failed to start: a daemon is already running for {} at {addr} (pid {pid})", home.display())]
    AlreadyRunning {
        home: PathBuf,
        addr: String,
        pid: u32,
    },
    #[error("failed to listen on {addr}: {cause}")]
    Listen {
        addr: String,
        /// In the message, not `#[source]`: printed once, however the
        /// error is printed (`{e}` or the chain with `{e:#}`).
        cause: std::io::Error,
    },
    #[error(
        "failed to listen on 127.0.0.1:{port}: {cause}; the port is pinned by [server] port in {}: stop what holds it (`ss -ltnp 'sport = :{port}'` names it; another Agency home's daemon?) or set another port there (0 picks a free one at each start)",
        config.display()
    )]
    PortTaken {
        port: u16,
        config: PathBuf,
        /// In the message, not `#[source]` (printed once, as `Listen`'s).
        cause: std::io::Error,
    },
    #[error(transparent)]
    Home(#[from] agency_config::ConfigError),
    #[error(transparent)]
    Secret(#[from] agency_config::secrets::SecretError),
    #[error(transparent)]
    Egress(#[from] agency_egress::EgressError),
    #[error(transparent)]
    Store(#[from] agency_store::StoreError),
    #[error(transparent)]
    Service(#[from] agency_service::ServiceError),
}

impl DaemonError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        DaemonError::Io {
            action,
            path: path.into(),
            cause: source,
        }
    }
}
