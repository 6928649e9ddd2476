//! Group commit of records that change nothing else: read-audit records
//! and the steps of live runs for the event log (a tool call that only
//! read). Logging every KB read is a write; an fsync per read would make
//! reads as slow as writes. Reads queue their record here and a background
//! thread commits whatever has accumulated in one transaction, then tells
//! the event log's readers that events were committed. A read's success does not depend on its record (nothing
//! the caller was told depends on it), and `flush` waits for the queue.
//!
//! The batches commit lazily (`write_lazy`: the WAL is written, not
//! fsynced): a record is already answered for before it is committed, so
//! a crash within the linger loses the records of that window whatever the
//! commit mode; the lazy commit only stretches that to a power cut before
//! the next durable commit (which fsyncs the WAL, these frames with it),
//! and saves an fsync per batch. A flushed record is
//! visible to every reader at once, as before.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;

use agency_store::{KbAuditRow, NewEventRow, Store, StoreError};
use tokio::sync::watch;

use crate::Result;
use crate::error::ServiceError;

enum Msg {
    Record(KbAuditRow),
    Step(NewEventRow),
    Flush(mpsc::Sender<()>),
}

#[derive(Debug)]
pub(crate) struct ReadAudit {
    sender: Mutex<Option<mpsc::Sender<Msg>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    failures: Arc<AtomicU64>,
}

const MAX_BATCH: usize = 4096;

impl ReadAudit {
    pub fn start(store: Arc<dyn Store>, committed: Arc<watch::Sender<i64>>) -> ReadAudit {
        let (sender, receiver) = mpsc::channel::<Msg>();
        let failures = Arc::new(AtomicU64::new(0));
        let fail_count = failures.clone();
        let thread = std::thread::Builder::new()
            .name("agency-read-audit".into())
            .spawn(move || run(&*store, &receiver, &fail_count, &committed))
            .expect("failed to spawn the read-audit thread");
        ReadAudit {
            sender: Mutex::new(Some(sender)),
            thread: Mutex::new(Some(thread)),
            failures,
        }
    }

    pub fn record(&self, row: KbAuditRow) {
        self.send(Msg::Record(row));
    }

    /// Queue an event of the log that records no change of its own.
    pub fn step(&self, row: NewEventRow) {
        self.send(Msg::Step(row));
    }

    fn send(&self, m: Msg) {
        if let Some(s) = self
            .sender
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            let _ = s.send(m);
        }
    }

    /// Block until everything recorded before this call is committed.
    pub fn flush(&self) -> Result<()> {
        let (tx, rx) = mpsc::channel();
        {
            let guard = self.sender.lock().unwrap_or_else(|p| p.into_inner());
            let Some(s) = guard.as_ref() else {
                return Ok(());
            };
            s.send(Msg::Flush(tx)).map_err(|_| stopped())?;
        }
        rx.recv().map_err(|_| stopped())?;
        match self.failures.load(Ordering::SeqCst) {
            0 => Ok(()),
            n => Err(ServiceError::Store(StoreError::backend(
                "commit read-audit records",
                format!("{n} batches failed since start"),
            ))),
        }
    }
}

fn stopped() -> ServiceError {
    ServiceError::Store(StoreError::backend(
        "flush read-audit records",
        "the audit thread has stopped",
    ))
}

/// How long the thread lets records gather after the first one of a batch.
/// It sleeps rather than waits on the channel, so the reads in between do
/// not wake it one by one (a wake-up per read was a thread switch
/// per tool call); a `flush` waits at most this long more.
const LINGER: std::time::Duration = std::time::Duration::from_millis(10);

/// The read-audit thread's nice value (see `run`).
const AUDIT_NICE: i32 = 10;

fn run(
    store: &dyn Store,
    receiver: &mpsc::Receiver<Msg>,
    failures: &AtomicU64,
    committed: &watch::Sender<i64>,
) {
    // Below the threads that answer calls: a batch's inserts took a core
    // for a fraction of a millisecond every `LINGER`, and the calls that
    // waited for it were the slowest percent (kb_read p99
    // ×2.5 of the echo with the batches at the same priority, ×2.1–×2.4
    // here, ×1.9 with no audit at all). Not lower: the batch holds the
    // store's writer while it runs, so every writer waits behind it, and at
    // nice 19 a saturated machine could leave it unscheduled for tens of
    // milliseconds. On Linux the nice value is the calling thread's alone.
    if let Err(e) = rustix::process::setpriority_process(None, AUDIT_NICE) {
        tracing::debug!(error = %e, "failed to lower the read-audit thread's priority");
    }
    while let Ok(first) = receiver.recv() {
        if !matches!(first, Msg::Flush(_)) {
            std::thread::sleep(LINGER);
        }
        let mut batch = Vec::new();
        let mut steps = Vec::new();
        let mut waiters = Vec::new();
        let mut next = Some(first);
        while let Some(m) = next.take() {
            match m {
                Msg::Record(r) => batch.push(r),
                Msg::Step(e) => steps.push(e),
                Msg::Flush(w) => waiters.push(w),
            }
            if batch.len() + steps.len() < MAX_BATCH {
                next = receiver.try_recv().ok();
            }
        }
        if !steps.is_empty() || !batch.is_empty() {
            // One lazy commit for both kinds: a tool call that read the KB
            // leaves a step and an audit row, and they share the batch.
            let res = agency_store::write_lazy(store, |tx| {
                let mut last = None;
                for e in &steps {
                    last = Some(tx.append_event(e)?);
                }
                // `gc` may have removed a file (an expired message body)
                // between a read and this commit: its record has nothing
                // left to describe, and must not fail the whole batch.
                let mut exists = std::collections::HashMap::new();
                let mut rows = Vec::with_capacity(batch.len());
                for r in &batch {
                    let present = match exists.get(&r.file) {
                        Some(p) => *p,
                        None => {
                            let p = tx.file(r.file)?.is_some();
                            exists.insert(r.file, p);
                            p
                        }
                    };
                    if present {
                        rows.push(r.clone());
                    }
                }
                if !rows.is_empty() {
                    tx.insert_kb_audit(&rows)?;
                }
                Ok::<_, StoreError>(last)
            });
            match res {
                Ok(Some(last)) => {
                    committed.send_replace(last);
                }
                Ok(None) => {}
                Err(_) => {
                    failures.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
        for w in waiters {
            let _ = w.send(());
        }
    }
}

impl Drop for ReadAudit {
    fn drop(&mut self) {
        // Closing the channel lets the thread commit what is queued and end.
        self.sender.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = t.join();
        }
    }
}
