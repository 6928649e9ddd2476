//! Settlements, committed in batches. A call's settlement is queued
//! when its answer ends (`meter.rs`) and a thread of its own commits what
//! has gathered in one transaction (`System::model_call_settle_batch`):
//! one commit, and one write of the pages the settlements share (the
//! reservations' table, the running totals of the handlers' chain, the
//! event log), instead of a blocking-pool hop and a transaction each.
//!
//! Nothing is lost by waiting: until its settlement commits, a call is
//! still counted at its reservation (its worst case), so budgets only err
//! on the safe side for the linger; a settlement is a lazy write anyway
//! (`write_lazy`), and the daemon flushes the queue when it stops, after
//! its agents. A batch that fails as a whole (a store error) is settled
//! again one call at a time, so one bad settlement does not take the
//! others with it.

use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use agency_service::{ModelCallResult, ModelReservation, ServiceError, System};

/// How long settlements gather after the first of a batch. The thread
/// sleeps rather than waits on the channel, so the calls in between do
/// not wake it one by one.
const LINGER: Duration = Duration::from_millis(5);

/// The most settlements one transaction takes.
const MAX_BATCH: usize = 256;

enum Msg {
    Settle(ModelReservation, ModelCallResult),
    Flush(mpsc::Sender<()>),
}

/// The queue of settlements and the thread that commits them.
#[derive(Debug)]
pub struct Settler {
    svc: Arc<System>,
    sender: Mutex<Option<mpsc::Sender<Msg>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Settler {
    pub fn start(svc: Arc<System>) -> Arc<Settler> {
        let (sender, receiver) = mpsc::channel::<Msg>();
        let thread_svc = svc.clone();
        let thread = std::thread::Builder::new()
            .name("agency-settle".into())
            .spawn(move || run(&thread_svc, &receiver))
            .map_err(|e| tracing::error!(error = %e, "failed to start the settlement thread; calls settle one by one"))
            .ok();
        Arc::new(Settler {
            svc,
            sender: Mutex::new(thread.is_some().then_some(sender)),
            thread: Mutex::new(thread),
        })
    }

    /// Queue one call's settlement; settled at once, on this thread, once
    /// the queue is closed (a call ending while the daemon stops).
    pub(crate) fn settle(&self, reservation: ModelReservation, result: ModelCallResult) {
        let guard = self.sender.lock().unwrap_or_else(|p| p.into_inner());
        let refused = match guard.as_ref() {
            Some(s) => s.send(Msg::Settle(reservation, result)).err(),
            None => Some(mpsc::SendError(Msg::Settle(reservation, result))),
        };
        drop(guard);
        if let Some(mpsc::SendError(Msg::Settle(r, result))) = refused {
            report(self.svc.model_call_settle(r, result));
        }
    }

    /// Block until every settlement queued before this call is committed
    /// (or has failed and been logged).
    pub fn flush(&self) {
        let (tx, rx) = mpsc::channel();
        {
            let guard = self.sender.lock().unwrap_or_else(|p| p.into_inner());
            let Some(s) = guard.as_ref() else {
                return;
            };
            if s.send(Msg::Flush(tx)).is_err() {
                return;
            }
        }
        let _ = rx.recv();
    }
}

impl Drop for Settler {
    fn drop(&mut self) {
        // Closing the channel lets the thread commit what is queued and end.
        self.sender.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = t.join();
        }
    }
}

fn run(svc: &System, receiver: &mpsc::Receiver<Msg>) {
    while let Ok(first) = receiver.recv() {
        if matches!(first, Msg::Settle(..)) {
            std::thread::sleep(LINGER);
        }
        let mut batch = Vec::new();
        let mut waiters = Vec::new();
        let mut next = Some(first);
        while let Some(m) = next.take() {
            match m {
                Msg::Settle(r, result) => batch.push((r, result)),
                Msg::Flush(w) => waiters.push(w),
            }
            if batch.len() < MAX_BATCH {
                next = receiver.try_recv().ok();
            }
        }
        if !batch.is_empty() {
            match svc.model_call_settle_batch(&batch) {
                Ok(each) => each.into_iter().for_each(report),
                Err(e) => {
                    tracing::warn!(error = %e, calls = batch.len(), "failed to settle model calls together; settling them one by one");
                    for (r, result) in batch {
                        report(svc.model_call_settle(r, result));
                    }
                }
            }
        }
        for w in waiters {
            let _ = w.send(());
        }
    }
}

fn report(r: agency_service::Result<()>) {
    match r {
        Ok(()) => {}
        // Fenced: another daemon owns the handler now.
        Err(e @ ServiceError::ReservationReleased { .. }) => {
            tracing::warn!(error = %e, "a model call's usage was not recorded");
        }
        Err(e) => tracing::error!(error = %e, "failed to record a model call's usage"),
    }
}
