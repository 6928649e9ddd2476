//! What an Agency Model asks for, checked before
//! anything is written, and the plan of `agency up`: per agent create,
//! update (which fields), unchanged, reactivate or retire; per capability
//! added or removed. Computed from the store inside the transaction that
//! applies it (`orgs/apply.rs`), or a read transaction for `--plan`.
//!
//! Capabilities are keyed with agents by name (`mail:@Name`, `mail:@root`)
//! so a plan can name the handlers a first apply has not created yet.

use std::collections::{BTreeMap, BTreeSet};

use agency_core::{Level, Resource};
use agency_org::{AgencyModel, Agent};
use agency_store::{BudgetLimits, OrgAgentStatus, Tx};
use serde_json::{Value, json};

use crate::Result;
use crate::duration::duration_ms;
use crate::error::ServiceError;
use crate::service::settings::Declared;
pub use agency_api::{AgentAction, AgentChange, CapAction, CapChange, OrgPlan};

/// Most agents one organisation may stand up.
pub(crate) const MAX_AGENTS: usize = 1000;
/// The runtimes the daemon knows.
const RUNTIMES: [&str; 3] = ["builtin", "claude-code", "command"];

/// A capability the model wants, by holder and key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Want {
    Resource(Resource),
    MailAgent(String),
    MailRoot,
}

#[derive(Debug, Clone)]
pub(crate) struct WantedCap {
    pub want: Want,
    pub level: Level,
    pub why: &'static str,
}

impl Want {
    pub(crate) fn key(&self) -> String {
        match self {
            Want::Resource(r) => r.to_string(),
            Want::MailAgent(n) => format!("mail:@{n}"),
            Want::MailRoot => "mail:@root".to_owned(),
        }
    }
}

/// One agent as the model wants it.
#[derive(Debug, Clone)]
pub(crate) struct WantedAgent<'m> {
    pub agency: &'m AgencyModel,
    pub parent_agency: Option<&'m str>,
    pub agent: &'m Agent,
    pub executive: bool,
    /// `None`: the root handler.
    pub boss: Option<&'m str>,
    pub budget: Option<BudgetLimits>,
    /// The effective definition, field by field; its hash decides
    /// unchanged.
    pub def: Value,
    pub def_hash: String,
}

/// Everything the model wants: agents in tree order (every boss before
/// its reports), capabilities by (holder, key), warnings.
#[derive(Debug, Clone)]
pub(crate) struct Wanted<'m> {
    pub model: &'m AgencyModel,
    pub agents: Vec<WantedAgent<'m>>,
    pub caps: BTreeMap<(String, String), WantedCap>,
    pub warnings: Vec<String>,
}

impl<'m> Wanted<'m> {
    pub(crate) fn agent(&self, name: &str) -> Option<&WantedAgent<'m>> {
        self.agents.iter().find(|a| a.agent.name == name)
    }
}

fn bad(org: &str, msg: impl std::fmt::Display) -> ServiceError {
    ServiceError::invalid(format!(
        "failed to stand up organisation {org}: {msg}; fix the sources and apply again (nothing was changed)"
    ))
}

/// Check the model and work out what it wants. `declared` is what the
/// daemon declared (`None` in tests and tools: names are not checked
/// against agency.toml).
pub(crate) fn wanted<'m>(m: &'m AgencyModel, declared: Option<&Declared>) -> Result<Wanted<'m>> {
    let org = m.name.as_str();
    agency_core::validate::check_name("organisation", org).map_err(|e| bad(org, e.0))?;
    let all = m.all_agents();
    if all.is_empty() {
        return Err(bad(org, "it has no agents"));
    }
    if all.len() > MAX_AGENTS {
        return Err(bad(
            org,
            format!("it has {} agents, more than {MAX_AGENTS}", all.len()),
        ));
    }
    let mut names = BTreeSet::new();
    for (_, a) in &all {
        agency_core::validate::check_name("agent", &a.name).map_err(|e| bad(org, e.0))?;
        if !names.insert(a.name.as_str()) {
            return Err(bad(org, format!("agent name {} is used twice", a.name)));
        }
    }
    let mut agency_names = BTreeSet::new();
    for ag in m.agencies() {
        agency_core::validate::check_name("agency", &ag.name).map_err(|e| bad(org, e.0))?;
        if !agency_names.insert(ag.name.as_str()) {
            return Err(bad(org, format!("agency name {} is used twice", ag.name)));
        }
        if ag.executive().is_none() {
            return Err(bad(
                org,
                format!(
                    "agency {}'s executive agent {} is not one of its agents",
                    ag.name, ag.executive_agent
                ),
            ));
        }
    }
    let mut tools = BTreeMap::new();
    for t in m.all_tools() {
        agency_core::validate::check_name("tool", &t.name).map_err(|e| bad(org, e.0))?;
        if tools.insert(t.name.as_str(), t).is_some() {
            return Err(bad(org, format!("tool name {} is used twice", t.name)));
        }
        if let Some(d) = declared {
            crate::orgs::tools::check_secrets_declared(t, &d.secrets).map_err(|e| bad(org, e))?;
        }
    }
    // Who reports to whom: an agency's agents to its executive, a
    // sub-agency's executive to its parent's, the top executive to the
    // root handler.
    let mut boss: BTreeMap<&str, Option<&str>> = BTreeMap::new();
    let mut order: Vec<(&AgencyModel, Option<&str>, &Agent)> = Vec::new();
    fn walk<'a>(
        ag: &'a AgencyModel,
        parent: Option<&'a AgencyModel>,
        boss: &mut BTreeMap<&'a str, Option<&'a str>>,
        order: &mut Vec<(&'a AgencyModel, Option<&'a str>, &'a Agent)>,
    ) {
        let exec = ag.executive_agent.as_str();
        let Some(e) = ag.executive() else { return };
        boss.insert(exec, parent.map(|p| p.executive_agent.as_str()));
        order.push((ag, parent.map(|p| p.name.as_str()), e));
        for a in &ag.agents {
            if a.name != exec {
                boss.insert(a.name.as_str(), Some(exec));
                order.push((ag, parent.map(|p| p.name.as_str()), a));
            }
        }
        for s in &ag.sub_agencies {
            walk(s, Some(ag), boss, order);
        }
    }
    walk(m, None, &mut boss, &mut order);

    let mut caps = BTreeMap::new();
    let mut warnings = Vec::new();
    let mut put = |holder: &str, want: Want, level: Level, why: &'static str| {
        let key = want.key();
        let e = caps
            .entry((holder.to_owned(), key))
            .or_insert(WantedCap { want, level, why });
        if level > e.level {
            e.level = level;
        }
    };
    for (_, _, a) in &order {
        match boss[a.name.as_str()] {
            Some(b) => {
                put(
                    &a.name,
                    Want::MailAgent(b.to_owned()),
                    Level::Write,
                    "reporting line",
                );
                put(
                    b,
                    Want::MailAgent(a.name.clone()),
                    Level::Write,
                    "reporting line",
                );
            }
            None => {
                put(&a.name, Want::MailRoot, Level::Write, "reporting line");
                put(
                    "",
                    Want::MailAgent(a.name.clone()),
                    Level::Write,
                    "reporting line",
                );
            }
        }
        for t in &a.tools {
            let Some(tool) = tools.get(t.as_str()) else {
                return Err(bad(
                    org,
                    format!(
                        "agent {} names tool {t}, which the organisation does not define",
                        a.name
                    ),
                ));
            };
            put(
                &a.name,
                Want::Resource(Resource::Tool(t.clone())),
                Level::Read,
                "tool",
            );
            // The egress the tool's file declares: its calls go through
            // the calling agent's egress.
            for e in &tool.egress {
                let r = Resource::from_parts("egress", e)
                    .map_err(|err| bad(org, format!("tool {t}'s egress {e:?}: {}", err.0)))?;
                put(&a.name, Want::Resource(r), Level::Read, "tool egress");
            }
        }
        for c in &a.connections {
            if !names.contains(c.as_str()) {
                return Err(bad(
                    org,
                    format!(
                        "agent {} is connected to {c}, which is not an agent of the organisation",
                        a.name
                    ),
                ));
            }
            if c == &a.name {
                return Err(bad(org, format!("agent {} is connected to itself", a.name)));
            }
            put(
                &a.name,
                Want::MailAgent(c.clone()),
                Level::Write,
                "connection",
            );
            put(
                c,
                Want::MailAgent(a.name.clone()),
                Level::Write,
                "connection",
            );
        }
        for c in &a.capabilities {
            let (r, level) = parse_capability(c)
                .map_err(|e| bad(org, format!("agent {}'s capability {c:?}: {e}", a.name)))?;
            if let Some(d) = declared {
                check_declared(d, &r)
                    .map_err(|e| bad(org, format!("agent {}'s capability {c}: {e}", a.name)))?;
            }
            put(&a.name, Want::Resource(r), level, "capability");
        }
        if let Some(model) = &a.model {
            agency_core::validate::check_name("model upstream", model)
                .map_err(|e| bad(org, e.0))?;
            if let Some(d) = declared
                && !d.models.contains(model)
            {
                return Err(bad(
                    org,
                    format!(
                        "agent {} asks for model {model}, which is no [models.NAME] the daemon's runtime can use (usable: {})",
                        a.name,
                        d.models.iter().cloned().collect::<Vec<_>>().join(", ")
                    ),
                ));
            }
        }
        if let Some(rt) = &a.runtime {
            if !RUNTIMES.contains(&rt.as_str()) {
                return Err(bad(
                    org,
                    format!(
                        "agent {} asks for runtime {rt:?}; expected builtin, claude-code or command",
                        a.name
                    ),
                ));
            }
            // The supervisor runs the one configured runtime.
            if let Some(d) = declared
                && let Some(configured) = &d.runtime
                && configured != rt
            {
                return Err(bad(
                    org,
                    format!(
                        "agent {} asks for runtime {rt}, but the daemon runs {configured} (agents.runtime) and cannot run another per agent; remove the agent's runtime or set agents.runtime = \"{rt}\"",
                        a.name
                    ),
                ));
            }
        }
    }

    let mut agents = Vec::with_capacity(order.len());
    for (ag, parent, a) in &order {
        let executive = ag.executive_agent == a.name;
        let own = a
            .budget
            .as_ref()
            .map(|b| limits(org, &a.name, b))
            .transpose()?;
        let agency_budget = if executive {
            ag.budget
                .as_ref()
                .map(|b| limits(org, &ag.name, b))
                .transpose()?
        } else {
            None
        };
        if executive && own.is_some() && agency_budget.is_some() {
            warnings.push(format!(
                "agent {} and its agency {} both give a budget; the agency's is set on the executive's handler (it bounds the agency's whole subtree) and the agent's is ignored",
                a.name, ag.name
            ));
        }
        let budget = agency_budget.or(own);
        warnings.extend(crate::orgs::warnings::unreachable_http_tools(m, a));
        let b = boss[a.name.as_str()];
        let mut contacts = Vec::new();
        if let Some(b) = b {
            contacts.push(json!({"name": b, "relation": "boss", "title": title_of(m, b)}));
        }
        for (other, ob) in &boss {
            if *ob == Some(a.name.as_str()) {
                contacts.push(
                    json!({"name": other, "relation": "underling", "title": title_of(m, other)}),
                );
            }
        }
        for c in connections_of(&order, &a.name) {
            contacts.push(json!({"name": c, "relation": "connection", "title": title_of(m, c)}));
        }
        let agent_tools: Vec<Value> = a
            .tools
            .iter()
            .map(
                |t| json!({"name": t, "description": tools.get(t.as_str()).map_or("", |t| t.description.as_str())}),
            )
            .collect();
        let def = json!({
            "agency": ag.name,
            "agencyPurpose": ag.description,
            "agencyStaticMemory": ag.static_memory,
            "parentAgency": parent,
            "executive": executive,
            "boss": b,
            "title": a.title,
            "description": a.description,
            "staticMemory": a.static_memory,
            "behavior": a.behavior.on_message,
            "memory": serde_json::to_value(&a.memory).unwrap_or(Value::Null),
            "tools": agent_tools,
            "capabilities": a.capabilities,
            "connections": a.connections,
            "contacts": contacts,
            "model": a.model,
            "runtime": a.runtime,
            "budget": serde_json::to_value(budget).unwrap_or(Value::Null),
        });
        let def_hash = blake3::hash(def.to_string().as_bytes())
            .to_hex()
            .to_string();
        agents.push(WantedAgent {
            agency: ag,
            parent_agency: *parent,
            agent: a,
            executive,
            boss: b,
            budget,
            def,
            def_hash,
        });
    }
    Ok(Wanted {
        model: m,
        agents,
        caps,
        warnings,
    })
}

/// Agents connected to `name` either way, sorted.
fn connections_of<'a>(
    order: &[(&'a AgencyModel, Option<&'a str>, &'a Agent)],
    name: &str,
) -> Vec<&'a str> {
    let mut out = BTreeSet::new();
    for (_, _, a) in order {
        if a.name == name {
            out.extend(a.connections.iter().map(String::as_str));
        } else if a.connections.iter().any(|c| c == name) {
            out.insert(a.name.as_str());
        }
    }
    out.into_iter().collect()
}

pub(crate) fn title_of<'a>(m: &'a AgencyModel, name: &str) -> &'a str {
    m.all_agents()
        .into_iter()
        .find(|(_, a)| a.name == name)
        .map_or("", |(_, a)| a.title.as_str())
}

/// `kind:key[=read|=write]` of `egress`, `mcp_server` or `repo`.
pub(crate) fn parse_capability(s: &str) -> std::result::Result<(Resource, Level), String> {
    let (res, level) = match s.rsplit_once('=') {
        Some((r, "read")) => (r, Level::Read),
        Some((r, "write")) => (r, Level::Write),
        Some((_, other)) => return Err(format!("unknown level {other:?}; use =read or =write")),
        None => (s, Level::Read),
    };
    let Some((kind, key)) = res.split_once(':') else {
        return Err(
            "expected kind:name, e.g. egress:api.example.com, mcp_server:github or repo:site"
                .to_owned(),
        );
    };
    if !matches!(kind, "egress" | "mcp_server" | "repo") {
        return Err(format!(
            "kind {kind:?} cannot be granted by an organisation; use egress, mcp_server or repo (tools are granted through the agent's tools)"
        ));
    }
    let r = Resource::from_parts(kind, key).map_err(|e| e.0)?;
    Ok((r, level))
}

fn check_declared(d: &Declared, r: &Resource) -> std::result::Result<(), String> {
    let (names, section) = match r {
        Resource::McpServer(n) => (&d.mcp_servers, format!("mcp_servers.{n}")),
        Resource::Repo(n) => (&d.repos, format!("repos.{n}")),
        _ => return Ok(()),
    };
    let name = match r {
        Resource::McpServer(n) | Resource::Repo(n) => n,
        _ => return Ok(()),
    };
    if names.contains(name) {
        Ok(())
    } else {
        Err(format!("agency.toml declares no [{section}]"))
    }
}

/// A source budget as the ledger's limits.
fn limits(org: &str, whose: &str, b: &agency_org::Budget) -> Result<BudgetLimits> {
    let n = |what: &str, v: Option<u64>| -> Result<Option<i64>> {
        v.map(|v| {
            i64::try_from(v)
                .map_err(|_| bad(org, format!("{whose}'s {what} budget {v} is too large")))
        })
        .transpose()
    };
    let micro_usd = match b.usd {
        None => None,
        Some(d) if d.is_finite() && (0.0..=9.0e12).contains(&d) => {
            Some((d * 1_000_000.0).round() as i64)
        }
        Some(d) => {
            return Err(bad(
                org,
                format!("{whose}'s usd budget {d} is not an amount of zero or more dollars"),
            ));
        }
    };
    let wall_clock_ms = b
        .wall_clock
        .as_deref()
        .map(|s| duration_ms(s).ok_or_else(|| bad(org, format!("{whose}'s wall-clock budget {s:?} is not a duration such as 90s, 30m, 2h or 1h30m"))))
        .transpose()?;
    Ok(BudgetLimits {
        tokens: n("tokens", b.tokens)?,
        micro_usd,
        calls: n("calls", b.calls)?,
        tool_calls: n("tool-calls", b.tool_calls)?,
        spawns: n("spawns", b.spawns)?,
        live_agents: n("live-agents", b.live_agents)?,
        handlers: n("handlers", b.handlers)?,
        depth: n("depth", b.depth)?,
        wall_clock_ms,
    })
}

/// The plan: the model's wants against what the store holds for the
/// organisation. Handlers are filled in for agents that have one.
pub(crate) fn plan(tx: &mut dyn Tx, w: &Wanted<'_>, plan_only: bool) -> Result<OrgPlan> {
    let org = w.model.name.as_str();
    let row = tx.org(org)?;
    let old_agents: BTreeMap<String, agency_store::OrgAgentRow> = tx
        .org_agents(org)?
        .into_iter()
        .map(|a| (a.agent.clone(), a))
        .collect();
    // The definitions last applied, to say which fields changed.
    let old_model: Option<AgencyModel> = row
        .as_ref()
        .and_then(|r| serde_json::from_str(&r.model_json).ok());
    let old_wanted = old_model.as_ref().and_then(|m| wanted(m, None).ok());
    let mut agents = Vec::new();
    for a in &w.agents {
        let name = &a.agent.name;
        let old = old_agents.get(name);
        let old_def = old_wanted
            .as_ref()
            .and_then(|o| o.agent(name))
            .map(|o| &o.def);
        let (action, fields) = match old {
            None => (AgentAction::Create, Vec::new()),
            Some(r) if r.status == OrgAgentStatus::Retired || !handler_active(tx, r.handler)? => {
                (AgentAction::Reactivate, changed_fields(old_def, &a.def))
            }
            Some(r) if r.def_hash == a.def_hash => (AgentAction::Unchanged, Vec::new()),
            Some(_) => (AgentAction::Update, changed_fields(old_def, &a.def)),
        };
        agents.push(AgentChange {
            agent: name.clone(),
            agency: a.agency.name.clone(),
            title: a.agent.title.clone(),
            action,
            fields,
            handler: old.map(|r| r.handler),
            boss: a.boss.map(str::to_owned),
        });
    }
    for (name, r) in &old_agents {
        if r.status == OrgAgentStatus::Active && w.agent(name).is_none() {
            agents.push(AgentChange {
                agent: name.clone(),
                agency: r.agency.clone(),
                title: old_wanted
                    .as_ref()
                    .and_then(|o| o.agent(name))
                    .map(|o| o.agent.title.clone())
                    .unwrap_or_default(),
                action: AgentAction::Retire,
                fields: Vec::new(),
                handler: Some(r.handler),
                boss: None,
            });
        }
    }
    let mut capabilities = Vec::new();
    let mut old_grants = BTreeMap::new();
    for g in tx.org_grants(org)? {
        let live = tx
            .capability(g.capability)?
            .is_some_and(|c| c.revoked_at.is_none());
        old_grants.insert((g.holder.clone(), g.key.clone()), (g, live));
    }
    for ((holder, key), c) in &w.caps {
        let same = old_grants
            .get(&(holder.clone(), key.clone()))
            .is_some_and(|(g, live)| *live && g.level == c.level);
        if !same {
            capabilities.push(CapChange {
                holder: holder.clone(),
                resource: key.clone(),
                level: c.level,
                change: CapAction::Added,
                why: c.why.to_owned(),
            });
        }
    }
    for ((holder, key), (g, live)) in &old_grants {
        let wanted_same = w
            .caps
            .get(&(holder.clone(), key.clone()))
            .is_some_and(|c| c.level == g.level);
        if *live && !wanted_same {
            capabilities.push(CapChange {
                holder: holder.clone(),
                resource: key.clone(),
                level: g.level,
                change: CapAction::Removed,
                why: String::new(),
            });
        }
    }
    let down = row.as_ref().is_some_and(|r| r.retired_at.is_some());
    let changed = down
        || row.is_none()
        || agents.iter().any(|a| a.action != AgentAction::Unchanged)
        || !capabilities.is_empty();
    let executive = agents
        .iter()
        .find(|a| a.agent == w.model.executive_agent)
        .and_then(|a| a.handler);
    Ok(OrgPlan {
        org: org.to_owned(),
        plan_only,
        changed,
        executive,
        agents,
        capabilities,
        warnings: w.warnings.clone(),
    })
}

fn handler_active(tx: &mut dyn Tx, h: agency_core::HandlerId) -> Result<bool> {
    Ok(tx
        .handler(h)?
        .is_some_and(|r| r.status == agency_store::HandlerStatus::Active))
}

/// The top-level keys whose values differ (all of them without an old
/// definition).
fn changed_fields(old: Option<&Value>, new: &Value) -> Vec<String> {
    let (Some(Value::Object(o)), Value::Object(n)) = (old, new) else {
        return Vec::new();
    };
    n.iter()
        .filter(|(k, v)| o.get(*k) != Some(*v))
        .map(|(k, _)| k.clone())
        .collect()
}
