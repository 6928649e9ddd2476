//! `agency up`: stand an Agency Model up under the root
//! handler, or bring a changed model's organisation in line with it, in
//! one write transaction whose plan is computed inside it
//! (`orgs/plan.rs`). Each agent is a standing handler with a perpetual
//! root outcome (so it has work only when mail arrives); an agency's
//! executive's handler is the boss of its agents and of its sub-agencies'
//! executives, and the top executive's boss is the root handler. Reporting
//! lines and connections are mail capabilities; tools and capability
//! strings are capabilities from the user. Agents unchanged keep
//! everything; changed ones are updated in place; removed ones retired
//! (state kept, capabilities revoked); a model that fails its checks
//! changes nothing.

use std::collections::{BTreeMap, BTreeSet};

use agency_core::{HandlerId, MailTarget, OutcomeId, OutcomeStatus, Principal, Resource};
use agency_org::AgencyModel;
use agency_store::{
    BudgetRow, CapOrigin, HandlerStatus, NewCapability, OrgAgentRow, OrgAgentStatus, OrgGrantRow,
    OrgRow, OutcomeRow, RevokeSelector,
};

use crate::Result;
use crate::error::ServiceError;
use crate::events::Event;
use crate::orgs::plan::{AgentAction, OrgPlan, Want, Wanted, plan, wanted};
use crate::orgs::prompt::{Contact, Relation, StandingFacts, standing_text};
use crate::render::log;
use crate::render::{Author, outcome_event, render_audit_log_file, render_outcome_file};
use crate::service::{Caller, Op, Service, authenticate};
use crate::tree::handlers::{create_handler, retire_subtree};
use crate::tree::inbox::ensure_process_inbox;
use crate::tree::outcomes::insert_outcome;

impl Service {
    /// The user: stand `model` up, or apply its changes (see the module
    /// doc). With `plan_only`, say what would change and write nothing.
    pub fn org_apply(
        &self,
        who: Principal,
        model: &AgencyModel,
        plan_only: bool,
    ) -> Result<OrgPlan> {
        let doing = format!("stand up organisation {}", model.name);
        if !who.is_user() {
            return Err(ServiceError::denied(format!(
                "failed to {doing}: only the user applies organisations"
            )));
        }
        let w = wanted(model, self.declared().as_deref())?;
        let json = serde_json::to_string(model)
            .map_err(|e| ServiceError::invalid(format!("failed to {doing}: {e}")))?;
        let hash = blake3::hash(json.as_bytes()).to_hex().to_string();
        for t in model.all_tools() {
            crate::orgs::tools::check_tool(t)?;
        }
        if plan_only {
            return self.read(|tx| {
                require_user(authenticate(tx, who)?, &doing)?;
                // What the apply refuses, the plan refuses too.
                for t in model.all_tools() {
                    crate::orgs::tools::check_tool_owner(tx, &model.name, &t.name)?;
                }
                plan(tx, &w, true)
            });
        }
        self.write(|op| {
            require_user(authenticate(op.tx, who)?, &doing)?;
            let mut p = plan(op.tx, &w, false)?;
            // The tools' definitions (a changed base URL, say) are not part
            // of any agent's definition: replacing them says whether they
            // changed, and writes nothing when they did not.
            let tools: Vec<agency_org::Tool> = model.all_tools().into_iter().cloned().collect();
            if crate::orgs::tools::org_tools_replace(op, &model.name, &tools)? {
                p.changed = true;
            }
            if !p.changed {
                return Ok(p);
            }
            apply(op, &w, &mut p, &self.cfg.limits)?;
            let executive = p.executive.ok_or_else(|| {
                ServiceError::invalid(format!("failed to {doing}: its executive was not stood up"))
            })?;
            op.tx.put_org(&OrgRow {
                name: model.name.clone(),
                model_json: json,
                model_hash: hash.clone(),
                executive,
                applied_at: op.now,
                retired_at: None,
            })?;
            op.record(
                crate::event_log::Record::new(
                    agency_api::EventKind::OrgApplied,
                    Some(executive),
                    format!(
                        "organisation {} applied: {} agent change(s), {} capability change(s)",
                        model.name,
                        p.agents.len(),
                        p.capabilities.len()
                    ),
                )
                .data(serde_json::json!({
                    "org": model.name,
                    "hash": hash,
                    "agents": p.agents.len(),
                    "capabilities": p.capabilities.len(),
                })),
            );
            Ok(p)
        })
    }
}

pub(crate) fn require_user(c: Caller, doing: &str) -> Result<()> {
    match c {
        Caller::User => Ok(()),
        Caller::Handler { .. } => Err(ServiceError::denied(format!(
            "failed to {doing}: only the user does that"
        ))),
    }
}

fn apply(
    op: &mut Op<'_>,
    w: &Wanted<'_>,
    p: &mut OrgPlan,
    limits: &agency_core::Limits,
) -> Result<()> {
    let org = w.model.name.as_str();
    let root = op.tx.root_handler()?.ok_or_else(|| {
        ServiceError::invalid(format!(
            "failed to stand up organisation {org}: there is no root handler yet; start the daemon once"
        ))
    })?;
    let a = Author::default();
    let old: BTreeMap<String, OrgAgentRow> = op
        .tx
        .org_agents(org)?
        .into_iter()
        .map(|r| (r.agent.clone(), r))
        .collect();
    // Every wanted agent's handler, parents first (tree order).
    let mut handlers: BTreeMap<String, HandlerId> = BTreeMap::new();
    for wa in &w.agents {
        let name = wa.agent.name.as_str();
        let (boss, parent_root) = match wa.boss {
            Some(b) => {
                let bh = handlers[b];
                (bh, bh.root())
            }
            None => (root.id, root.id.root()),
        };
        let title = clip(
            &format!("{}: {} ({})", wa.agency.name, name, wa.agent.title),
            limits.max_title_chars,
        );
        let description = clip(
            if wa.agent.description.trim().is_empty() {
                &wa.agency.description
            } else {
                &wa.agent.description
            },
            limits.max_description_chars,
        );
        let change = p
            .agents
            .iter()
            .find(|c| c.agent == name)
            .map(|c| (c.action, c.fields.join(", ")));
        let (action, fields) = change.unwrap_or((AgentAction::Create, String::new()));
        let h = match old.get(name) {
            None => stand_up(op, org, parent_root, boss, &title, &description)?,
            Some(r) => {
                let h = r.handler;
                let mut row = op
                    .tx
                    .handler(h)?
                    .ok_or_else(|| ServiceError::not_found("handler", h))?;
                if row.boss != Some(boss) {
                    crate::budgets::carve::move_subtree(op, h, row.boss, boss)?;
                    reparent_root(op, h, parent_root)?;
                }
                let reactivated = row.status != HandlerStatus::Active;
                if reactivated || row.boss != Some(boss) {
                    row.boss = Some(boss);
                    row.status = HandlerStatus::Active;
                    row.updated_at = op.now;
                    op.tx.update_handler(&row)?;
                }
                // A root the user's force-stop handed to the boss comes back.
                if let Some(o) = op.tx.outcome(h.root())?
                    && o.responsible != h
                {
                    op.tx.reassign_subtree(h.root(), o.responsible, h, op.now)?;
                }
                retitle(op, h, &title, &description)?;
                match action {
                    AgentAction::Unchanged => {}
                    AgentAction::Reactivate => {
                        log(
                            op,
                            h,
                            None,
                            format!("reactivated by agency up (organisation {org})"),
                        )?;
                        render_audit_log_file(op, h, a)?;
                        op.emit(Event::HandlerCreated {
                            handler: h,
                            boss: Some(boss),
                        });
                        if op.tx.inbox_count(MailTarget::Handler(h))? > 0 {
                            ensure_process_inbox(op, h)?;
                        }
                    }
                    _ => {
                        log(
                            op,
                            h,
                            None,
                            format!(
                                "definition updated by agency up (organisation {org}): {fields}"
                            ),
                        )?;
                        render_audit_log_file(op, h, a)?;
                    }
                }
                h
            }
        };
        handlers.insert(name.to_owned(), h);
        if action != AgentAction::Unchanged {
            let changed = |f: &str| {
                matches!(action, AgentAction::Create)
                    || p.agents
                        .iter()
                        .any(|c| c.agent == name && c.fields.iter().any(|x| x == f))
            };
            if changed("model") || matches!(action, AgentAction::Create) {
                let cur = op.tx.handler_model(h)?;
                if cur.as_deref() != wa.agent.model.as_deref() {
                    op.tx
                        .set_handler_model(h, wa.agent.model.as_deref(), op.now)?;
                }
            }
            if changed("budget") {
                set_budget(op, h, wa.budget)?;
            }
        }
        op.tx.put_org_agent(&OrgAgentRow {
            org: org.to_owned(),
            agent: name.to_owned(),
            agency: wa.agency.name.clone(),
            handler: h,
            def_hash: wa.def_hash.clone(),
            runtime: wa.agent.runtime.clone(),
            status: OrgAgentStatus::Active,
            updated_at: if action == AgentAction::Unchanged {
                old.get(name).map_or(op.now, |r| r.updated_at)
            } else {
                op.now
            },
        })?;
    }
    // Retire the agents the model no longer has: after the moves above,
    // so no wanted agent is below one of them.
    for (name, r) in &old {
        if r.status == OrgAgentStatus::Active && !handlers.contains_key(name) {
            retire_standing(
                op,
                r.handler,
                &format!("retired: removed from organisation {org} by agency up"),
            )?;
            op.tx.put_org_agent(&OrgAgentRow {
                status: OrgAgentStatus::Retired,
                updated_at: op.now,
                ..r.clone()
            })?;
        }
    }
    // Standing instructions, now that every handler is known.
    for wa in &w.agents {
        let h = handlers[wa.agent.name.as_str()];
        let text = standing_for(w, wa, &handlers, root.id);
        limits.check_content("the standing instructions", text.len())?;
        if op.tx.handler_standing(h)?.as_deref() != Some(text.as_str()) {
            op.tx.set_handler_standing(h, Some(&text), op.now)?;
        }
        // Issue 13 item 6: the agent's `memory.keepWarm` (removed with it).
        crate::warm::org_keep_warm_sync(op, h, wa.agent.memory.keep_warm.as_deref())?;
    }
    grants(op, w, &handlers, root.id)?;
    for c in &mut p.agents {
        if let Some(h) = handlers.get(&c.agent) {
            c.handler = Some(*h);
        }
    }
    p.executive = handlers.get(&w.model.executive_agent).copied();
    Ok(())
}

/// A new standing handler: its perpetual root outcome under `parent_root`,
/// then the handler with its state document and audit log.
fn stand_up(
    op: &mut Op<'_>,
    org: &str,
    parent_root: OutcomeId,
    boss: HandlerId,
    title: &str,
    description: &str,
) -> Result<HandlerId> {
    let id = OutcomeId::new_random();
    let h = HandlerId::from_root(id);
    let row = OutcomeRow {
        id,
        title: title.to_owned(),
        description: description.to_owned(),
        status: OutcomeStatus::Open,
        status_reason: None,
        priority: 0,
        perpetual: true,
        process_inbox: false,
        responsible: h,
        created_at: op.now,
        updated_at: op.now,
    };
    let a = Author::default();
    insert_outcome(
        op,
        &row,
        &[parent_root],
        a,
        "created",
        format!("stood up by agency up (organisation {org})"),
    )?;
    create_handler(op, h, Some(boss), a)?;
    log(
        op,
        h,
        None,
        format!("stood up by agency up as an agent of organisation {org}"),
    )?;
    render_audit_log_file(op, h, a)?;
    op.emit(Event::HandlerCreated {
        handler: h,
        boss: Some(boss),
    });
    Ok(h)
}

/// Move a standing handler's root outcome under its new boss's root.
fn reparent_root(op: &mut Op<'_>, h: HandlerId, parent_root: OutcomeId) -> Result<()> {
    let a = Author::default();
    let old = op.tx.parents(h.root())?;
    for p in &old {
        op.tx.delete_edge(*p, h.root())?;
    }
    op.tx.insert_edge(parent_root, h.root())?;
    outcome_event(
        op,
        h.root(),
        a,
        "moved",
        format!("under outcome {parent_root} by agency up"),
    )?;
    render_outcome_file(op, h.root(), a)?;
    for p in old.iter().chain([&parent_root]) {
        render_outcome_file(op, *p, a)?;
    }
    Ok(())
}

/// Keep a standing root outcome's title and description in step with the
/// sources (a new version of its file only when they changed).
fn retitle(op: &mut Op<'_>, h: HandlerId, title: &str, description: &str) -> Result<()> {
    let Some(mut o) = op.tx.outcome(h.root())? else {
        return Err(ServiceError::not_found("outcome", h.root()));
    };
    if o.title == title && o.description == description {
        return Ok(());
    }
    o.title = title.to_owned();
    o.description = description.to_owned();
    o.updated_at = op.now;
    op.tx.update_outcome(&o)?;
    let a = Author::default();
    outcome_event(
        op,
        o.id,
        a,
        "updated",
        "title and description from the organisation's sources".to_owned(),
    )?;
    render_outcome_file(op, o.id, a)
}

fn set_budget(
    op: &mut Op<'_>,
    h: HandlerId,
    limits: Option<agency_store::BudgetLimits>,
) -> Result<()> {
    let old = op.tx.budget_of(h)?;
    match limits {
        Some(l) if !l.is_empty() => {
            if old.as_ref().is_some_and(|b| b.limits == l) {
                return Ok(());
            }
            op.tx.set_budget(&BudgetRow {
                handler: h,
                limits: l,
                set_at: old.as_ref().map_or(op.now, |b| b.set_at),
                carved_by: None,
                paused: None,
                warned: 0,
            })?;
            if old.is_some_and(|b| b.paused.is_some()) {
                op.emit(Event::BudgetResumed { handler: h });
            }
        }
        _ => {
            if old.is_some() {
                op.tx.delete_budget(h)?;
            }
        }
    }
    Ok(())
}

/// Retire a standing handler and what is below it (state kept,
/// capabilities revoked). The outcomes of ordinary handlers it delegated
/// to go back to the nearest standing handler above them, so that the
/// organisation's agents find their work again when they come back.
pub(crate) fn retire_standing(
    op: &mut Op<'_>,
    h: HandlerId,
    why: &str,
) -> Result<crate::tree::handlers::Retired> {
    let active = op
        .tx
        .handler(h)?
        .is_some_and(|r| r.status == HandlerStatus::Active);
    if !active {
        return Ok(crate::tree::handlers::Retired {
            handlers: Vec::new(),
            agents: Vec::new(),
            revoked: Vec::new(),
        });
    }
    let retired = retire_subtree(op, h, why, Author::default())?;
    for x in &retired.handlers {
        if op.tx.org_agent_by_handler(*x)?.is_some() {
            continue;
        }
        let mut at = op.tx.handler(*x)?.and_then(|r| r.boss);
        for _ in 0..64 {
            let Some(b) = at else { break };
            if op.tx.org_agent_by_handler(b)?.is_some() {
                op.tx.reassign_all(&[*x], b, op.now)?;
                break;
            }
            at = op.tx.handler(b)?.and_then(|r| r.boss);
        }
    }
    for c in &retired.revoked {
        op.emit(Event::CapabilityRevoked {
            capability: c.id,
            holder: c.holder,
            resource: c.resource.clone(),
        });
    }
    Ok(retired)
}

fn standing_for(
    w: &Wanted<'_>,
    wa: &crate::orgs::plan::WantedAgent<'_>,
    handlers: &BTreeMap<String, HandlerId>,
    root: HandlerId,
) -> String {
    let m = w.model;
    let name = wa.agent.name.as_str();
    let contact = |n: &str, relation| Contact {
        name: w.agent(n).map_or("", |x| x.agent.name.as_str()),
        title: crate::orgs::plan::title_of(m, n),
        handler: handlers[n],
        relation,
    };
    let mut contacts = Vec::new();
    if let Some(b) = wa.boss {
        contacts.push(contact(b, Relation::Boss));
    }
    for o in &w.agents {
        if o.boss == Some(name) {
            contacts.push(contact(&o.agent.name, Relation::Underling));
        }
    }
    let mut conns = BTreeSet::new();
    for o in &w.agents {
        if o.agent.name == name {
            conns.extend(o.agent.connections.iter().map(String::as_str));
        } else if o.agent.connections.iter().any(|c| c == name) {
            conns.insert(o.agent.name.as_str());
        }
    }
    for c in conns {
        contacts.push(contact(c, Relation::Connection));
    }
    let tools = wa
        .agent
        .tools
        .iter()
        .map(|t| {
            let d = m
                .all_tools()
                .into_iter()
                .find(|x| &x.name == t)
                .map_or("", |x| x.description.as_str());
            (t.as_str(), d)
        })
        .collect();
    standing_text(&StandingFacts {
        org: &m.name,
        agency: wa.agency,
        parent_agency: wa.parent_agency,
        agent: wa.agent,
        executive: wa.executive,
        handler: handlers[name],
        root_handler: wa.boss.is_none().then_some(root),
        contacts,
        tools,
    })
}

/// Bring the organisation's capabilities in line with the model: revoke
/// those it no longer wants (and everything derived from them), grant
/// those missing (or revoked since, e.g. by a retirement).
fn grants(
    op: &mut Op<'_>,
    w: &Wanted<'_>,
    handlers: &BTreeMap<String, HandlerId>,
    root: HandlerId,
) -> Result<()> {
    let org = w.model.name.as_str();
    let holder_of = |n: &str| {
        if n.is_empty() {
            Some(root)
        } else {
            handlers.get(n).copied()
        }
    };
    for g in op.tx.org_grants(org)? {
        let live = op
            .tx
            .capability(g.capability)?
            .is_some_and(|c| c.revoked_at.is_none());
        let keep = w
            .caps
            .get(&(g.holder.clone(), g.key.clone()))
            .is_some_and(|c| c.level == g.level);
        if keep && live {
            continue;
        }
        if live {
            let revoked = op
                .tx
                .revoke(&RevokeSelector::Ids(vec![g.capability]), op.now)?;
            for c in revoked {
                op.emit(Event::CapabilityRevoked {
                    capability: c.id,
                    holder: c.holder,
                    resource: c.resource,
                });
            }
        }
        op.tx.delete_org_grant(org, &g.holder, &g.key)?;
    }
    let held: BTreeSet<(String, String)> = op
        .tx
        .org_grants(org)?
        .into_iter()
        .map(|g| (g.holder, g.key))
        .collect();
    for ((holder, key), c) in &w.caps {
        if held.contains(&(holder.clone(), key.clone())) {
            continue;
        }
        let Some(h) = holder_of(holder) else { continue };
        let (resource, origin, delegatable) = match &c.want {
            Want::Resource(r) => (r.clone(), CapOrigin::User, true),
            Want::MailAgent(n) => (
                Resource::Mail(MailTarget::Handler(handlers[n.as_str()])),
                CapOrigin::System,
                false,
            ),
            Want::MailRoot => (
                Resource::Mail(MailTarget::Handler(root)),
                CapOrigin::System,
                false,
            ),
        };
        let cap = NewCapability {
            holder: h,
            resource,
            level: c.level,
            delegatable,
            scope: Some(h.root()),
            derived_from: None,
            granted_by: None,
            origin,
            created_at: op.now,
        };
        let id = op.tx.insert_capability(&cap)?;
        op.emit(Event::CapabilityGranted {
            capability: id,
            holder: h,
            resource: cap.resource,
        });
        op.tx.put_org_grant(&OrgGrantRow {
            org: org.to_owned(),
            holder: holder.clone(),
            key: key.clone(),
            level: c.level,
            capability: id,
        })?;
    }
    Ok(())
}

fn clip(s: &str, max: usize) -> String {
    let one: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    one.trim().chars().take(max).collect()
}
