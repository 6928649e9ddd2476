//! Handlers: bootstrap of the root, delegation (one transaction for every
//! bullet of seed 000 "Delegation"), force-stop with reclaim (the six steps
//! of "Handler Shutdown & Cascading Cleanup", one transaction), retirement
//! when a handler's root outcome finishes, and the work query.

use crate::event_log::Record;
use agency_api::EventKind;
use agency_core::access::FileKind;
use agency_core::{
    AgentId, FileId, HandlerId, Level, MailTarget, OutcomeId, OutcomeStatus, Principal, Resource,
    StatusChange,
};
use agency_store::{
    BudgetLimits, CapOrigin, CapabilityRow, FileRow, HandlerRow, HandlerStatus, NewCapability,
    OutcomeRow, RevokeSelector, Tx,
};

use crate::Result;
use crate::access::visible_outcome;
use crate::error::ServiceError;
use crate::events::Event;
use crate::permissions::grant_in;
use crate::render::{
    Author, SYSTEM_ACTION, create_file, log, outcome_event, render_audit_log_file,
    render_outcome_file,
};
use crate::service::{Caller, Op, Service, System, authenticate};
use crate::tree::inbox::ensure_process_inbox;
use crate::tree::outcomes::{author, finish_outcome};
use crate::views::{Delegation, GrantRequest, HandlerView, StopReport};

/// The root outcome's title (seed 000, "The User & the Root Handler").
pub const ROOT_TITLE: &str = "Help the user accomplish all their work";

impl Service {
    /// Delegate an outcome the caller is responsible for to a new underling
    /// handler, granting `grants` (each derived from a capability the caller
    /// holds, scoped to the outcome).
    pub fn delegate(
        &self,
        who: Principal,
        outcome: OutcomeId,
        grants: &[GrantRequest],
    ) -> Result<Delegation> {
        self.delegate_with_budget(who, outcome, grants, None)
    }

    /// [`Service::delegate`], giving the new underling a budget carved out
    /// of what remains of the caller's own (and every budget above it),
    /// never more (`budgets/carve.rs`). Every delegation is charged to the
    /// budgets above: a paused one, or its handlers or depth limit, refuses.
    pub fn delegate_with_budget(
        &self,
        who: Principal,
        outcome: OutcomeId,
        grants: &[GrantRequest],
        budget: Option<BudgetLimits>,
    ) -> Result<Delegation> {
        if grants.len() > 256 {
            return Err(ServiceError::invalid(
                "failed to delegate: at most 256 capabilities per delegation",
            ));
        }
        self.write(|op| {
            let caller = authenticate(op.tx, who)?;
            let boss = caller.require_handler("delegate an outcome")?.id;
            let (o, _) = visible_outcome(op.tx, &caller, outcome)?;
            if o.id == boss.root() {
                return Err(ServiceError::invalid(format!(
                    "failed to delegate outcome {outcome}: it is your own root outcome; delegate a child of it"
                )));
            }
            if o.responsible != boss {
                return Err(ServiceError::denied(format!(
                    "failed to delegate outcome {outcome}: handler {} is responsible for it, not you",
                    o.responsible
                )));
            }
            if !matches!(o.status, OutcomeStatus::Open | OutcomeStatus::Blocked) || o.process_inbox {
                return Err(ServiceError::invalid(format!(
                    "failed to delegate outcome {outcome}: only an open or blocked work outcome can be delegated (it is {}{})",
                    o.status,
                    if o.process_inbox { ", a Process Inbox outcome" } else { "" }
                )));
            }
            crate::quotas::check_new_handler(op.tx, &self.cfg.limits, boss, outcome)?;
            // Before any write: a refusal that pauses a budget commits.
            if let Err(e) = crate::budgets::carve::admit_delegation(op, boss, outcome)? {
                return Ok(Err(e));
            }
            let u = HandlerId::from_root(outcome);
            crate::tree::handoffs::hand_off(op, &self.cfg.limits, &caller, u, &format!("delegate outcome {outcome}"))?;
            if let Some(limits) = &budget {
                crate::budgets::carve::carve(op, boss, u, outcome, limits)?;
            }
            let a = author(&caller);
            let reactivated = match op.tx.handler(u)? {
                Some(mut existing) => {
                    crate::budgets::carve::move_subtree(op, u, existing.boss, boss)?;
                    // A handler stopped earlier comes back with its state
                    // document and audit log: continuity for its next agent.
                    existing.boss = Some(boss);
                    existing.status = HandlerStatus::Active;
                    existing.updated_at = op.now;
                    op.tx.update_handler(&existing)?;
                    log(op, u, None, format!("reactivated by delegation from handler {boss}"))?;
                    render_audit_log_file(op, u, a)?;
                    true
                }
                None => {
                    create_handler(op, u, Some(boss), a)?;
                    false
                }
            };
            let moved = op.tx.reassign_subtree(outcome, boss, u, op.now)?;
            system_cap(op, u, Resource::Mail(MailTarget::Handler(boss)), Some(outcome))?;
            system_cap(op, boss, Resource::Mail(MailTarget::Handler(u)), Some(outcome))?;
            let mut capabilities = Vec::with_capacity(grants.len());
            for g in grants {
                capabilities.push(grant_in(op, &caller, u, g, None)?);
            }
            outcome_event(op, outcome, a, "delegated", format!("to handler {u} ({moved} outcomes moved)"))?;
            render_outcome_file(op, outcome, a)?;
            op.emit(Event::HandlerCreated { handler: u, boss: Some(boss) });
            let by = crate::event_log::party(op.tx, MailTarget::Handler(boss))?;
            op.record(
                Record::new(
                    EventKind::OutcomeDelegated,
                    Some(u),
                    format!("outcome {:?} delegated by {by} ({moved} outcomes moved)", o.title),
                )
                .agent(caller.agent())
                .outcome(outcome)
                .data(serde_json::json!({ "outcome": outcome, "from": boss, "to": u, "outcomes_moved": moved, "reactivated": reactivated, "capabilities": capabilities.len() })),
            );
            if reactivated && op.tx.inbox_count(MailTarget::Handler(u))? > 0 {
                ensure_process_inbox(op, u)?;
            }
            Ok(Ok(Delegation { handler: u, capabilities, outcomes_moved: moved, reactivated }))
        })?
    }

    /// Force-stop a handler and reclaim its outcomes: its agents and every
    /// agent below it are ended (the report lists the processes to kill),
    /// the handlers are deactivated (state kept), the boss re-owns every
    /// outcome they were responsible for, and their capabilities are
    /// revoked. A boss may stop its direct underling; the user any handler
    /// except the root.
    pub fn force_stop(&self, who: Principal, target: HandlerId) -> Result<StopReport> {
        self.write(|op| {
            let caller = authenticate(op.tx, who)?;
            let t = visible_handler(op.tx, &caller, target)?;
            if let Caller::Handler { row, .. } = &caller
                && t.boss != Some(row.id)
            {
                return Err(ServiceError::denied(format!(
                    "failed to force-stop handler {target}: you may force-stop only your direct underlings"
                )));
            }
            let Some(boss) = t.boss else {
                return Err(ServiceError::invalid(format!(
                    "failed to force-stop handler {target}: it is the root handler, which has no boss to reclaim its outcomes; force-stop its underlings instead"
                )));
            };
            if t.status != HandlerStatus::Active {
                return Err(ServiceError::invalid(format!("failed to force-stop handler {target}: it is already deactivated")));
            }
            // The organisation's shape is the user's (`agency up`/`down`):
            // a boss agent does not fire a standing agent.
            if !caller.is_user()
                && let Some(oa) = op.tx.org_agent_by_handler(target)?
                && oa.status == agency_store::OrgAgentStatus::Active
            {
                return Err(ServiceError::denied(format!(
                    "failed to force-stop handler {target}: it is agent {} of organisation {}, which only the user changes (agency up, agency down)",
                    oa.agent, oa.org
                )));
            }
            let a = author(&caller);
            let why = format!(
                "deactivated: force-stopped by {}",
                match &caller {
                    Caller::User => "the user".to_owned(),
                    Caller::Handler { row, .. } => format!("handler {}", row.id),
                }
            );
            let retired = retire_subtree(op, target, &why, a)?;
            let reclaimed = op.tx.reassign_all(&retired.handlers, boss, op.now)?;
            outcome_event(op, target.root(), a, "reclaimed", format!("by handler {boss} after force-stop ({reclaimed} outcomes)"))?;
            render_outcome_file(op, target.root(), a)?;
            for c in &retired.revoked {
                op.emit(Event::CapabilityRevoked { capability: c.id, holder: c.holder, resource: c.resource.clone() });
            }
            // The boss has work again if any reclaimed outcome is open.
            let status = op.tx.outcome(target.root())?.map_or(OutcomeStatus::Open, |o| o.status);
            op.emit(Event::OutcomeStatusChanged { outcome: target.root(), responsible: boss, status });
            Ok(StopReport {
                handlers: retired.handlers,
                agents_to_kill: retired.agents,
                new_owner: boss,
                outcomes_reclaimed: reclaimed,
                revoked: retired.revoked.iter().map(|c| c.id).collect(),
            })
        })
    }

    /// One handler, as seen by itself, its boss, or the user.
    pub fn handler_view(&self, who: Principal, id: HandlerId) -> Result<HandlerView> {
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            let h = visible_handler(tx, &caller, id)?;
            handler_view(tx, h)
        })
    }

    /// Every handler (user only), ordered by id; page with `after`.
    pub fn handlers(
        &self,
        who: Principal,
        after: Option<HandlerId>,
        limit: Option<usize>,
    ) -> Result<Vec<HandlerView>> {
        let limit = self.cfg.limits.page(limit);
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            let rows = match &caller {
                Caller::User => tx.handlers(after, limit)?,
                Caller::Handler { row, .. } => {
                    let mut v = vec![row.clone()];
                    v.extend(tx.underlings(row.id)?);
                    v
                }
            };
            rows.into_iter().map(|h| handler_view(tx, h)).collect()
        })
    }
}

/// Load a handler the caller may see: itself, its direct underlings, its
/// boss; the user sees all. Others are `NotFound`.
pub(crate) fn visible_handler(
    tx: &mut dyn Tx,
    caller: &Caller,
    id: HandlerId,
) -> Result<HandlerRow> {
    let h = tx
        .handler(id)?
        .ok_or_else(|| ServiceError::not_found("handler", id))?;
    match caller {
        Caller::User => Ok(h),
        Caller::Handler { row, .. }
            if h.id == row.id || h.boss == Some(row.id) || row.boss == Some(h.id) =>
        {
            Ok(h)
        }
        Caller::Handler { .. } => Err(ServiceError::not_found("handler", id)),
    }
}

fn handler_view(tx: &mut dyn Tx, h: HandlerRow) -> Result<HandlerView> {
    let title = tx
        .outcome(h.id.root())?
        .map(|o| o.title)
        .unwrap_or_default();
    let inbox_depth = tx.inbox_count(MailTarget::Handler(h.id))?;
    let live_agent = tx.live_agents_of(&[h.id])?.first().map(|a| a.id);
    let has_work = tx.has_work(h.id)?;
    let stalled = tx.stalled(h.id)?.map(|(_, reason)| reason);
    let paused = crate::budgets::paused_over(tx, h.id)?;
    Ok(HandlerView {
        id: h.id,
        boss: h.boss,
        status: h.status,
        title,
        state_doc: h.state_doc,
        audit_log: h.audit_log,
        inbox_depth,
        live_agent,
        has_work,
        stalled,
        paused,
    })
}

/// Create a handler row with its state document and audit log.
pub(crate) fn create_handler(
    op: &mut Op<'_>,
    id: HandlerId,
    boss: Option<HandlerId>,
    a: Author,
) -> Result<()> {
    let title = op
        .tx
        .outcome(id.root())?
        .map(|o| o.title)
        .unwrap_or_default();
    let state_doc = FileId::new_random();
    let audit_log = FileId::new_random();
    let file = |fid, kind, description: String, now| FileRow {
        id: fid,
        kind,
        description,
        owner: Some(id),
        created_at: now,
        created_by: None,
        latest_version: 0,
    };
    let now = op.now;
    let state = format!(
        "# State of handler {id}\n\nRoot outcome: kb://{} ({title})\n\nNo agent has written state yet.\n",
        id.root()
    );
    create_file(
        op,
        file(
            state_doc,
            FileKind::State,
            format!("State document of handler {id}: {title}"),
            now,
        ),
        state.as_bytes(),
        a,
    )?;
    let log_text = agency_core::render::render_audit_log(&title, &[]);
    create_file(
        op,
        file(
            audit_log,
            FileKind::AuditLog,
            format!("Audit log of handler {id}: {title}"),
            now,
        ),
        log_text.as_bytes(),
        a,
    )?;
    op.tx.insert_handler(&HandlerRow {
        id,
        boss,
        status: HandlerStatus::Active,
        state_doc,
        audit_log,
        created_at: now,
        updated_at: now,
    })?;
    let origin = match boss {
        Some(b) => format!("created by delegation from handler {b}"),
        None => "created as the root handler; the user is its boss".to_owned(),
    };
    log(op, id, None, origin)?;
    render_audit_log_file(op, id, a)?;
    if boss.is_none() {
        op.emit(Event::HandlerCreated {
            handler: id,
            boss: None,
        });
    }
    Ok(())
}

/// Insert a non-delegatable capability made by Agency from the tree.
pub(crate) fn system_cap(
    op: &mut Op<'_>,
    holder: HandlerId,
    resource: Resource,
    scope: Option<OutcomeId>,
) -> Result<()> {
    let cap = NewCapability {
        holder,
        resource,
        level: Level::Write,
        delegatable: false,
        scope,
        derived_from: None,
        granted_by: None,
        origin: CapOrigin::System,
        created_at: op.now,
    };
    let id = op.tx.insert_capability(&cap)?;
    op.emit(Event::CapabilityGranted {
        capability: id,
        holder,
        resource: cap.resource,
    });
    Ok(())
}

pub(crate) struct Retired {
    pub handlers: Vec<HandlerId>,
    pub agents: Vec<AgentId>,
    pub revoked: Vec<CapabilityRow>,
}

/// Deactivate `top` and every active handler below it: end their live
/// agents, close their Process Inbox outcomes, revoke what they hold and
/// the mail capabilities aimed at them, note it in each audit log, and hand
/// their work product to `top`'s boss. Outcomes keep their responsible
/// handler; force-stop reassigns them afterwards.
pub(crate) fn retire_subtree(
    op: &mut Op<'_>,
    top: HandlerId,
    why: &str,
    a: Author,
) -> Result<Retired> {
    let whole = op.tx.handler_subtree(top)?;
    let boss = whole.iter().find(|h| h.id == top).and_then(|h| h.boss);
    let everyone: Vec<HandlerId> = whole.iter().map(|h| h.id).collect();
    let subtree: Vec<HandlerRow> = whole
        .into_iter()
        .filter(|h| h.status == HandlerStatus::Active)
        .collect();
    let ids: Vec<HandlerId> = subtree.iter().map(|h| h.id).collect();
    let live = op.tx.live_agents_of(&ids)?;
    for ag in &live {
        op.tx.end_agent(ag.id, op.now, "handler_deactivated")?;
        op.emit(Event::AgentEnded {
            agent: ag.id,
            handler: ag.handler,
        });
    }
    for mut h in subtree {
        h.status = HandlerStatus::Deactivated;
        h.updated_at = op.now;
        op.tx.update_handler(&h)?;
        let note = if h.id == top {
            why.to_owned()
        } else {
            format!("{why} (handler {top} above it was stopped)")
        };
        log(op, h.id, None, note)?;
        render_audit_log_file(op, h.id, a)?;
        let agents = live
            .iter()
            .filter(|ag| ag.handler == h.id)
            .map(|ag| ag.id)
            .collect();
        op.emit(Event::HandlerStopped {
            handler: h.id,
            agents,
        });
    }
    close_process_inboxes(op, &ids, a)?;
    let mut revoked = op.tx.revoke(&RevokeSelector::HeldBy(ids.clone()), op.now)?;
    revoked.extend(op.tx.revoke(&RevokeSelector::MailTo(ids.clone()), op.now)?);
    if let Some(boss) = boss {
        // After the revocations, so that what the boss held only through
        // the retired handlers is handed over anew.
        hand_over(op, boss, &everyone)?;
    }
    Ok(Retired {
        handlers: ids,
        agents: live.iter().map(|ag| ag.id).collect(),
        revoked,
    })
}

/// Close the open Process Inbox outcomes of retiring handlers:
/// they are the stopped handler's own chore, not work for the boss that
/// reclaims its outcomes. Unacknowledged mail stays in the inbox; a handler
/// brought back by delegation gets a new Process Inbox for it.
fn close_process_inboxes(op: &mut Op<'_>, handlers: &[HandlerId], a: Author) -> Result<()> {
    for &h in handlers {
        if let Some(pi) = op.tx.open_process_inbox(h)?
            && let Some(o) = op.tx.outcome(pi)?
        {
            finish_outcome(
                op,
                o,
                StatusChange::Close,
                "handler deactivated; its unacknowledged mail waits for it in its inbox",
                a,
            )?;
        }
    }
    Ok(())
}

/// Issue 9 item 3: a retiring subtree's work product passes to the boss
/// that retires it (seed 000: state documents and audit logs "remain in the
/// Knowledge Base for historical reference and potential review by the Boss
/// Handler's Agent"). For every file the subtree's handlers (the ones
/// retiring now and any retired below them before) created, received as
/// a message body, or own as state document or audit log, the boss gets a
/// delegatable capability scoped to its own root: Write on documents they
/// created (the creator's own level), Read on everything else. It is
/// derived from nothing, since the capabilities it replaces were just
/// revoked; a boss already holding that level gets nothing new.
fn hand_over(op: &mut Op<'_>, boss: HandlerId, handlers: &[HandlerId]) -> Result<()> {
    for f in op.tx.work_product(handlers)? {
        let created_here = f.created_by.is_some_and(|c| handlers.contains(&c));
        let level = if created_here && f.kind == FileKind::Document {
            Level::Write
        } else {
            Level::Read
        };
        let resource = Resource::Kb(f.id);
        if op
            .tx
            .capabilities_on(boss, &resource)?
            .iter()
            .any(|c| c.level >= level)
        {
            continue;
        }
        let cap = NewCapability {
            holder: boss,
            resource,
            level,
            delegatable: true,
            scope: Some(boss.root()),
            derived_from: None,
            granted_by: None,
            origin: CapOrigin::Handover,
            created_at: op.now,
        };
        let id = op.tx.insert_capability(&cap)?;
        op.emit(Event::CapabilityGranted {
            capability: id,
            holder: boss,
            resource: cap.resource,
        });
    }
    Ok(())
}

impl System {
    /// Create the perpetual root outcome, the root handler, its state
    /// document and audit log, unless they exist. Returns the root handler.
    pub fn bootstrap(&self) -> Result<HandlerId> {
        self.write(|op| {
            if let Some(root) = op.tx.root_handler()? {
                return Ok(root.id);
            }
            let id = OutcomeId::new_random();
            let h = HandlerId::from_root(id);
            let row = OutcomeRow {
                id,
                title: ROOT_TITLE.to_owned(),
                description: "The perpetual root outcome. The user is its boss; every other outcome serves it.".to_owned(),
                status: OutcomeStatus::Open,
                status_reason: None,
                priority: 0,
                perpetual: true,
                process_inbox: false,
                responsible: h,
                created_at: op.now,
                updated_at: op.now,
            };
            op.tx.insert_outcome(&row)?;
            outcome_event(op, id, Author::default(), &format!("{SYSTEM_ACTION}created"), "bootstrap".to_owned())?;
            render_outcome_file(op, id, Author::default())?;
            create_handler(op, h, None, Author::default())?;
            // The root handler writes to the user like any handler to its boss.
            system_cap(op, h, Resource::Mail(MailTarget::User), Some(id))?;
            Ok(h)
        })
    }

    /// The root handler, if bootstrapped.
    pub fn root_handler(&self) -> Result<Option<HandlerId>> {
        self.read(|tx| Ok(tx.root_handler()?.map(|h| h.id)))
    }

    /// Daemon: active handlers with work (responsible for an open,
    /// non-perpetual outcome), ordered by id; page with `after`.
    pub fn handlers_with_work(
        &self,
        after: Option<HandlerId>,
        limit: usize,
    ) -> Result<Vec<HandlerId>> {
        self.read(|tx| Ok(tx.handlers_with_work(after, limit)?))
    }

    /// Daemon: whether one handler has work now.
    pub fn has_work(&self, handler: HandlerId) -> Result<bool> {
        self.read(|tx| Ok(tx.has_work(handler)?))
    }
}
