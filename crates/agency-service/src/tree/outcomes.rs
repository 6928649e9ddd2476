//! Outcome operations: create, update (including re-parenting, refusing
//! cycles), complete, close, request completion, and the read views.

use std::collections::{BTreeMap, BTreeSet};

use agency_core::{
    OutcomeAccess, OutcomeId, OutcomeStatus, Principal, StatusChange, check_status_change,
};
use agency_store::{HandlerStatus, OutcomeRow, RevokeSelector};

use crate::Result;
use crate::access::{outcome_access_of, parent_outcome, visible_outcome, writable_outcome};
use crate::error::ServiceError;
use crate::events::Event;
use crate::render::{Author, outcome_event, render_outcome_file};
use crate::service::{Caller, Op, Service, authenticate};
use crate::tree::area::{visible_ancestors, visible_subtree};
use crate::tree::handlers::retire_subtree;
use crate::views::{FinishReport, NewOutcome, OutcomeBrief, OutcomeUpdate, OutcomeView, Subtree};

/// Most parents one outcome may have.
const MAX_PARENTS: usize = 32;
/// Most "why?" chains returned by `outcome_ancestors`.
const MAX_CHAINS: usize = 64;

/// History events `outcome_view` returns (the newest ones).
const VIEW_HISTORY: usize = 50;

impl Service {
    /// Create an outcome under one or more parents the caller is responsible
    /// for; the caller becomes its responsible handler.
    pub fn outcome_create(&self, who: Principal, new: &NewOutcome) -> Result<OutcomeId> {
        let l = &self.cfg.limits;
        l.check_title(&new.title)?;
        l.check_description("description", &new.description)?;
        let parents = dedupe_parents(&new.parents)?;
        self.write(|op| {
            let caller = authenticate(op.tx, who)?;
            let h = caller.require_handler("create an outcome")?.id;
            crate::quotas::check_outcomes(op.tx, &self.cfg.limits, h)?;
            for p in &parents {
                parent_outcome(op.tx, &caller, *p)?;
            }
            let id = OutcomeId::new_random();
            let row = OutcomeRow {
                id,
                title: new.title.trim().to_owned(),
                description: new.description.clone(),
                status: OutcomeStatus::Open,
                status_reason: None,
                priority: new.priority,
                perpetual: false,
                process_inbox: false,
                responsible: h,
                created_at: op.now,
                updated_at: op.now,
            };
            insert_outcome(
                op,
                &row,
                &parents,
                author(&caller),
                "created",
                String::new(),
            )?;
            Ok(id)
        })
    }

    /// Change title, description, priority, status (open/blocked) or the
    /// set of parents. Needs Write on the outcome.
    pub fn outcome_update(
        &self,
        who: Principal,
        id: OutcomeId,
        upd: &OutcomeUpdate,
    ) -> Result<agency_api::Outcome> {
        let l = &self.cfg.limits;
        if let Some(t) = &upd.title {
            l.check_title(t)?;
        }
        if let Some(d) = &upd.description {
            l.check_description("description", d)?;
        }
        if let Some(r) = &upd.reason {
            l.check_reason("reason", r)?;
        }
        let new_parents = upd.parents.as_deref().map(dedupe_parents).transpose()?;
        self.write(|op| {
            let caller = authenticate(op.tx, who)?;
            // A handler may block and unblock its own root (say it is waiting
            // on an underling, so it has no work and no agent is respawned),
            // but change nothing else about it: the root is its boss's.
            let own_root_status_only = caller.handler().is_some_and(|h| h.root() == id)
                && upd.title.is_none()
                && upd.description.is_none()
                && upd.priority.is_none()
                && upd.parents.is_none()
                && upd.status.is_some();
            let mut o = if own_root_status_only {
                let o = visible_outcome(op.tx, &caller, id)?.0;
                if !matches!(o.status, OutcomeStatus::Open | OutcomeStatus::Blocked) {
                    return Err(ServiceError::invalid(format!(
                        "failed to update outcome {id}: it is {}; only your boss changes it now",
                        o.status
                    )));
                }
                o
            } else {
                writable_outcome(op.tx, &caller, id, "update")?
            };
            let mut changes = Vec::new();
            if let Some(t) = &upd.title
                && t.trim() != o.title
            {
                changes.push(format!("title {:?} -> {:?}", o.title, t.trim()));
                o.title = t.trim().to_owned();
            }
            if let Some(d) = &upd.description
                && *d != o.description
            {
                changes.push("description changed".to_owned());
                o.description = d.clone();
            }
            if let Some(p) = upd.priority
                && p != o.priority
            {
                changes.push(format!("priority {} -> {p}", o.priority));
                o.priority = p;
            }
            let old_status = o.status;
            if let Some(s) = upd.status {
                let to = status_change(&o, StatusChange::Set(s), "update")?;
                match to {
                    OutcomeStatus::Blocked => {
                        let reason = upd.reason.clone().ok_or_else(|| {
                            ServiceError::invalid(format!(
                                "failed to block outcome {id}: give a reason"
                            ))
                        })?;
                        changes.push(format!("status {} -> blocked: {reason}", o.status));
                        o.status_reason = Some(reason);
                    }
                    _ if to != o.status => {
                        changes.push(format!("status {} -> {to}", o.status));
                        o.status_reason = None;
                    }
                    _ => {}
                }
                o.status = to;
            } else if upd.reason.is_some() {
                return Err(ServiceError::invalid(
                    "failed to update outcome: a reason goes with status blocked",
                ));
            }
            let mut touched_parents = BTreeSet::new();
            if let Some(new_parents) = &new_parents {
                touched_parents = reparent(op, &caller, &o, new_parents)?;
                if !touched_parents.is_empty() {
                    changes.push(format!("parents set to {}", join_ids(new_parents)));
                }
            }
            if changes.is_empty() {
                return Ok(o);
            }
            o.updated_at = op.now;
            op.tx.update_outcome(&o)?;
            let a = author(&caller);
            outcome_event(op, id, a, "updated", changes.join("; "))?;
            render_outcome_file(op, id, a)?;
            for p in touched_parents {
                render_outcome_file(op, p, a)?;
            }
            if o.status != old_status {
                op.emit(Event::OutcomeStatusChanged {
                    outcome: id,
                    responsible: o.responsible,
                    status: o.status,
                });
            }
            notify_underling_of_root_change(op, &caller, &o, &changes)?;
            Ok(o)
        })
        .map(|o| crate::wire::outcome(&o))
    }

    /// Mark an outcome accomplished. Revokes every capability scoped to it
    /// (and everything derived from those); if it is a handler's root, that
    /// handler and every handler below it are retired.
    pub fn outcome_complete(
        &self,
        who: Principal,
        id: OutcomeId,
        rationale: &str,
    ) -> Result<FinishReport> {
        self.finish(who, id, rationale, StatusChange::Complete)
    }

    /// Mark an outcome disproven or abandoned, with the rationale written
    /// into its file. Same revocation and retirement as completion.
    pub fn outcome_close(
        &self,
        who: Principal,
        id: OutcomeId,
        rationale: &str,
    ) -> Result<FinishReport> {
        self.finish(who, id, rationale, StatusChange::Close)
    }

    fn finish(
        &self,
        who: Principal,
        id: OutcomeId,
        rationale: &str,
        change: StatusChange,
    ) -> Result<FinishReport> {
        self.cfg.limits.check_reason("rationale", rationale)?;
        self.write(|op| {
            let caller = authenticate(op.tx, who)?;
            let o = writable_outcome(op.tx, &caller, id, if change == StatusChange::Complete { "complete" } else { "close" })?;
            if o.process_inbox {
                let depth = op.tx.inbox_count(agency_core::MailTarget::Handler(o.responsible))?;
                if depth > 0 {
                    return Err(ServiceError::invalid(format!(
                        "failed to finish Process Inbox outcome {id}: {depth} messages are still unacknowledged; read and acknowledge them first"
                    )));
                }
            }
            finish_outcome(op, o, change, rationale, author(&caller))
        })
    }

    /// The caller's handler believes its root outcome is accomplished: mark
    /// it awaiting_verification and ask the boss (or the user) to verify.
    pub fn outcome_request_completion(
        &self,
        who: Principal,
        summary: &str,
    ) -> Result<agency_api::Outcome> {
        self.cfg.limits.check_reason("summary", summary)?;
        self.write(|op| {
            let caller = authenticate(op.tx, who)?;
            let h = caller.require_handler("request completion")?.clone();
            let mut o = op.tx.outcome(h.id.root())?.ok_or_else(|| ServiceError::not_found("outcome", h.id.root()))?;
            o.status = status_change(&o, StatusChange::RequestCompletion, "request completion of")?;
            o.status_reason = Some(summary.to_owned());
            o.updated_at = op.now;
            op.tx.update_outcome(&o)?;
            let a = author(&caller);
            outcome_event(op, o.id, a, "completion_requested", summary.to_owned())?;
            render_outcome_file(op, o.id, a)?;
            op.emit(Event::OutcomeStatusChanged { outcome: o.id, responsible: o.responsible, status: o.status });
            let boss = h.boss.map_or(agency_core::MailTarget::User, agency_core::MailTarget::Handler);
            let body = format!(
                "Handler {} requests verification and completion of its root outcome kb://{} ({}).\n\nSummary:\n{summary}\n\nIf satisfied, complete the outcome; otherwise set it back to open and tell the handler what is missing.",
                h.id, o.id, o.title
            );
            op.system_mail(&caller, boss, &format!("Completion requested: {}", o.title), &body);
            Ok(o)
        })
        .map(|o| crate::wire::outcome(&o))
    }

    /// An outcome with its immediate neighbours, responsible handler and
    /// history.
    pub fn outcome_view(&self, who: Principal, id: OutcomeId) -> Result<OutcomeView> {
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            let (o, access) = visible_outcome(tx, &caller, id)?;
            let mut parents = Vec::new();
            for p in tx.parents(id)? {
                if let Some(row) = tx.outcome(p)?
                    && outcome_access_of(tx, &caller, &row)? != OutcomeAccess::Invisible
                {
                    parents.push(crate::views::outcome_brief(&row));
                }
            }
            let mut children = Vec::new();
            for c in tx.children(id)? {
                if let Some(row) = tx.outcome(c)?
                    && outcome_access_of(tx, &caller, &row)? != OutcomeAccess::Invisible
                {
                    children.push(crate::views::outcome_brief(&row));
                }
            }
            let handler = tx
                .handler(agency_core::HandlerId::from_root(id))?
                .map(|h| h.id);
            // The newest events within the page budget; the whole history
            // pages with `outcome_history`.
            let history_total = tx.outcome_event_count(id)?;
            let mut history = Vec::new();
            let mut bytes = 0usize;
            let latest = tx.outcome_events_latest(id, VIEW_HISTORY)?;
            for (_, e) in latest.into_iter().rev() {
                bytes += 256 + e.detail.len();
                if !history.is_empty() && bytes > self.cfg.limits.max_page_bytes {
                    break;
                }
                history.push(e);
            }
            history.reverse();
            Ok(OutcomeView {
                outcome: crate::wire::outcome(&o),
                access,
                parents,
                children,
                handler,
                history: history
                    .into_iter()
                    .map(crate::wire::outcome_event)
                    .collect(),
                history_total,
            })
        })
    }

    /// Every "why?" chain from the outcome up to a root, each listed from
    /// the outcome upwards, made only of outcomes the caller may see. A DAG
    /// can have many; at most 64 are returned.
    pub fn outcome_ancestors(
        &self,
        who: Principal,
        id: OutcomeId,
    ) -> Result<Vec<Vec<OutcomeBrief>>> {
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            let (o, _) = visible_outcome(tx, &caller, id)?;
            let edges = tx.ancestor_edges(id)?;
            let mut parents_of: BTreeMap<OutcomeId, Vec<OutcomeId>> = BTreeMap::new();
            for &(p, c) in &edges {
                parents_of.entry(c).or_default().push(p);
            }
            let mut rows: BTreeMap<OutcomeId, OutcomeRow> = BTreeMap::new();
            rows.insert(id, o);
            for &p in parents_of.values().flatten() {
                if let std::collections::btree_map::Entry::Vacant(e) = rows.entry(p)
                    && let Some(row) = tx.outcome(p)?
                {
                    e.insert(row);
                }
            }
            // A chain through an outcome the caller may not see is left out
            // whole (not cut short), so that nothing — not even that such an
            // outcome exists — shows; the chain through the caller's own
            // root always remains.
            let visible = visible_ancestors(tx, &caller, &edges, &rows)?;
            let shown = |n: &OutcomeId| visible.as_ref().is_none_or(|v| v.contains(n));
            let mut chains = Vec::new();
            let mut stack = vec![vec![id]];
            while let Some(path) = stack.pop() {
                if chains.len() >= MAX_CHAINS {
                    break;
                }
                let last = *path.last().expect("paths are never empty");
                match parents_of.get(&last) {
                    Some(ps) if !ps.is_empty() => {
                        for p in ps.iter().rev().filter(|p| shown(p)) {
                            let mut next = path.clone();
                            next.push(*p);
                            stack.push(next);
                        }
                    }
                    _ => chains.push(
                        path.iter()
                            .filter_map(|n| rows.get(n).map(crate::views::outcome_brief))
                            .collect(),
                    ),
                }
            }
            Ok(chains)
        })
    }

    /// The outcome and those of its descendants the caller may see (at most
    /// `limit`, default 1000).
    pub fn outcome_subtree(
        &self,
        who: Principal,
        id: OutcomeId,
        limit: Option<usize>,
    ) -> Result<Subtree> {
        let limit = limit.unwrap_or(1000).clamp(1, 10_000);
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            visible_outcome(tx, &caller, id)?;
            let (rows, edges) = visible_subtree(tx, &caller, id, limit + 1)?;
            let truncated = rows.len() > limit;
            let outcomes: Vec<OutcomeBrief> = rows
                .iter()
                .take(limit)
                .map(crate::views::outcome_brief)
                .collect();
            let kept: BTreeSet<OutcomeId> = outcomes.iter().map(|o| o.id).collect();
            let edges = edges
                .into_iter()
                .filter(|(p, c)| kept.contains(p) && kept.contains(c))
                .collect();
            Ok(Subtree {
                root: id,
                outcomes,
                edges,
                truncated,
            })
        })
    }

    /// Outcomes a handler is responsible for (itself, its boss, or the user).
    pub fn outcomes_of(
        &self,
        who: Principal,
        handler: agency_core::HandlerId,
    ) -> Result<Vec<OutcomeBrief>> {
        let limit = self.cfg.limits.max_list;
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            crate::tree::handlers::visible_handler(tx, &caller, handler)?;
            Ok(tx
                .outcomes_of(handler, limit)?
                .iter()
                .map(crate::views::outcome_brief)
                .collect())
        })
    }
}

pub(crate) fn author(caller: &Caller) -> Author {
    Author {
        handler: caller.handler(),
        agent: caller.agent(),
    }
}

/// Insert an outcome with its edges, history, rendering, and the
/// re-rendering of its parents (whose child links changed).
pub(crate) fn insert_outcome(
    op: &mut Op<'_>,
    row: &OutcomeRow,
    parents: &[OutcomeId],
    a: Author,
    action: &str,
    detail: String,
) -> Result<()> {
    op.tx.insert_outcome(row)?;
    for p in parents {
        op.tx.insert_edge(*p, row.id)?;
    }
    outcome_event(op, row.id, a, action, detail)?;
    render_outcome_file(op, row.id, a)?;
    for p in parents {
        render_outcome_file(op, *p, a)?;
    }
    op.emit(Event::OutcomeStatusChanged {
        outcome: row.id,
        responsible: row.responsible,
        status: row.status,
    });
    Ok(())
}

/// Complete or close `o` (already checked for Write) with its cascades.
pub(crate) fn finish_outcome(
    op: &mut Op<'_>,
    mut o: OutcomeRow,
    change: StatusChange,
    rationale: &str,
    a: Author,
) -> Result<FinishReport> {
    let what = if change == StatusChange::Complete {
        "complete"
    } else {
        "close"
    };
    o.status = status_change(&o, change, what)?;
    o.status_reason = Some(rationale.to_owned());
    o.updated_at = op.now;
    op.tx.update_outcome(&o)?;
    outcome_event(op, o.id, a, o.status.as_str(), rationale.to_owned())?;
    render_outcome_file(op, o.id, a)?;
    // Parents list their children as not finished or finished.
    for p in op.tx.parents(o.id)? {
        render_outcome_file(op, p, a)?;
    }
    op.emit(Event::OutcomeStatusChanged {
        outcome: o.id,
        responsible: o.responsible,
        status: o.status,
    });
    let mut revoked: Vec<_> = op.tx.revoke(&RevokeSelector::ScopedTo(o.id), op.now)?;
    let mut report = FinishReport {
        outcome: o.id,
        status: o.status,
        revoked: Vec::new(),
        retired_handlers: Vec::new(),
        agents_to_kill: Vec::new(),
    };
    if let Some(h) = op.tx.handler(agency_core::HandlerId::from_root(o.id))?
        && h.status == HandlerStatus::Active
    {
        let why = format!(
            "retired: root outcome {} was {} ({rationale})",
            o.id, o.status
        );
        let retired = retire_subtree(op, h.id, &why, a)?;
        revoked.extend(retired.revoked);
        report.retired_handlers = retired.handlers;
        report.agents_to_kill = retired.agents;
    }
    for c in &revoked {
        op.emit(Event::CapabilityRevoked {
            capability: c.id,
            holder: c.holder,
            resource: c.resource.clone(),
        });
    }
    report.revoked = revoked.iter().map(|c| c.id).collect();
    Ok(report)
}

/// Apply a new parent set; returns the parents whose child lists changed.
fn reparent(
    op: &mut Op<'_>,
    caller: &Caller,
    o: &OutcomeRow,
    new: &[OutcomeId],
) -> Result<BTreeSet<OutcomeId>> {
    if o.perpetual {
        return Err(ServiceError::invalid(format!(
            "failed to re-parent outcome {}: the root outcome has no parents",
            o.id
        )));
    }
    let old: BTreeSet<OutcomeId> = op.tx.parents(o.id)?.into_iter().collect();
    let new: BTreeSet<OutcomeId> = new.iter().copied().collect();
    let caller_h = caller.require_handler("re-parent an outcome")?.id;
    for p in new.difference(&old) {
        parent_outcome(op.tx, caller, *p)?;
        if op.tx.is_descendant_or_self(*p, o.id)? {
            return Err(ServiceError::invalid(format!(
                "failed to add parent {p} to outcome {}: {p} is {} outcome {}, so the edge would make a cycle",
                o.id,
                if *p == o.id {
                    "the same as"
                } else {
                    "a descendant of"
                },
                o.id
            )));
        }
    }
    // The outcome must stay inside the caller's area, so that every outcome
    // a handler is responsible for remains reachable from its root.
    let mut anchored = false;
    for p in &new {
        if let Some(row) = op.tx.outcome(*p)?
            && row.responsible == caller_h
        {
            anchored = true;
        }
    }
    if !anchored {
        return Err(ServiceError::invalid(format!(
            "failed to re-parent outcome {}: keep at least one parent you are responsible for",
            o.id
        )));
    }
    let mut touched = BTreeSet::new();
    for p in old.difference(&new) {
        op.tx.delete_edge(*p, o.id)?;
        touched.insert(*p);
    }
    for p in new.difference(&old) {
        op.tx.insert_edge(*p, o.id)?;
        touched.insert(*p);
    }
    Ok(touched)
}

/// When a boss changes the root outcome of an underling, tell the underling:
/// it cannot change that outcome itself and must learn of it.
fn notify_underling_of_root_change(
    op: &mut Op<'_>,
    caller: &Caller,
    o: &OutcomeRow,
    changes: &[String],
) -> Result<()> {
    let Some(h) = op.tx.handler(agency_core::HandlerId::from_root(o.id))? else {
        return Ok(());
    };
    if h.status != HandlerStatus::Active || caller.handler() == Some(h.id) {
        return Ok(());
    }
    let body = format!(
        "Your root outcome kb://{} ({}) was changed by your boss: {}.\nRe-read it with outcome_view and adjust your plan.",
        o.id,
        o.title,
        changes.join("; ")
    );
    op.system_mail(
        caller,
        agency_core::MailTarget::Handler(h.id),
        &format!("Your outcome changed: {}", o.title),
        &body,
    );
    Ok(())
}

/// The state machine's decision, its refusal in "failed to …" form naming
/// the outcome (agents act on the text; the rule's own words say why).
fn status_change(o: &OutcomeRow, change: StatusChange, what: &str) -> Result<OutcomeStatus> {
    check_status_change(o.status, o.perpetual, change)
        .map_err(|e| ServiceError::invalid(format!("failed to {what} outcome {}: {}", o.id, e.0)))
}

fn dedupe_parents(parents: &[OutcomeId]) -> Result<Vec<OutcomeId>> {
    let set: BTreeSet<OutcomeId> = parents.iter().copied().collect();
    if set.is_empty() {
        return Err(ServiceError::invalid(
            "failed to accept parents: an outcome needs at least one parent (the outcome it helps accomplish)",
        ));
    }
    if set.len() > MAX_PARENTS {
        return Err(ServiceError::invalid(format!(
            "failed to accept parents: at most {MAX_PARENTS} are allowed"
        )));
    }
    Ok(set.into_iter().collect())
}

fn join_ids(ids: &[OutcomeId]) -> String {
    ids.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
