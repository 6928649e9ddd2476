//! Sending: a bounded queue between the log reader and the collector, and
//! the POSTs of OTLP/HTTP protobuf bodies with retries.
//!
//! A collector that is down or slow never slows the daemon: the reader
//! only pushes into the queue, which drops its oldest batch when full
//! (counted, and told in the daemon's log); 429 and 5xx answers and
//! connection failures are retried with exponential backoff, a bounded
//! number of times. The cursor file is written after a batch of spans was
//! accepted, so a restart re-exports at most what was in flight
//! (at-least-once; ids are deterministic, so repeats carry the same ids).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agency_config::telemetry::TelemetryConfig;
use tokio::sync::Notify;

/// Batches the queue holds at most.
pub(crate) const QUEUE_CAP: usize = 256;
/// Attempts of one batch before it is given up.
const ATTEMPTS: u32 = 6;
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

#[derive(Debug)]
pub(crate) enum Body {
    /// Spans of the events up to `cursor` (inclusive).
    Traces {
        bytes: Vec<u8>,
        cursor: i64,
    },
    Metrics(Vec<u8>),
}

#[derive(Debug, Default)]
struct State {
    queue: VecDeque<Body>,
    closed: bool,
    dropped: u64,
}

/// The queue between the reader and the sender.
#[derive(Debug, Clone, Default)]
pub(crate) struct Queue {
    state: Arc<Mutex<State>>,
    ready: Arc<Notify>,
}

impl Queue {
    /// Add a batch, dropping the oldest when full.
    pub(crate) fn push(&self, b: Body) {
        let dropped = {
            let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
            st.queue.push_back(b);
            if st.queue.len() > QUEUE_CAP {
                st.queue.pop_front();
                st.dropped += 1;
                Some(st.dropped)
            } else {
                None
            }
        };
        if let Some(n) = dropped
            && (n == 1 || n % 100 == 0)
        {
            tracing::warn!(
                dropped = n,
                "telemetry: the OTLP collector is not keeping up; dropped the oldest export batch"
            );
        }
        self.ready.notify_one();
    }

    /// No more batches will come; the sender ends once the queue is empty.
    pub(crate) fn close(&self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).closed = true;
        self.ready.notify_one();
    }

    /// Batches dropped so far.
    pub(crate) fn dropped(&self) -> u64 {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).dropped
    }

    async fn pop(&self) -> Option<Body> {
        loop {
            {
                let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
                if let Some(b) = st.queue.pop_front() {
                    return Some(b);
                }
                if st.closed {
                    return None;
                }
            }
            self.ready.notified().await;
        }
    }
}

/// Posts what the queue holds until it is closed and empty.
pub(crate) async fn sender(cfg: TelemetryConfig, queue: Queue, cursor_file: PathBuf) {
    let client = match reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(
                "telemetry: failed to build the OTLP HTTP client: {e}; nothing is exported"
            );
            return;
        }
    };
    while let Some(body) = queue.pop().await {
        let (url, bytes, cursor) = match body {
            Body::Traces { bytes, cursor } => (&cfg.traces_url, bytes, Some(cursor)),
            Body::Metrics(bytes) => (&cfg.metrics_url, bytes, None),
        };
        if post(&client, &cfg, url, bytes).await
            && let Some(c) = cursor
            && let Err(e) = crate::cursor::save(&cursor_file, c)
        {
            tracing::warn!("telemetry: {e}");
        }
    }
}

/// One batch, retried on 429, 5xx and connection failures; whether the
/// collector accepted it.
async fn post(client: &reqwest::Client, cfg: &TelemetryConfig, url: &str, bytes: Vec<u8>) -> bool {
    let mut wait = FIRST_BACKOFF;
    for attempt in 1..=ATTEMPTS {
        let mut req = client
            .post(url)
            .header("content-type", "application/x-protobuf")
            .body(bytes.clone());
        for (k, v) in &cfg.headers {
            req = req.header(k.as_str(), v.as_str());
        }
        let retry = match req.send().await {
            Ok(r) if r.status().is_success() => return true,
            Ok(r) => {
                let status = r.status().as_u16();
                if status != 429 && !(500..600).contains(&status) {
                    tracing::warn!(
                        status,
                        "telemetry: the OTLP collector at {url} refused a batch; dropped"
                    );
                    return false;
                }
                // A server's own Retry-After (seconds) over our backoff.
                r.headers()
                    .get("retry-after")
                    .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
                    .map(|s| Duration::from_secs(s).min(MAX_BACKOFF))
                    .unwrap_or(wait)
            }
            Err(e) => {
                if attempt == ATTEMPTS {
                    tracing::warn!("telemetry: failed to reach the OTLP collector at {url}: {e}");
                }
                wait
            }
        };
        if attempt == ATTEMPTS {
            break;
        }
        tokio::time::sleep(retry).await;
        wait = (wait * 2).min(MAX_BACKOFF);
    }
    tracing::warn!("telemetry: gave up a batch for {url} after {ATTEMPTS} attempts");
    false
}
