//! Leases: which daemon acts for a handler when several share one store.
//!
//! A daemon claims a handler's lease in the transaction that starts its
//! agent (`spawn_prepare`), renews all its leases by heartbeat, and gives
//! one back when the handler has nothing left to do. The lease is for
//! liveness; the token is for safety: every write a daemon makes as the
//! owner (starting an agent, recording its end) checks its token in the
//! same transaction, so a daemon that lost the lease (stalled past it, cut
//! off from the database) changes nothing and learns so.
//!
//! Taking over an expired lease from another owner ends that owner's live
//! agents of the handler in the store (their tokens die with them, so
//! their calls are refused from then on) and releases the budget their
//! calls in flight reserved: nobody will settle those.

use agency_api::EventKind;
use agency_core::{AgentId, HandlerId};
use agency_store::{AgentRow, BudgetSpend, LeaseRow, Tx};

use crate::Result;
use crate::error::ServiceError;
use crate::event_log::Record;
use crate::runs::RunReport;
use crate::service::{Op, System};

/// Who claims, and for how long: a daemon's identity (fresh at every
/// start) and its lease time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseSpec {
    pub owner: String,
    pub ttl_ms: i64,
}

/// The lease a daemon holds for one handler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldLease {
    pub handler: HandlerId,
    pub token: i64,
}

impl From<&LeaseRow> for HeldLease {
    fn from(r: &LeaseRow) -> Self {
        HeldLease {
            handler: r.handler,
            token: r.token,
        }
    }
}

/// Claim `handler` for `spec.owner` in the caller's transaction: its token,
/// or `None` when another daemon holds it. A takeover ends the previous
/// owner's live agents of the handler and releases their reservations.
pub(crate) fn claim(op: &mut Op<'_>, handler: HandlerId, spec: &LeaseSpec) -> Result<Option<i64>> {
    let before = op.tx.lease(handler)?;
    let Some(row) = op.tx.claim_lease(handler, &spec.owner, spec.ttl_ms)? else {
        return Ok(None);
    };
    let from = before
        .as_ref()
        .filter(|b| b.owner != spec.owner)
        .map(|b| b.owner.clone());
    if from.is_some() {
        end_previous_agents(op, handler, &spec.owner)?;
    }
    // An extension of a lease still held is no news; a new token is.
    if before.is_none_or(|b| b.token != row.token) {
        let summary = match &from {
            Some(prev) => format!(
                "daemon {} claimed handler {handler} after daemon {prev} (token {})",
                spec.owner, row.token
            ),
            None => format!(
                "daemon {} claimed handler {handler} (token {})",
                spec.owner, row.token
            ),
        };
        op.record(
            Record::new(EventKind::LeaseClaimed, Some(handler), summary)
                .data(serde_json::json!({"owner": spec.owner, "token": row.token, "from": from})),
        );
    }
    Ok(Some(row.token))
}

/// End the live agents of `handler` (a previous owner's) and release the
/// budget their calls in flight hold.
fn end_previous_agents(op: &mut Op<'_>, handler: HandlerId, owner: &str) -> Result<()> {
    let live = op.tx.live_agents_of(&[handler])?;
    if live.is_empty() {
        return Ok(());
    }
    let ids: Vec<AgentId> = live.iter().map(|a| a.id).collect();
    release_reservations(op, &ids)?;
    for a in &live {
        let report = RunReport {
            reason: format!(
                "taken over by daemon {owner}: the daemon that started it stopped renewing its lease"
            ),
            normal: false,
            ..RunReport::default()
        };
        crate::runs::finish_in(op, a, &report)?;
    }
    Ok(())
}

/// Release the budget the calls in flight of `agents` reserved: nobody
/// will settle them.
fn release_reservations(op: &mut Op<'_>, agents: &[AgentId]) -> Result<()> {
    if agents.is_empty() {
        return Ok(());
    }
    for (id, r) in op.tx.budget_reservations_of_agents(agents)? {
        op.tx.delete_budget_reservation(id)?;
        let chain: Vec<HandlerId> = crate::budgets::ledger::chain(op.tx, r.handler)?
            .iter()
            .map(|h| h.id)
            .collect();
        op.tx.budget_spend_add(
            &chain,
            &BudgetSpend {
                reserved_tokens: -r.tokens,
                reserved_micro_usd: -r.micro_usd,
                reserved_calls: -1,
                ..BudgetSpend::default()
            },
        )?;
    }
    Ok(())
}

/// The live agents a daemon starting as `owner` answers for: those of
/// handlers it leases, and those no daemon leases that a process was
/// recorded for (a daemon without leases spawned them: the store was its
/// alone before). An unleased agent without a process is an attached
/// client's (`agency token mint`): its token works on every daemon, so
/// no daemon's start ends it; revoking its token does.
fn owned_live(tx: &mut dyn Tx, owner: &str) -> Result<Vec<AgentRow>> {
    let live = tx.live_agents()?;
    let handlers: Vec<HandlerId> = live.iter().map(|a| a.handler).collect();
    let owners: std::collections::HashMap<HandlerId, String> = tx
        .leases_for(&handlers)?
        .into_iter()
        .map(|l| (l.handler, l.owner))
        .collect();
    let spawned: std::collections::HashSet<AgentId> = tx
        .live_agent_processes()?
        .into_iter()
        .map(|p| p.agent)
        .collect();
    Ok(live
        .into_iter()
        .filter(|a| match owners.get(&a.handler) {
            Some(o) => o == owner,
            None => spawned.contains(&a.id),
        })
        .collect())
}

/// Give `lease` back in the caller's transaction, logged; false if
/// `owner` did not hold it with that token.
pub(crate) fn release_in(op: &mut Op<'_>, owner: &str, lease: HeldLease) -> Result<bool> {
    let released = op.tx.release_lease(lease.handler, owner, lease.token)?;
    if released {
        op.record(
            Record::new(
                EventKind::LeaseReleased,
                Some(lease.handler),
                format!(
                    "daemon {owner} gave back handler {} (token {})",
                    lease.handler, lease.token
                ),
            )
            .data(serde_json::json!({"owner": owner, "token": lease.token})),
        );
    }
    Ok(released)
}

/// Whether `owner` may claim lease `l` now (`now` on the database's
/// clock): it is its own, or it expired.
pub(crate) fn claimable_by(l: &LeaseRow, owner: &str, now: agency_core::Timestamp) -> bool {
    l.owner == owner || l.expires_at <= now
}

/// The fence: refuse, changing nothing, unless `token` is still the
/// handler's lease token.
pub(crate) fn fence(op: &mut Op<'_>, handler: HandlerId, token: i64) -> Result<()> {
    if op.tx.lease_holds(handler, token)? {
        return Ok(());
    }
    Err(ServiceError::LeaseLost {
        handler: handler.to_string(),
        token,
    })
}

impl System {
    /// Daemon (heartbeat): extend every lease `spec.owner` holds; the ones
    /// it still holds. A lease missing from the answer was taken over:
    /// the daemon stops its agent for that handler.
    pub fn lease_renew(&self, spec: &LeaseSpec) -> Result<Vec<HeldLease>> {
        self.write(|op| {
            Ok(op
                .tx
                .renew_leases(&spec.owner, spec.ttl_ms)?
                .iter()
                .map(HeldLease::from)
                .collect())
        })
    }

    /// Daemon: give a handler's lease back (its agent is gone and it has
    /// nothing to do, or the daemon stops), so that any daemon may take
    /// it at once. False if it was not held with that token.
    pub fn lease_release(&self, owner: &str, lease: HeldLease) -> Result<bool> {
        self.write(|op| release_in(op, owner, lease))
    }

    /// Daemon: log that it noticed it no longer holds `lease` and stopped
    /// its agent for the handler (`reason` says how it learnt). A record
    /// only: it changes nothing the lease guards.
    pub fn lease_lost(&self, owner: &str, lease: HeldLease, reason: &str) -> Result<()> {
        self.write_lazy(|op| {
            op.record(
                Record::new(
                    EventKind::LeaseLost,
                    Some(lease.handler),
                    format!(
                        "daemon {owner} lost handler {} (token {}): {reason}",
                        lease.handler, lease.token
                    ),
                )
                .data(serde_json::json!({"owner": owner, "token": lease.token, "reason": reason})),
            );
            Ok(())
        })
    }

    /// Daemon (sweeper and fallback for wake-ups from other daemons):
    /// handlers with work whose lease this daemon could claim now (no
    /// lease, an expired one, or its own), at most `limit`.
    pub fn lease_claimable_work(&self, owner: &str, limit: usize) -> Result<Vec<HandlerId>> {
        self.read(|tx| {
            let now = tx.db_now()?;
            let mut out = Vec::new();
            let mut after = None;
            loop {
                let page = tx.handlers_with_work(after, 256)?;
                let leases: std::collections::HashMap<HandlerId, LeaseRow> = tx
                    .leases_for(&page)?
                    .into_iter()
                    .map(|l| (l.handler, l))
                    .collect();
                for &h in &page {
                    let free = match leases.get(&h) {
                        None => true,
                        Some(l) => claimable_by(l, owner, now),
                    };
                    if free {
                        out.push(h);
                        if out.len() >= limit {
                            return Ok(out);
                        }
                    }
                }
                match page.last() {
                    Some(&last) if page.len() == 256 => after = Some(last),
                    _ => return Ok(out),
                }
            }
        })
    }

    /// Daemon, at start on a shared store: end the agents recorded live
    /// that no other daemon answers for — those of handlers whose lease
    /// this daemon (`owner`, the same for every start of one home) holds,
    /// and spawned agents of handlers without a lease — releasing the
    /// budget their calls in flight reserved. The agents of handlers
    /// another owner leases are left alone: that daemon runs them, or the
    /// next claim takes them over; so are attached clients' agents. The
    /// ended agents, whose processes the caller stops.
    pub fn agents_reap_owned(&self, owner: &str, reason: &str) -> Result<Vec<AgentRow>> {
        self.write(|op| {
            let reaped = owned_live(op.tx, owner)?;
            release_reservations(op, &reaped.iter().map(|a| a.id).collect::<Vec<_>>())?;
            for a in &reaped {
                let report = RunReport {
                    reason: reason.to_owned(),
                    normal: false,
                    ..RunReport::default()
                };
                crate::runs::finish_in(op, a, &report)?;
            }
            Ok(reaped)
        })
    }

    /// The agents [`System::agents_reap_owned`] would end now.
    pub fn agents_owned_live(&self, owner: &str) -> Result<Vec<AgentRow>> {
        self.read(|tx| owned_live(tx, owner))
    }

    /// `agency status` on a shared store: every daemon holding leases now.
    pub fn lease_owners(&self) -> Result<Vec<agency_api::DaemonLeasesView>> {
        self.read(|tx| {
            Ok(tx
                .lease_owners()?
                .into_iter()
                .map(|o| agency_api::DaemonLeasesView {
                    owner: o.owner,
                    handlers: o.handlers,
                    expires_at: o.expires_at,
                })
                .collect())
        })
    }

    /// A handler's lease, for status displays and tests.
    pub fn lease_of(&self, handler: HandlerId) -> Result<Option<LeaseRow>> {
        self.read(|tx| Ok(tx.lease(handler)?))
    }
}
