//! Applied organisations: listing them with their
//! agents' handlers (`agency orgs`), retiring one (`agency down`), and
//! what the daemon reads — an organisation's executive handler (where the
//! REST API delivers its messages) and a handler's standing instructions
//! (the last section of its agents' system prompt). Standing one up is
//! `orgs/apply.rs`.

pub(crate) mod apply;
pub(crate) mod keys;
pub(crate) mod messages;
pub(crate) mod plan;
pub(crate) mod prompt;
pub(crate) mod tools;
pub(crate) mod warnings;

use agency_core::{HandlerId, Principal};
use agency_store::{OrgAgentStatus, OrgRow};

use crate::Result;
use crate::budgets::paused_over;
use crate::error::ServiceError;
use crate::orgs::apply::{require_user, retire_standing};
use crate::service::{Service, System, authenticate};
pub use agency_api::{OrgAgentView, OrgDown, OrgView};

impl Service {
    /// The user: every applied organisation (up or down) with its agents.
    pub fn orgs(&self, who: Principal) -> Result<Vec<OrgView>> {
        self.read(|tx| {
            require_user(authenticate(tx, who)?, "list the organisations")?;
            let mut out = Vec::new();
            for o in tx.orgs()? {
                let model: Option<agency_org::AgencyModel> =
                    serde_json::from_str(&o.model_json).ok();
                let mut agents = Vec::new();
                for a in tx.org_agents(&o.name)? {
                    let found = model
                        .as_ref()
                        .and_then(|m| m.all_agents().into_iter().find(|(_, g)| g.name == a.agent));
                    agents.push(OrgAgentView {
                        title: found.map(|(_, g)| g.title.clone()).unwrap_or_default(),
                        executive: found.is_some_and(|(ag, g)| ag.executive_agent == g.name),
                        handler_status: tx.handler(a.handler)?.map(|h| h.status),
                        paused: paused_over(tx, a.handler)?,
                        agent: a.agent,
                        agency: a.agency,
                        handler: a.handler,
                        status: a.status,
                        runtime: a.runtime,
                    });
                }
                let OrgRow {
                    name,
                    executive,
                    model_hash,
                    applied_at,
                    retired_at,
                    ..
                } = o;
                let paused = paused_over(tx, executive)?;
                out.push(OrgView {
                    name,
                    executive,
                    model_hash,
                    applied_at,
                    retired_at,
                    paused,
                    agents,
                });
            }
            Ok(out)
        })
    }

    /// The user: retire organisation `name`: every agent's handler and
    /// what they delegated to (state kept, capabilities revoked, live
    /// agents ended). `agency up` brings it back with the same handlers.
    pub fn org_down(&self, who: Principal, name: &str) -> Result<OrgDown> {
        agency_core::validate::check_name("organisation", name)?;
        let doing = format!("take organisation {name} down");
        self.write(|op| {
            require_user(authenticate(op.tx, who)?, &doing)?;
            let Some(mut org) = op.tx.org(name)? else {
                return Err(ServiceError::not_found("organisation", name));
            };
            if org.retired_at.is_some() {
                return Err(ServiceError::invalid(format!(
                    "failed to {doing}: it is already down; agency up brings it back"
                )));
            }
            let why = format!("retired: organisation {name} taken down by the user (agency down)");
            let mut report = OrgDown {
                org: name.to_owned(),
                handlers: Vec::new(),
                agents_to_kill: Vec::new(),
            };
            // The top executive's subtree holds every agent; an agent a
            // hand force-stop left elsewhere is retired on its own.
            let agents = op.tx.org_agents(name)?;
            let tops = std::iter::once(org.executive).chain(agents.iter().map(|a| a.handler));
            for h in tops.collect::<Vec<_>>() {
                let r = retire_standing(op, h, &why)?;
                report.handlers.extend(r.handlers);
                report.agents_to_kill.extend(r.agents);
            }
            for a in agents {
                if a.status == OrgAgentStatus::Active {
                    op.tx.put_org_agent(&agency_store::OrgAgentRow {
                        status: OrgAgentStatus::Retired,
                        updated_at: op.now,
                        ..a
                    })?;
                }
            }
            tools::org_tools_release(op, name)?;
            org.retired_at = Some(op.now);
            op.tx.put_org(&org)?;
            op.record(
                crate::event_log::Record::new(
                    agency_api::EventKind::OrgDown,
                    Some(org.executive),
                    format!(
                        "organisation {name} taken down: {} handler(s) retired",
                        report.handlers.len()
                    ),
                )
                .data(serde_json::json!({ "org": name, "handlers": report.handlers.len() })),
            );
            Ok(report)
        })
    }
}

impl System {
    /// Daemon (the REST messages route): the executive handler of the
    /// organisation `name`, if it is up.
    pub fn org_executive(&self, name: &str) -> Result<Option<HandlerId>> {
        self.read(|tx| {
            Ok(tx
                .org(name)?
                .filter(|o| o.retired_at.is_none())
                .map(|o| o.executive))
        })
    }

    /// Daemon (the supervisor, at spawn): the standing instructions of a
    /// handler's agents, if it is an organisation's agent.
    pub fn handler_standing(&self, handler: HandlerId) -> Result<Option<String>> {
        self.read(|tx| Ok(tx.handler_standing(handler)?))
    }
}
