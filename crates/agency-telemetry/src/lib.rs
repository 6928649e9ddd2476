//! OpenTelemetry export of the event log: traces and metrics over OTLP/HTTP
//! with protobuf bodies, following the GenAI semantic conventions v1.37.0
//! (`OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental` switches
//! cache-token attributes to the newer experimental names; see
//! `docs/telemetry.md`).
//!
//! The exporter reads the event log (DESIGN.md §7): it never polls the CLI
//! nor hooks into the gateway. Spans are built from stored events with
//! their own times and deterministic ids (`spans.rs`), so no SDK pipeline
//! is needed: the `opentelemetry-proto` messages are filled in here and
//! posted with reqwest (`send.rs`). It follows the log from a cursor kept
//! in a small file of the home, and wakes when events are committed.
//!
//! Delivery is at-least-once: after a restart the events after the saved
//! cursor are exported again, with the same span ids. Runs still live at
//! shutdown are exported when they end. Prompt and answer content is never
//! exported: the event log holds none.

mod cursor;
mod metrics;
mod otlp;
mod send;
mod spans;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agency_api::{Event, EventsPage};
use agency_config::telemetry::TelemetryConfig;
use agency_core::Principal;
use agency_service::{EventQuery, Service};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span};
use prost::Message;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use otlp::{SCHEMA_URL, SEMCONV_VERSION};

/// Events read per page.
const PAGE: usize = 500;
/// Events before the cursor read again at start (state only, nothing
/// exported), so that runs started shortly before a restart keep their
/// trace and parent.
const WARM_UP: i64 = 5_000;

/// Why the exporter could not start.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("failed to start the telemetry exporter: {0}")]
    Start(String),
}

/// A running exporter; stop it with [`Exporter::shutdown`].
#[derive(Debug)]
pub struct Exporter {
    stop: watch::Sender<bool>,
    reader: JoinHandle<()>,
    sender: JoinHandle<()>,
    queue: send::Queue,
}

impl Exporter {
    /// Start following the log after the cursor saved in `cursor_file`
    /// (none yet: the log's end, so enabling export does not send the whole
    /// history at once). Must be called inside a tokio runtime.
    pub fn start(
        svc: Arc<Service>,
        cfg: TelemetryConfig,
        cursor_file: PathBuf,
    ) -> Result<Exporter, TelemetryError> {
        let end = svc
            .events_end(Principal::User)
            .map_err(|e| TelemetryError::Start(e.to_string()))?;
        let saved = match cursor::load(&cursor_file) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("telemetry: {e}; starting at the log's end");
                None
            }
        };
        let start = saved.unwrap_or(end).clamp(0, end);
        let live = svc
            .agents_live(Principal::User)
            .map_err(|e| TelemetryError::Start(e.to_string()))?
            .into_iter()
            .map(|a| a.id.to_string())
            .collect();
        let approvals = svc
            .approvals_list(Principal::User, false)
            .map_err(|e| TelemetryError::Start(e.to_string()))?
            .into_iter()
            .map(|a| (a.id.to_string(), a.created_at.0))
            .collect();
        let metrics = metrics::Metrics::new(now_ms(), live, approvals);
        let queue = send::Queue::default();
        let (stop, stopped) = watch::channel(false);
        let sender = tokio::spawn(send::sender(cfg.clone(), queue.clone(), cursor_file));
        let reader = tokio::spawn(
            Reader {
                svc,
                spans: spans::SpanBuilder::new(cfg.semconv),
                metrics,
                queue: queue.clone(),
                cfg,
            }
            .run(start, stopped),
        );
        Ok(Exporter {
            stop,
            reader,
            sender,
            queue,
        })
    }

    /// Export batches dropped because the collector did not keep up.
    pub fn dropped(&self) -> u64 {
        self.queue.dropped()
    }

    /// Export what the log holds up to now and the metrics a last time,
    /// then stop. The sender is given `grace` to finish (a collector that
    /// is down does not hold the daemon's stop longer than that).
    pub async fn shutdown(self, grace: Duration) {
        let _ = self.stop.send(true);
        if let Err(e) = self.reader.await {
            tracing::warn!("telemetry: the log reader failed: {e}");
        }
        let mut sender = self.sender;
        if tokio::time::timeout(grace, &mut sender).await.is_err() {
            tracing::warn!("telemetry: the OTLP collector did not take the last batches in time");
            sender.abort();
        }
    }
}

struct Reader {
    svc: Arc<Service>,
    spans: spans::SpanBuilder,
    metrics: metrics::Metrics,
    queue: send::Queue,
    cfg: TelemetryConfig,
}

impl Reader {
    async fn run(mut self, start: i64, mut stop: watch::Receiver<bool>) {
        // What came shortly before the cursor: state only.
        let mut after = (start - WARM_UP).max(0);
        while after < start {
            let Some(page) = self.page(after).await else {
                break;
            };
            if page.events.is_empty() {
                break;
            }
            for e in page.events.iter().filter(|e| e.seq <= start) {
                self.spans.on_event(e);
            }
            after = page.next;
        }
        let mut after = start;
        let mut committed = self.svc.events_committed();
        let mut next_metrics = Instant::now() + self.cfg.metrics_interval;
        loop {
            // Looked at before the read: a stop asked for after it began may
            // follow a commit the read's snapshot did not see, so only an
            // empty read that began after the stop ends the loop.
            let stopping = *stop.borrow();
            let page = self.page(after).await;
            let got = page.as_ref().is_some_and(|p| !p.events.is_empty());
            if let Some(page) = page.filter(|p| !p.events.is_empty()) {
                let mut out = Vec::new();
                for e in &page.events {
                    out.extend(self.spans.on_event(e));
                    self.metrics.on_event(e);
                }
                after = page.next;
                if !out.is_empty() {
                    self.queue.push(send::Body::Traces {
                        bytes: self.traces(out),
                        cursor: after,
                    });
                }
            }
            if Instant::now() >= next_metrics {
                self.push_metrics();
                next_metrics = Instant::now() + self.cfg.metrics_interval;
            }
            if got {
                continue;
            }
            if stopping {
                break;
            }
            let wait = tokio::time::sleep_until(next_metrics.into());
            tokio::select! {
                r = committed.changed() => if r.is_err() {
                    // No more commits will be signalled: wait for the stop.
                    let _ = stop.changed().await;
                },
                _ = stop.changed() => {},
                () = wait => {},
            }
        }
        self.push_metrics();
        self.queue.close();
    }

    /// A page after `after`, read on the blocking pool (a store read);
    /// `None` (told in the log) when the read failed.
    async fn page(&self, after: i64) -> Option<EventsPage> {
        let svc = self.svc.clone();
        let q = EventQuery {
            after,
            limit: Some(PAGE),
            ..EventQuery::default()
        };
        match tokio::task::spawn_blocking(move || svc.events_read(Principal::User, &q)).await {
            Ok(Ok(p)) => Some(p),
            Ok(Err(e)) => {
                tracing::warn!("telemetry: failed to read the event log after {after}: {e}");
                tokio::time::sleep(Duration::from_secs(1)).await;
                None
            }
            Err(e) => {
                tracing::warn!("telemetry: failed to read the event log: {e}");
                None
            }
        }
    }

    fn traces(&self, spans: Vec<Span>) -> Vec<u8> {
        ExportTraceServiceRequest {
            resource_spans: vec![ResourceSpans {
                resource: Some(otlp::resource(&self.cfg)),
                scope_spans: vec![ScopeSpans {
                    scope: Some(otlp::scope()),
                    spans,
                    schema_url: SCHEMA_URL.to_owned(),
                }],
                schema_url: SCHEMA_URL.to_owned(),
            }],
        }
        .encode_to_vec()
    }

    fn push_metrics(&self) {
        let req = self.metrics.export(now_ms(), otlp::resource(&self.cfg));
        self.queue.push(send::Body::Metrics(req.encode_to_vec()));
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Spans of a sequence of events, as the exporter builds them (for tests
/// and tools that check a log offline).
pub fn spans_of(events: &[Event], cfg: &TelemetryConfig) -> Vec<Span> {
    let mut b = spans::SpanBuilder::new(cfg.semconv);
    events.iter().flat_map(|e| b.on_event(e)).collect()
}
