//! Problems: stuck signals found deterministically, each an episode that
//! opens once (an event, a row of "needs you", a line of `agency
//! problems`, a notice to the handler's boss or the user) and closes when
//! its condition no longer holds — never a flood.
//!
//! The daemon calls [`System::problems_tick`] every `[watch]
//! tick_seconds`. A tick reads the log's new events (tool calls, ended
//! agents, refused mail: `detect.rs` keeps what they say between ticks),
//! looks at the store (handlers with work and their last activity,
//! budgets, pending approvals, recent failed model calls) and takes from
//! the daemon the live runs whose process is gone. Every condition that
//! holds is a signal; signals become episodes in one transaction, and the
//! open episodes no signal holds any more close in it.

pub(crate) mod detect;

use std::collections::BTreeSet;

use agency_api::{EventKind, Problem, ProblemKind};
use agency_core::{AgentId, MailTarget, Principal, Timestamp};
use agency_store::{ApprovalStatus, EventFilter, EventScope, ProblemRow, Tx};

use self::detect::{Signal, short};
use crate::Result;
use crate::budgets::ledger::{Kind, elapsed};
use crate::error::ServiceError;
use crate::event_log::Record;
use crate::service::{Caller, Service, System, authenticate};

/// Handlers with work looked at per tick, at most (the first by id: an
/// organisation with more handlers at work than this is not watched whole).
const MAX_HANDLERS: usize = 10_000;
/// Budgets looked at per tick, at most.
const MAX_BUDGETS: usize = 10_000;
/// Events read per tick, at most.
const MAX_EVENTS: usize = 50_000;
/// Failed model calls of one agent within [`STORM_WINDOW_MS`] that make
/// a retry storm.
const STORM_CALLS: usize = 5;
const STORM_WINDOW_MS: i64 = 60_000;
/// Episodes listed by `problems(all)`.
const RECENT: usize = 200;

/// Events that show a handler's agents working: its model and tool calls
/// (every action of an agent is one or the other).
const PROGRESS: &[&str] = &["model_call", "tool"];
/// Events that give a handler work (or let it go on): the clock of a
/// handler that was idle starts again at the latest of these. Not mail it
/// sent: Agency's own notices go out in its name.
const ARRIVAL: &[&str] = &[
    "mail.delivered",
    "outcome.created",
    "outcome.changed",
    "outcome.delegated",
    "handler.created",
    "budget.resumed",
    "approval.decided",
];

/// What one tick did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TickReport {
    pub raised: usize,
    pub cleared: usize,
    pub open: usize,
}

impl Service {
    /// The user: the open problems, oldest first; with `all`, the latest
    /// episodes, open and closed, newest first.
    pub fn problems(&self, who: Principal, all: bool) -> Result<Vec<Problem>> {
        self.read(|tx| {
            if !authenticate(tx, who)?.is_user() {
                return Err(ServiceError::denied(
                    "failed to list problems: only the user may; an agent is told of its underlings' problems by mail",
                ));
            }
            let rows = if all {
                tx.recent_problems(RECENT)?
            } else {
                tx.open_problems(MAX_HANDLERS)?
            };
            rows.into_iter().map(|r| wire(tx, r)).collect()
        })
    }
}

fn wire(tx: &mut dyn Tx, r: ProblemRow) -> Result<Problem> {
    let handler_title = match r.handler {
        Some(h) => tx.outcome(h.root())?.map(|o| o.title),
        None => None,
    };
    Ok(Problem {
        id: r.id,
        kind: ProblemKind::from(r.kind),
        handler: r.handler,
        handler_title,
        agent: r.agent,
        summary: r.summary,
        detail: serde_json::from_str(&r.detail).unwrap_or_default(),
        opened_at: r.opened_at,
        seen_at: r.seen_at,
        closed_at: r.closed_at,
    })
}

impl System {
    /// Daemon: one detection tick. `gone`: live runs whose process the
    /// daemon found gone.
    pub fn problems_tick(&self, gone: &[AgentId]) -> Result<TickReport> {
        let watch = self.cfg.watch;
        let mut tracker = self.problems.lock().unwrap_or_else(|p| p.into_inner());
        let now = self.now();
        let mut signals = self.read(|tx| {
            // New events since the last tick (on the first, those of the
            // last `stuck_after`: a loop under way when the daemon started
            // still counts).
            let since = tracker
                .cursor
                .is_none()
                .then(|| Timestamp(now.0.saturating_sub(watch.stuck_after_ms)));
            let mut after = tracker.cursor.unwrap_or(0);
            let mut read = 0;
            loop {
                let page = tx.events_after(&EventFilter {
                    after,
                    scope: EventScope::All,
                    kinds: ["tool.called", "agent.ended", "mail.refused"]
                        .map(str::to_owned)
                        .to_vec(),
                    since,
                    limit: 1000,
                })?;
                tracker.observe(&page);
                read += page.len();
                match page.last() {
                    Some(last) if page.len() == 1000 && read < MAX_EVENTS => after = last.seq,
                    Some(last) => {
                        after = last.seq;
                        break;
                    }
                    None => {
                        after = after.max(tx.last_event_seq()?);
                        break;
                    }
                }
            }
            tracker.cursor = Some(after);
            let mut s = tracker.loops();
            s.extend(stuck(tx, now, watch.stuck_after_ms)?);
            s.extend(budgets_near(tx, now)?);
            s.extend(stale_approvals(tx, now, watch.approval_stale_after_ms)?);
            s.extend(retry_storms(tx, now)?);
            s.extend(gone_runs(tx, gone)?);
            Ok(s)
        })?;
        signals.extend(tracker.refusals(now, watch.stuck_after_ms));
        drop(tracker);
        self.write(|op| {
            let mut report = TickReport::default();
            let mut holding = BTreeSet::new();
            for s in signals {
                holding.insert(s.key.clone());
                let row = ProblemRow {
                    id: 0,
                    kind: s.kind.as_str().to_owned(),
                    key: s.key.clone(),
                    handler: s.handler,
                    agent: s.agent,
                    summary: s.summary.clone(),
                    detail: s.detail.to_string(),
                    opened_at: op.now,
                    seen_at: op.now,
                    closed_at: None,
                };
                if let Some(id) = op.tx.open_problem(&row)? {
                    report.raised += 1;
                    raise(op, id, &s)?;
                }
            }
            for p in op.tx.open_problems(MAX_HANDLERS)? {
                if holding.contains(&p.key) {
                    report.open += 1;
                    continue;
                }
                if op.tx.close_problem(p.id, op.now)? {
                    report.cleared += 1;
                    op.record(
                        Record::new(
                            EventKind::ProblemCleared,
                            p.handler,
                            format!("problem {} cleared: {}", p.id, p.kind),
                        )
                        .agent(p.agent)
                        .data(serde_json::json!({ "problem": p.id, "kind": p.kind, "key": p.key })),
                    );
                }
            }
            Ok(report)
        })
    }
}

/// A new episode: its event, and a notice to the boss of the handler
/// concerned (the user for the root handler).
fn raise(op: &mut crate::service::Op<'_>, id: i64, s: &Signal) -> Result<()> {
    op.record(
        Record::new(
            EventKind::ProblemRaised,
            s.handler,
            format!("problem {id} ({}): {}", s.kind, s.summary),
        )
        .agent(s.agent)
        .data(serde_json::json!({
            "problem": id, "kind": s.kind, "key": s.key, "detail": s.detail,
        })),
    );
    let Some(h) = s.handler else { return Ok(()) };
    let Some(row) = op.tx.handler(h)? else {
        return Ok(());
    };
    let to = row.boss.map_or(MailTarget::User, MailTarget::Handler);
    let title = op
        .tx
        .outcome(h.root())?
        .map(|o| o.title)
        .unwrap_or_default();
    let body = format!(
        "Agency found a problem with handler {h} (\"{title}\"): {}\n\n\
         It is shown in `agency problems` and the dashboard until it clears; you are told once per episode.",
        s.summary
    );
    // In the handler's name, like a stall notice: no agent of it acts.
    let caller = Caller::Handler {
        row,
        agent: AgentId(uuid::Uuid::nil()),
    };
    op.notice(
        &caller,
        to,
        &format!("Problem: {} — {title}", s.kind),
        &body,
    );
    Ok(())
}

/// Handlers with work whose last activity is older than `after_ms`.
fn stuck(tx: &mut dyn Tx, now: Timestamp, after_ms: i64) -> Result<Vec<Signal>> {
    let progress: Vec<String> = PROGRESS.iter().map(|s| (*s).to_owned()).collect();
    let arrival: Vec<String> = ARRIVAL.iter().map(|s| (*s).to_owned()).collect();
    let mut out = Vec::new();
    for h in tx.handlers_with_work(None, MAX_HANDLERS)? {
        // A stalled handler is its own row of "needs you".
        if tx.stalled(h)?.is_some() {
            continue;
        }
        let last = tx
            .last_event_at(h, &progress)?
            .max(tx.last_event_at(h, &arrival)?);
        let Some(last) = last else { continue };
        let idle = now.0.saturating_sub(last.0);
        if idle > after_ms {
            out.push(Signal {
                kind: ProblemKind::Stuck,
                key: format!("stuck:{h}"),
                handler: Some(h),
                agent: None,
                summary: format!(
                    "handler {} has work and no progress for {} min — read its audit log; send guidance or stop it",
                    short(&h),
                    idle / 60_000
                ),
                detail: serde_json::json!({ "last_activity": last, "idle_ms": idle }),
            });
        }
    }
    Ok(out)
}

/// Budgets whose subtree used 80% or more of a consumption limit (not
/// yet paused: a pause is its own row).
fn budgets_near(tx: &mut dyn Tx, now: Timestamp) -> Result<Vec<Signal>> {
    let mut out = Vec::new();
    let mut after = None;
    let mut seen = 0;
    while seen < MAX_BUDGETS {
        let page = tx.budgets_after(after, 500)?;
        let Some(last) = page.last() else { break };
        after = Some(last.handler);
        seen += page.len();
        for b in page {
            if b.paused.is_some() || b.limits.is_empty() {
                continue;
            }
            let spend = tx.budget_spend_of(b.handler)?;
            let mut near = Vec::new();
            for k in Kind::ALL.into_iter().filter(|k| k.pauses()) {
                let Some(limit) = k.limit(&b.limits).filter(|l| *l > 0) else {
                    continue;
                };
                let used = match k {
                    Kind::WallClock => elapsed(&b, now),
                    _ => k.spent(&spend).unwrap_or(0) + k.in_flight(&spend),
                };
                if used.saturating_mul(5) >= limit.saturating_mul(4) {
                    near.push(serde_json::json!({ "limit": k.name(), "used": used, "of": limit }));
                }
            }
            if near.is_empty() {
                continue;
            }
            let what: Vec<String> = near
                .iter()
                .map(|n| {
                    format!(
                        "{} {} of {}",
                        n["limit"].as_str().unwrap_or(""),
                        n["used"],
                        n["of"]
                    )
                })
                .collect();
            out.push(Signal {
                kind: ProblemKind::BudgetNear,
                key: format!("budget_near:{}", b.handler),
                handler: Some(b.handler),
                agent: None,
                summary: format!(
                    "the budget of handler {} is at 80% or more: {} — raise it (agency budget set) or let it pause",
                    short(&b.handler),
                    what.join(", ")
                ),
                detail: serde_json::json!({ "near": near }),
            });
        }
    }
    Ok(out)
}

/// Approvals pending longer than `after_ms`.
fn stale_approvals(tx: &mut dyn Tx, now: Timestamp, after_ms: i64) -> Result<Vec<Signal>> {
    Ok(tx
        .approvals_list(false, None, 1000)?
        .into_iter()
        .filter(|a| a.status == ApprovalStatus::Pending)
        .filter(|a| now.0.saturating_sub(a.created_at.0) > after_ms)
        .map(|a| Signal {
            kind: ProblemKind::ApprovalStale,
            key: format!("approval_stale:{}", a.id),
            handler: Some(a.handler),
            agent: Some(a.agent),
            summary: format!(
                "approval {} ({}) has waited {} min — agency approve {} or agency deny {}",
                a.id,
                a.tool,
                now.0.saturating_sub(a.created_at.0) / 60_000,
                a.id,
                a.id
            ),
            detail: serde_json::json!({ "approval": a.id, "tool": a.tool, "since": a.created_at }),
        })
        .collect())
}

/// Agents with [`STORM_CALLS`] or more failed model calls in the last
/// [`STORM_WINDOW_MS`].
fn retry_storms(tx: &mut dyn Tx, now: Timestamp) -> Result<Vec<Signal>> {
    let rows = tx.events_after(&EventFilter {
        after: 0,
        scope: EventScope::All,
        kinds: vec!["model_call.ended".to_owned()],
        since: Some(Timestamp(now.0.saturating_sub(STORM_WINDOW_MS))),
        limit: 10_000,
    })?;
    let mut failed: std::collections::BTreeMap<AgentId, (Option<agency_core::HandlerId>, usize)> =
        std::collections::BTreeMap::new();
    for r in rows {
        let data: serde_json::Value = serde_json::from_str(&r.event.data).unwrap_or_default();
        let ok = data["status"]
            .as_i64()
            .is_some_and(|s| (200..300).contains(&s));
        if let (false, Some(a)) = (ok, r.event.agent) {
            let e = failed.entry(a).or_insert((r.event.handler, 0));
            e.1 += 1;
        }
    }
    Ok(failed
        .into_iter()
        .filter(|(_, (_, n))| *n >= STORM_CALLS)
        .map(|(agent, (handler, n))| Signal {
            kind: ProblemKind::RetryStorm,
            key: format!("retry_storm:{agent}"),
            handler,
            agent: Some(agent),
            summary: format!(
                "agent {} had {n} failed model calls within a minute — check the upstream (agency model …) and the daemon's log",
                short(&agent)
            ),
            detail: serde_json::json!({ "failed_calls": n, "window_ms": STORM_WINDOW_MS }),
        })
        .collect())
}

/// Runs still recorded as live whose process the daemon found gone.
fn gone_runs(tx: &mut dyn Tx, gone: &[AgentId]) -> Result<Vec<Signal>> {
    let mut out = Vec::new();
    for a in gone {
        let Some(row) = tx.agent(*a)? else { continue };
        if row.ended_at.is_some() {
            continue;
        }
        out.push(Signal {
            kind: ProblemKind::RunGone,
            key: format!("run_gone:{a}"),
            handler: Some(row.handler),
            agent: Some(*a),
            summary: format!(
                "agent {} is recorded as live but its process is gone — the daemon will reap it; see agency logs {}",
                short(a),
                short(a)
            ),
            detail: serde_json::json!({ "agent": a }),
        });
    }
    Ok(out)
}
