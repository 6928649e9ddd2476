//! `LISTEN agency_events`: the event log's numbers as other daemons commit
//! them (schema v3's trigger notifies at every commit that appended
//! events), so a daemon reads what others did at once rather than at its
//! next poll. A connection of its own, on the store's runtime style: a
//! task that reconnects (after a pause) when the connection drops; while
//! it is down, the poll is the only way, as before.

use std::time::Duration;

use agency_store::StoreError;
use futures_util::StreamExt;
use tokio::sync::watch;
use tokio_postgres::{AsyncMessage, NoTls};

use crate::conn::Runtime;

/// The channel the trigger notifies.
const CHANNEL: &str = "agency_events";

/// How long a dropped listener waits before connecting again.
const RECONNECT: Duration = Duration::from_secs(1);

/// Notifications of new events, as the highest event number heard of.
/// Dropping it stops the listener.
#[derive(Debug)]
pub struct EventNotifications {
    seen: watch::Receiver<i64>,
    _runtime: Runtime,
}

impl EventNotifications {
    /// Listen on the database `url` names.
    pub fn listen(url: &str) -> Result<EventNotifications, StoreError> {
        let op = "listen for the event log's notifications";
        let config: tokio_postgres::Config = url.parse().map_err(|e| {
            StoreError::backend(
                op,
                format!("the URL is not a PostgreSQL connection URL: {e}"),
            )
        })?;
        let runtime = Runtime::new().map_err(|e| StoreError::backend(op, e))?;
        let (tx, seen) = watch::channel(0_i64);
        let handle = runtime
            .handle()
            .ok_or_else(|| StoreError::backend(op, "the runtime is shut down"))?;
        handle.spawn(async move {
            loop {
                if let Err(e) = listen_once(&config, &tx).await {
                    tracing::debug!(error = %e, "the event listener's connection ended");
                }
                if tx.is_closed() {
                    return;
                }
                tokio::time::sleep(RECONNECT).await;
            }
        });
        Ok(EventNotifications {
            seen,
            _runtime: runtime,
        })
    }

    /// Wait until an event numbered above what was last seen is heard of;
    /// its number. `None` once the listener is gone.
    pub async fn next(&mut self) -> Option<i64> {
        self.seen.changed().await.ok()?;
        Some(*self.seen.borrow_and_update())
    }
}

/// One connection's life: LISTEN, then forward every notification until
/// the connection ends.
async fn listen_once(
    config: &tokio_postgres::Config,
    tx: &watch::Sender<i64>,
) -> Result<(), tokio_postgres::Error> {
    let (client, mut connection) = config.connect(NoTls).await?;
    let mut messages = futures_util::stream::poll_fn(move |cx| connection.poll_message(cx));
    let sql = format!("LISTEN {CHANNEL}");
    let listen = client.batch_execute(&sql);
    tokio::pin!(listen);
    // The LISTEN's answer arrives through the same connection: drive both.
    loop {
        tokio::select! {
            r = &mut listen => { r?; break; }
            m = messages.next() => match m {
                Some(Ok(_)) => {}
                Some(Err(e)) => return Err(e),
                None => return Ok(()),
            },
        }
    }
    while let Some(m) = messages.next().await {
        if let AsyncMessage::Notification(n) = m?
            && let Ok(seq) = n.payload().parse::<i64>()
        {
            tx.send_if_modified(|seen| {
                let newer = seq > *seen;
                *seen = (*seen).max(seq);
                newer
            });
        }
        if tx.is_closed() {
            return Ok(());
        }
    }
    Ok(())
}
