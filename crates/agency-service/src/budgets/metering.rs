//! Metering of model calls: the daemon's model gateway
//! asks before it forwards a call ([`Service::model_call_reserve`]) and
//! records what the call used once its answer has ended
//! ([`Service::model_call_settle`]); `agency cost` reads the sums as a
//! tree of handlers ([`Service::cost_tree`]).
//!
//! The reserve/settle pair is where budgets hold (`budgets/`): a
//! reservation checks the caller and records the request's worst case
//! against its handler and every ancestor with a budget; the settlement
//! replaces it by the actual usage, both in one transaction each.
//!
//! Both commit lazily (`Service::write_lazy`): they are
//! the two store writes of every model call, and with an fsync each they
//! were a good part of the daemon's CPU per call. A lazy commit survives the
//! daemon's crash (kill -9) like any other; only a power cut or kernel
//! crash can lose the last ones not yet followed by a durable commit
//! (any KB write, tool call or run end fsyncs the log they are in). A
//! lost reservation costs nothing (a restart clears them all; a pause it
//! recorded is recorded again by the next call); a lost
//! settlement under-counts that call's spend, a window of milliseconds,
//! which budgets tolerate: they bound spending, they are not a ledger of
//! record for the provider's bill.

use crate::event_log::Record;
use agency_api::EventKind;
use agency_core::{AgentId, HandlerId, Principal};
use agency_store::{
    BudgetReservationRow, BudgetSpend, HandlerRow, ModelCallRow, TokenUsage, UsageTotals,
};

use crate::Result;
use crate::budgets::ledger::{
    Charge, admit, admit_on, chain, chain_from, held, pause_reached, refuse,
};
use crate::error::ServiceError;
use crate::service::{Caller, Op, Service, System, authenticate};
pub use agency_api::CostNode;

/// Handlers [`Service::handler_costs`] reads in one call at most.
pub const MAX_COST_HANDLERS: usize = 5000;

/// What the gateway knows of a call before forwarding it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelCallRequest {
    /// The `[models.NAME]` the call goes to.
    pub upstream: String,
    /// `anthropic` or `openai`.
    pub api: String,
    pub model: String,
    pub stream: bool,
    /// The answer's output tokens a budget reserves: the request's cap
    /// (`max_tokens`, or the upstream's default for a call without one)
    /// times the number of answers asked for (`n`).
    pub max_tokens: i64,
    /// An estimate of the request's input tokens (e.g. its body's bytes
    /// / 4): with `max_tokens`, the tokens a budget reserves.
    pub input_estimate: i64,
    /// The worst case's cost from the daemon's price table: what a budget
    /// reserves in micro-dollars.
    pub worst_cost_micro_usd: i64,
    /// Whether the price table has a price for `model`. An unpriced call
    /// costs an unknown amount, not 0: it is refused under a budget that
    /// limits cost, and recorded as unpriced (`agency cost` says so).
    pub priced: bool,
}

/// A call admitted by [`Service::model_call_reserve`]; settled exactly once
/// by [`System::model_call_settle`](crate::System::model_call_settle). Only
/// the service makes one, so a settlement always names a caller that was
/// authenticated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelReservation {
    handler: HandlerId,
    agent: AgentId,
    request: ModelCallRequest,
    /// The ledger row holding the call's worst case until it settles;
    /// also the call's id in the event log.
    ledger: i64,
    /// The handler and its ancestors, as the reservation charged them:
    /// the settlement takes the reservation back from the same handlers.
    chain: Vec<HandlerId>,
    /// When it was admitted.
    at: agency_core::Timestamp,
}

impl ModelReservation {
    pub fn handler(&self) -> HandlerId {
        self.handler
    }
    pub fn agent(&self) -> AgentId {
        self.agent
    }
    pub fn request(&self) -> &ModelCallRequest {
        &self.request
    }
}

/// How a call ended, as the gateway saw it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModelCallResult {
    /// The upstream's HTTP status (0: it could not be reached).
    pub status: i64,
    pub usage: TokenUsage,
    /// From the daemon's price table.
    pub cost_micro_usd: i64,
    /// `usage` is the reservation, not what the answer said: its final
    /// usage was never read (a stream cut, the agent gone, an answer that
    /// could not be read), and the provider may have billed up to it.
    pub estimated: bool,
}

impl Service {
    /// Gateway: admit one model call of agent `who`. Today: the caller must
    /// be a live agent of an active handler (the token check already said
    /// so; a handler stopped since is refused here), and the call's worst
    /// case must fit the budget of its handler and every ancestor; it is
    /// then reserved in the same transaction (see `budgets`). A call of an
    /// unpriced model (`priced: false`) is refused when a budget on the
    /// chain limits cost: its cost could not be counted against it.
    pub fn model_call_reserve(
        &self,
        who: Principal,
        request: ModelCallRequest,
    ) -> Result<ModelReservation> {
        self.write_lazy(move |op| reserve_in(op, who, request))?
    }

    /// Gateway: admit one call that the provider does not bill
    /// (`count_tokens`) but that still reaches it: refused like a metered
    /// call when the caller's subtree is paused or its wall-clock limit is
    /// reached, so a paused subtree reaches no provider at all. Nothing is
    /// reserved or recorded.
    pub fn model_call_admit_unbilled(&self, who: Principal) -> Result<()> {
        self.write_lazy(|op| match authenticate(op.tx, who)? {
            Caller::User => Err(ServiceError::denied(
                "failed to admit a model call: only an agent calls models through the gateway",
            )),
            Caller::Handler { row, .. } => {
                let charge = Charge {
                    blocked_by_pause: true,
                    ..Charge::default()
                };
                match admit(op, row.id, &charge, "call the model")? {
                    Ok(()) => Ok(Ok(())),
                    Err(r) => Ok(Err(refuse(op, r)?)),
                }
            }
        })?
    }

    /// The user: the latest model calls of one agent (its run), newest
    /// first, at most 1000.
    pub fn model_calls_of(&self, who: Principal, agent: AgentId) -> Result<Vec<ModelCallRow>> {
        self.read(|tx| {
            if !matches!(authenticate(tx, who)?, Caller::User) {
                return Err(ServiceError::denied(
                    "failed to read model calls: only the user reads them",
                ));
            }
            Ok(tx.model_calls_of_agent(agent, 1000)?)
        })
    }

    /// The user: the costs of each of `handlers` (at most
    /// [`MAX_COST_HANDLERS`]) as cards show them: own calls summed, the
    /// subtree's running totals as the ledger keeps them (no walk of the
    /// subtree, so a card costs the same on a tree of any size; a test
    /// holds them equal to [`Service::cost_tree`]'s recomputation). A
    /// handler that does not exist is not found.
    pub fn handler_costs(
        &self,
        who: Principal,
        handlers: &[HandlerId],
    ) -> Result<Vec<agency_api::HandlerCost>> {
        if handlers.len() > MAX_COST_HANDLERS {
            return Err(ServiceError::invalid(format!(
                "failed to read costs: {} handlers asked, at most {MAX_COST_HANDLERS} at a time",
                handlers.len()
            )));
        }
        self.read(|tx| {
            if !matches!(authenticate(tx, who)?, Caller::User) {
                return Err(ServiceError::denied(
                    "failed to read costs: only the user reads costs",
                ));
            }
            let own = tx.model_usage_of(handlers)?;
            handlers
                .iter()
                .zip(own)
                .map(|(&h, own)| {
                    if tx.handler(h)?.is_none() {
                        return Err(ServiceError::not_found("handler", h));
                    }
                    Ok(agency_api::HandlerCost {
                        handler: h,
                        own,
                        subtree: tx.budget_spend_of(h)?,
                        limits: tx.budget_of(h)?.map(|b| b.limits),
                    })
                })
                .collect()
        })
    }

    /// The user: model usage and cost of `root`'s subtree (default: the
    /// root handler's, i.e. everything), as a tree of self and subtree
    /// totals.
    pub fn cost_tree(&self, who: Principal, root: Option<HandlerId>) -> Result<CostNode> {
        self.read(|tx| {
            if !matches!(authenticate(tx, who)?, Caller::User) {
                return Err(ServiceError::denied(
                    "failed to read costs: only the user reads the cost tree",
                ));
            }
            let (root, rows) = subtree_of(tx, root)?;
            let ids: Vec<HandlerId> = rows.iter().map(|r| r.id).collect();
            let totals = tx.model_usage_of(&ids)?;
            Ok(build_tree(root, &rows, &totals))
        })
    }
}

/// The nearest handler on `handler`'s chain whose budget limits cost.
fn cost_limited(tx: &mut dyn agency_store::Tx, handler: HandlerId) -> Result<Option<HandlerId>> {
    let rows = chain(tx, handler)?;
    Ok(held(tx, &rows)?
        .into_iter()
        .find(|h| h.budget.limits.micro_usd.is_some())
        .map(|h| h.budget.handler))
}

/// Assemble the tree from the subtree's rows (`root` among them) and each
/// row's own totals, children ordered by id.
/// `root` (default: the root handler) and its subtree's rows, root first;
/// not found if `root` names no handler.
pub(crate) fn subtree_of(
    tx: &mut dyn agency_store::Tx,
    root: Option<HandlerId>,
) -> Result<(HandlerId, Vec<HandlerRow>)> {
    let root = match root {
        Some(id) => id,
        None => {
            tx.root_handler()?
                .ok_or_else(|| ServiceError::not_found("handler", "root"))?
                .id
        }
    };
    let rows = tx.handler_subtree(root)?;
    if rows.is_empty() {
        return Err(ServiceError::not_found("handler", root));
    }
    Ok((root, rows))
}

fn build_tree(root: HandlerId, rows: &[HandlerRow], totals: &[UsageTotals]) -> CostNode {
    use std::collections::BTreeMap;
    let mut children: BTreeMap<HandlerId, Vec<usize>> = BTreeMap::new();
    for (i, r) in rows.iter().enumerate() {
        if r.id != root
            && let Some(boss) = r.boss
        {
            children.entry(boss).or_default().push(i);
        }
    }
    let index: BTreeMap<HandlerId, usize> =
        rows.iter().enumerate().map(|(i, r)| (r.id, i)).collect();
    // Depth-first without recursion limits concerns: the subtree query
    // already refuses cycles, and a visited set keeps a corrupt one finite.
    fn node(
        i: usize,
        rows: &[HandlerRow],
        totals: &[UsageTotals],
        children: &BTreeMap<HandlerId, Vec<usize>>,
        seen: &mut std::collections::BTreeSet<usize>,
    ) -> CostNode {
        seen.insert(i);
        let own = totals.get(i).copied().unwrap_or_default();
        let mut subtree = own;
        let mut kids = Vec::new();
        for &c in children.get(&rows[i].id).map(Vec::as_slice).unwrap_or(&[]) {
            if seen.contains(&c) {
                continue;
            }
            let child = node(c, rows, totals, children, seen);
            subtree.add(&child.subtree);
            kids.push(child);
        }
        CostNode {
            handler: rows[i].id,
            status: rows[i].status,
            own,
            subtree,
            children: kids,
        }
    }
    let start = index.get(&root).copied().unwrap_or(0);
    node(
        start,
        rows,
        totals,
        &children,
        &mut std::collections::BTreeSet::new(),
    )
}

impl System {
    /// Gateway: record what a reserved call used. Not authenticated again:
    /// the agent may have ended while its last answer was streaming, and
    /// that answer was still spent. Refused, changing nothing
    /// (`ServiceError::ReservationReleased`), when its reservation is gone:
    /// another daemon took the handler over and released it, and only the
    /// lease's holder writes for the handler.
    pub fn model_call_settle(
        &self,
        reservation: ModelReservation,
        result: ModelCallResult,
    ) -> Result<()> {
        self.write_lazy(move |op| settle_in(op, reservation, result))
    }

    /// Settle and reserve several calls in one transaction (the gateway
    /// queues its metering and commits it together: one commit, and one
    /// write of the pages the calls share, instead of a transaction each).
    /// The settlements go first, so a reservation sees the budget they
    /// leave. Each call's refusal is its own: a settlement whose
    /// reservation is gone (see [`System::model_call_settle`]) and a
    /// reservation refused before it wrote anything change nothing, and
    /// a reservation refused by a budget commits the pause it records, as
    /// alone. A store failure fails them all, and nothing is written.
    pub fn model_call_meter_batch(
        &self,
        settle: &[(ModelReservation, ModelCallResult)],
        reserve: &[(Principal, ModelCallRequest)],
    ) -> Result<MeterBatch> {
        self.write_lazy(|op| {
            let mut settled = Vec::with_capacity(settle.len());
            for (reservation, result) in settle {
                match settle_in(op, reservation.clone(), *result) {
                    Err(e @ ServiceError::ReservationReleased { .. }) => settled.push(Err(e)),
                    Err(e) => return Err(e),
                    Ok(()) => settled.push(Ok(())),
                }
            }
            let mut reserved = Vec::with_capacity(reserve.len());
            for (who, request) in reserve {
                match reserve_in(op, *who, request.clone()) {
                    Ok(r) => reserved.push(r),
                    Err(e @ ServiceError::Store(_)) => return Err(e),
                    // Decided before its first write (`reserve_in`).
                    Err(e) => reserved.push(Err(e)),
                }
            }
            Ok(MeterBatch { settled, reserved })
        })
    }
}

/// What [`System::model_call_meter_batch`] did, call by call, in the order
/// it was given them.
#[derive(Debug)]
pub struct MeterBatch {
    pub settled: Vec<Result<()>>,
    pub reserved: Vec<Result<ModelReservation>>,
}

/// One reservation inside `op`'s transaction: the outer error is a
/// refusal decided before anything was written (or a store failure), the
/// inner one a refusal to commit with what it recorded (a pause). Keep it
/// so: [`System::model_call_meter_batch`] goes on with the other calls of
/// its transaction after an outer refusal.
fn reserve_in(
    op: &mut Op<'_>,
    who: Principal,
    request: ModelCallRequest,
) -> Result<Result<ModelReservation>> {
    match authenticate(op.tx, who)? {
        Caller::User => Err(ServiceError::denied(
            "failed to reserve a model call: only an agent calls models through the gateway",
        )),
        Caller::Handler { row, agent } => {
            if !request.priced
                && let Some(holder) = cost_limited(op.tx, row.id)?
            {
                return Err(ServiceError::denied(format!(
                    "failed to call the model: model {:?} has no price and the budget of \
                     handler {holder} limits cost, so the call's cost could not be counted; \
                     ask the user to price it ([prices.\"{}\"] in agency.toml, or \
                     default_price in [models.{}]) or to use a priced model",
                    request.model, request.model, request.upstream
                )));
            }
            let worst_tokens = request
                .max_tokens
                .max(0)
                .saturating_add(request.input_estimate.max(0));
            let charge = Charge {
                delta: BudgetSpend {
                    reserved_tokens: worst_tokens,
                    reserved_micro_usd: request.worst_cost_micro_usd.max(0),
                    reserved_calls: 1,
                    ..BudgetSpend::default()
                },
                blocked_by_pause: true,
                ..Charge::default()
            };
            let handler = row.id;
            let rows = chain_from(op.tx, row)?;
            if let Err(r) = admit_on(op, &rows, &charge, "call the model")? {
                // Committed with the pause it may record.
                return Ok(Err(refuse(op, r)?));
            }
            let ledger = op.tx.insert_budget_reservation(&BudgetReservationRow {
                at: op.now,
                handler,
                agent,
                tokens: worst_tokens,
                micro_usd: request.worst_cost_micro_usd.max(0),
            })?;
            op.record(
                Record::new(
                    EventKind::ModelCallStarted,
                    Some(handler),
                    format!(
                        "model call {ledger} to {} ({})",
                        request.model, request.upstream
                    ),
                )
                .agent(Some(agent))
                .data(call_data(
                    ledger,
                    &request,
                    serde_json::json!({
                        "stream": request.stream,
                        "max_tokens": request.max_tokens,
                    }),
                )),
            );
            Ok(Ok(ModelReservation {
                handler,
                agent,
                request,
                ledger,
                chain: rows.iter().map(|r| r.id).collect(),
                at: op.now,
            }))
        }
    }
}

/// One settlement inside `op`'s transaction; a released reservation is
/// refused before anything is written.
fn settle_in(
    op: &mut Op<'_>,
    reservation: ModelReservation,
    result: ModelCallResult,
) -> Result<()> {
    let ModelReservation {
        handler,
        agent,
        request,
        ledger,
        chain,
        at,
    } = reservation;
    // The fence of a settlement: its reservation. A daemon that
    // took the handler over released the reservations of the
    // agents it ended (`agents/leases.rs`), in the transaction that
    // raised the lease's token, so a settlement that finds none
    // comes from an owner that lost the lease, and changes nothing.
    // The row must be this agent's: SQLite may give a deleted
    // reservation's number to the next one.
    let held = op
        .tx
        .budget_reservation(ledger)?
        .filter(|r| r.agent == agent);
    let Some(held) = held else {
        return Err(ServiceError::ReservationReleased {
            call: ledger,
            handler: handler.to_string(),
        });
    };
    op.tx.delete_budget_reservation(ledger)?;
    let delta = BudgetSpend {
        tokens: result.usage.total(),
        micro_usd: result.cost_micro_usd,
        calls: 1,
        reserved_tokens: -held.tokens,
        reserved_micro_usd: -held.micro_usd,
        reserved_calls: -1,
        ..BudgetSpend::default()
    };
    op.tx.budget_spend_add(&chain, &delta)?;
    let u = &result.usage;
    let outcome = match result.status {
        200..=299 => "ok".to_owned(),
        0 => "unreachable".to_owned(),
        s => format!("HTTP {s}"),
    };
    op.record(
        Record::new(
            EventKind::ModelCallEnded,
            Some(handler),
            format!(
                "model call {ledger} to {} {outcome}: {} in / {} out tokens, ${:.4}{}",
                request.model,
                u.input_tokens + u.cache_read_tokens + u.cache_write_tokens,
                u.output_tokens,
                result.cost_micro_usd as f64 / 1e6,
                if request.priced { "" } else { " (unpriced)" }
            ),
        )
        .agent(Some(agent))
        .data(call_data(
            ledger,
            &request,
            serde_json::json!({
            "status": result.status,
            "input_tokens": u.input_tokens,
            "output_tokens": u.output_tokens,
            "cache_read_tokens": u.cache_read_tokens,
            "cache_write_tokens": u.cache_write_tokens,
            "cost_micro_usd": result.cost_micro_usd,
            "unpriced": !request.priced,
            "estimated": result.estimated,
            "duration_ms": op.now.0.saturating_sub(at.0),
            }),
        )),
    );
    op.tx.insert_model_call(&ModelCallRow {
        at: op.now,
        handler,
        agent,
        upstream: request.upstream,
        api: request.api,
        model: request.model,
        stream: request.stream,
        status: result.status,
        usage: result.usage,
        cost_micro_usd: result.cost_micro_usd,
        unpriced: !request.priced,
        estimated: result.estimated,
    })?;
    pause_reached(op, &chain)?;
    Ok(())
}

/// The data of a call's event: the call's number, upstream, API and model
/// (both events of a call carry them), and `more`.
fn call_data(
    ledger: i64,
    request: &ModelCallRequest,
    more: serde_json::Value,
) -> serde_json::Value {
    let mut data = serde_json::json!({
        "call": ledger,
        "upstream": request.upstream,
        "api": request.api,
        "model": request.model,
    });
    if let (Some(d), serde_json::Value::Object(more)) = (data.as_object_mut(), more) {
        d.extend(more);
    }
    data
}
