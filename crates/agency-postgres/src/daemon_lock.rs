//! One daemon per database: a session-level advisory lock held on a
//! connection of its own for the daemon's lifetime. The server releases it
//! when the connection ends, so a daemon killed with SIGKILL frees it too.
//!
//! Two daemons on one database would each start agents for the same
//! handlers and reap each other's; until handlers are handed out by lease,
//! the second daemon is refused at start.

use std::fmt;

use agency_store::StoreError;

use crate::conn::{Conn, Runtime};
use crate::convert::Ctx;
use crate::describe;

/// The lock's key (the bytes of "daemon"), distinct from the writers'.
const DAEMON_LOCK: i64 = 0x6461_656d_6f6e;

/// Held while it lives; dropping it closes its connection and releases the
/// lock.
pub struct DaemonLock {
    // Field order: the connection closes before its runtime stops.
    _conn: Conn,
    _runtime: Runtime,
    target: String,
}

impl fmt::Debug for DaemonLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DaemonLock")
            .field("database", &self.target)
            .finish()
    }
}

impl DaemonLock {
    /// Take the lock of the database `url` names; `Err` with the database
    /// (`name at host:port`) when another daemon holds it.
    pub fn acquire(url: &str) -> Result<Result<DaemonLock, String>, StoreError> {
        let config: tokio_postgres::Config = url.parse().map_err(|e| {
            StoreError::backend(
                "lock the PostgreSQL store for this daemon",
                format!("the URL is not a PostgreSQL connection URL: {e}"),
            )
        })?;
        let target = describe(&config);
        let op = || format!("lock the database {target} for this daemon");
        let runtime = Runtime::new().map_err(|e| StoreError::backend(op(), e))?;
        let mut conn = Conn::connect(&runtime, &config)
            .map_err(|e| StoreError::backend(op(), e.to_string()))?;
        let row = conn
            .query_opt("SELECT pg_try_advisory_lock($1)", &[&DAEMON_LOCK])
            .ctx(op)?;
        let taken: bool = match row {
            Some(r) => r.try_get(0).ctx(op)?,
            None => false,
        };
        if !taken {
            return Ok(Err(target));
        }
        Ok(Ok(DaemonLock {
            _conn: conn,
            _runtime: runtime,
            target,
        }))
    }

    /// The database, for messages: `name at host:port`.
    pub fn target(&self) -> &str {
        &self.target
    }
}
