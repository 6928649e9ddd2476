//! Leases, when several daemons share one store: this daemon runs an agent
//! for a handler only while it holds the handler's lease.
//!
//! The spawn claims it (in the spawn's own transaction); a heartbeat
//! renews every lease this daemon holds, on the database's clock, and the
//! answer says which it still holds: an agent whose lease is gone (another
//! daemon took it over while this one was stalled) is stopped — only an
//! agent recorded before the renewal began: one claimed meanwhile may be
//! missing from an answer read before its claim committed. When no
//! renewal has succeeded for a whole lease time (the store unreachable),
//! every agent is stopped: this daemon no longer acts as their owner. The
//! same tick sweeps for work this daemon may claim (leases expired with a
//! dead daemon, work delivered by another daemon): polling, bounded by the
//! heartbeat. An exited agent's run is recorded under its lease token
//! (`agent_finish_as`), and the lease is given back when the handler has
//! nothing left to do.

use std::collections::HashSet;
use std::time::Duration;

use agency_core::HandlerId;
use agency_service::{HeldLease, LeaseSpec};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::{Msg, State};

/// How this daemon takes part: its identity and lease time, and how often
/// it renews.
#[derive(Debug, Clone)]
pub struct LeaseSettings {
    pub spec: LeaseSpec,
    pub heartbeat: Duration,
}

/// Handlers looked at per sweep.
const SWEEP: usize = 1000;

/// Renew every `heartbeat`, reporting each answer to the dispatcher.
pub(super) async fn heartbeat(
    svc: std::sync::Arc<agency_service::System>,
    settings: LeaseSettings,
    tx: mpsc::UnboundedSender<Msg>,
) {
    let mut tick = tokio::time::interval(settings.heartbeat);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let began = Instant::now();
        let (s, spec) = (svc.clone(), settings.spec.clone());
        let renewed = tokio::task::spawn_blocking(move || s.lease_renew(&spec))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()));
        if tx.send(Msg::Renewed(began, renewed)).is_err() {
            return;
        }
    }
}

impl State {
    /// A heartbeat's answer: stop the agents whose lease is gone, or every
    /// agent once a whole lease time passed without a renewal; then sweep.
    pub(super) async fn renewed(
        &mut self,
        began: Instant,
        renewed: Result<Vec<HeldLease>, String>,
    ) {
        let Some(settings) = self.lease.clone() else {
            return;
        };
        let grace = Duration::from_millis(self.cfg.kill_grace_ms);
        match renewed {
            Ok(held) => {
                self.renewed_at = began;
                let held: HashSet<(HandlerId, i64)> =
                    held.iter().map(|l| (l.handler, l.token)).collect();
                let mut lost = Vec::new();
                for (h, run) in self.running.iter_mut() {
                    let Some(l) = run.lease else { continue };
                    // Claimed after this renewal read the leases: the
                    // answer cannot tell (the next one will).
                    if run.leased_at > began {
                        continue;
                    }
                    if run.stop_reason.is_none() && !held.contains(&(*h, l.token)) {
                        lost.push(l);
                        tracing::warn!(handler = %h, agent = %run.agent, token = l.token, "lease lost (lapsed, or taken over by another daemon); stopping the handler's agent here");
                        run.stop_reason = Some(
                            "stopped: its daemon no longer holds the handler's lease (it lapsed, or another daemon took it over)"
                                .to_owned(),
                        );
                        run.stop(grace);
                    }
                }
                for l in lost {
                    let owner = settings.spec.owner.clone();
                    let logged = self
                        .blocking(move |s| {
                            s.lease_lost(&owner, l, "its renewal found it taken over or lapsed; the agent here was stopped")
                        })
                        .await;
                    if let Err(e) = logged {
                        tracing::warn!(handler = %l.handler, error = %e, "failed to log the loss of the lease of handler {}", l.handler);
                    }
                }
                self.sweep(&settings.spec.owner).await;
            }
            Err(e) => {
                let ttl = Duration::from_millis(u64::try_from(settings.spec.ttl_ms).unwrap_or(0));
                tracing::warn!(error = %e, "failed to renew this daemon's leases");
                if self.renewed_at.elapsed() < ttl {
                    return;
                }
                for (h, run) in self.running.iter_mut() {
                    if run.lease.is_some() && run.stop_reason.is_none() {
                        tracing::warn!(handler = %h, agent = %run.agent, "lease lapsed: the store was unreachable for longer than the lease; stopping the agent");
                        run.stop_reason = Some(
                            "stopped: its daemon could not renew the lease for longer than the lease time"
                                .to_owned(),
                        );
                        run.stop(grace);
                    }
                }
            }
        }
    }

    /// Consider the handlers with work this daemon may claim now.
    pub(super) async fn sweep(&mut self, owner: &str) {
        let owner = owner.to_owned();
        let found = self
            .blocking(move |s| s.lease_claimable_work(&owner, SWEEP))
            .await;
        match found {
            Ok(handlers) => {
                for h in handlers {
                    self.consider(h).await;
                }
            }
            Err(e) => tracing::warn!(error = %e, "failed to look for work to claim"),
        }
    }

    /// Give a handler's lease back (its agent is recorded and it has
    /// nothing to do, or this daemon stops), so another daemon may take
    /// it at once.
    pub(super) async fn release_lease(&mut self, lease: HeldLease) {
        let Some(settings) = &self.lease else { return };
        let owner = settings.spec.owner.clone();
        let released = self.blocking(move |s| s.lease_release(&owner, lease)).await;
        if let Err(e) = released {
            tracing::warn!(handler = %lease.handler, error = %e, "failed to release the lease of handler {}", lease.handler);
        }
    }
}
