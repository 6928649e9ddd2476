//! The gateway's metering, committed in batches. A call's reservation
//! (before it is forwarded) and its settlement (when its answer ends,
//! `meter.rs`) are queued for one thread, which commits whatever has
//! gathered in one transaction (`System::model_call_meter_batch`,
//! settlements first): one commit, and one write of the pages the calls
//! share (the reservations' table, the running totals of the handlers'
//! chain, the event log), instead of a blocking-pool hop and a
//! transaction each. A call waits for its reservation as before; the
//! calls of other agents arriving meanwhile join its batch.
//!
//! A settlement alone waits a few milliseconds for company (a reservation
//! or a flush ends the wait). Nothing is lost by that: until it commits,
//! a call is still counted at its reservation (its worst case), so budgets
//! only err on the safe side; a settlement is a lazy write anyway
//! (`write_lazy`); cost reads and the daemon's stop flush the queue first.
//! A batch that fails as a whole (a store error) is done again one call at
//! a time, so one bad call does not take the others with it.

use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use agency_core::Principal;
use agency_service::{
    ModelCallRequest, ModelCallResult, ModelReservation, Result, ServiceError, System,
};
use tokio::sync::oneshot;

/// How long settlements gather after the first of a batch when no
/// reservation comes to take them along.
const LINGER: Duration = Duration::from_millis(5);

/// The most calls one transaction takes.
const MAX_BATCH: usize = 256;

enum Msg {
    Reserve(
        Principal,
        ModelCallRequest,
        oneshot::Sender<Result<ModelReservation>>,
    ),
    Settle(ModelReservation, ModelCallResult),
    Flush(mpsc::Sender<()>),
}

/// The queue of reservations and settlements and the thread that commits
/// them.
#[derive(Debug)]
pub struct Metering {
    svc: Arc<System>,
    sender: Mutex<Option<mpsc::Sender<Msg>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Metering {
    pub fn start(svc: Arc<System>) -> Arc<Metering> {
        let (sender, receiver) = mpsc::channel::<Msg>();
        let thread_svc = svc.clone();
        let thread = std::thread::Builder::new()
            .name("agency-metering".into())
            .spawn(move || run(&thread_svc, &receiver))
            .map_err(|e| {
                tracing::error!(error = %e, "failed to start the metering thread; calls are metered one by one");
            })
            .ok();
        Arc::new(Metering {
            svc,
            sender: Mutex::new(thread.is_some().then_some(sender)),
            thread: Mutex::new(thread),
        })
    }

    /// Reserve one call (see `Service::model_call_reserve`). A caller that
    /// goes away while it waits leaves nothing reserved (`answer`).
    pub(crate) async fn reserve(
        &self,
        who: Principal,
        request: ModelCallRequest,
    ) -> Result<ModelReservation> {
        let (tx, rx) = oneshot::channel();
        if let Some(Msg::Reserve(who, request, _)) = self.send(Msg::Reserve(who, request, tx)) {
            // The queue is closed (the daemon is stopping): alone, off the
            // async threads.
            let svc = self.svc.clone();
            return tokio::task::spawn_blocking(move || svc.model_call_reserve(who, request))
                .await
                .unwrap_or_else(|_| Err(stopped("the reservation was cancelled")));
        }
        rx.await
            .unwrap_or_else(|_| Err(stopped("the metering thread has stopped")))
    }

    /// Queue one call's settlement; settled at once, on this thread, once
    /// the queue is closed (a call ending while the daemon stops).
    pub(crate) fn settle(&self, reservation: ModelReservation, result: ModelCallResult) {
        if let Some(Msg::Settle(r, result)) = self.send(Msg::Settle(reservation, result)) {
            report(self.svc.model_call_settle(r, result));
        }
    }

    /// Queue `m` for the thread; `m` back if the queue is closed.
    fn send(&self, m: Msg) -> Option<Msg> {
        let guard = self.sender.lock().unwrap_or_else(|p| p.into_inner());
        match guard.as_ref() {
            Some(s) => s.send(m).err().map(|mpsc::SendError(m)| m),
            None => Some(m),
        }
    }

    /// Block until every call queued before this one is committed (or has
    /// failed and been logged).
    pub fn flush(&self) {
        let (tx, rx) = mpsc::channel();
        if self.send(Msg::Flush(tx)).is_none() {
            let _ = rx.recv();
        }
    }
}

impl Drop for Metering {
    fn drop(&mut self) {
        // Closing the channel lets the thread commit what is queued and end.
        self.sender.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(t) = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = t.join();
        }
    }
}

/// The calls of one transaction, in the order they came.
#[derive(Default)]
struct Batch {
    settle: Vec<(ModelReservation, ModelCallResult)>,
    reserve: Vec<(Principal, ModelCallRequest)>,
    replies: Vec<oneshot::Sender<Result<ModelReservation>>>,
    waiters: Vec<mpsc::Sender<()>>,
}

impl Batch {
    fn len(&self) -> usize {
        self.settle.len() + self.reserve.len()
    }

    /// Add `m`; whether it should be committed without waiting for more.
    fn push(&mut self, m: Msg) -> bool {
        match m {
            Msg::Reserve(who, request, reply) => {
                self.reserve.push((who, request));
                self.replies.push(reply);
                true
            }
            Msg::Settle(r, result) => {
                self.settle.push((r, result));
                false
            }
            Msg::Flush(w) => {
                self.waiters.push(w);
                true
            }
        }
    }

    fn commit(self, svc: &System) {
        if self.len() > 0 {
            match svc.model_call_meter_batch(&self.settle, &self.reserve) {
                Ok(done) => {
                    done.settled.into_iter().for_each(report);
                    for (reply, r) in self.replies.into_iter().zip(done.reserved) {
                        answer(svc, reply, r);
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, calls = self.len(), "failed to meter model calls together; metering them one by one");
                    for (r, result) in self.settle {
                        report(svc.model_call_settle(r, result));
                    }
                    for (reply, (who, request)) in self.replies.into_iter().zip(self.reserve) {
                        answer(svc, reply, svc.model_call_reserve(who, request));
                    }
                }
            }
        }
        for w in self.waiters {
            let _ = w.send(());
        }
    }
}

fn run(svc: &System, receiver: &mpsc::Receiver<Msg>) {
    while let Ok(first) = receiver.recv() {
        let mut batch = Batch::default();
        let mut now = batch.push(first);
        // A settlement alone waits for company; a reservation waits for
        // nothing (its agent is waiting for it).
        let deadline = Instant::now() + LINGER;
        while !now {
            let left = deadline.saturating_duration_since(Instant::now());
            match receiver.recv_timeout(left) {
                Ok(m) => now = batch.push(m),
                Err(_) => break,
            }
        }
        while batch.len() < MAX_BATCH {
            match receiver.try_recv() {
                Ok(m) => {
                    batch.push(m);
                }
                Err(_) => break,
            }
        }
        batch.commit(svc);
    }
}

/// Give a reservation to the call waiting for it; if that call has gone
/// (its agent hung up meanwhile), settle it as never sent, so it does not
/// stay reserved.
fn answer(
    svc: &System,
    reply: oneshot::Sender<Result<ModelReservation>>,
    r: Result<ModelReservation>,
) {
    if let Err(Ok(orphan)) = reply.send(r) {
        report(svc.model_call_settle(orphan, ModelCallResult::default()));
    }
}

fn stopped(why: &str) -> ServiceError {
    ServiceError::Store(agency_store::StoreError::backend(
        "reserve a model call",
        why,
    ))
}

fn report(r: Result<()>) {
    match r {
        Ok(()) => {}
        // Fenced: another daemon owns the handler now.
        Err(e @ ServiceError::ReservationReleased { .. }) => {
            tracing::warn!(error = %e, "a model call's usage was not recorded");
        }
        Err(e) => tracing::error!(error = %e, "failed to record a model call's usage"),
    }
}
