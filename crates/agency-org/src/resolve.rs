//! Names across the whole tree: duplicates, unresolved references
//! (executive, listed agents, tools, sub-agencies, connections, parents),
//! inheritance cycles and depth, then the model itself.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::diag::{Diags, did_you_mean};
use crate::inherit::{self, Explanation, MAX_DEPTH};
use crate::model::{AgencyKind, AgencyModel, SourceRef, Tool, ToolInterface};
use crate::raw::{RawAgent, RawFolder, RawTool, S};

#[derive(Debug)]
pub struct Index<'a> {
    pub agents: BTreeMap<String, (&'a RawAgent, &'a str)>,
    pub tools: BTreeMap<String, &'a RawTool>,
    pub roles: BTreeMap<String, String>,
}

fn src(file: &str, line: u32) -> String {
    format!("{file}:{line}")
}

pub fn index<'a>(root: &'a RawFolder, diags: &mut Diags) -> Index<'a> {
    let mut ix = Index {
        agents: BTreeMap::new(),
        tools: BTreeMap::new(),
        roles: BTreeMap::new(),
    };
    for f in root.all() {
        for a in &f.agents {
            match ix.agents.get(&a.name.v) {
                Some((first, _)) => diags.error(&a.file, a.name.pos, format!("duplicate agent name `{}`: already defined at {} (agent names are unique across the whole tree)", a.name.v, src(&first.file, first.name.pos.line))),
                None => {
                    ix.agents.insert(a.name.v.clone(), (a, f.dir.as_str()));
                }
            }
        }
        for t in &f.tools {
            match ix.tools.get(&t.name.v) {
                Some(first) => diags.error(&t.file, t.name.pos, format!("duplicate tool name `{}`: already defined at {} (tool names are unique across the whole tree)", t.name.v, src(&first.file, first.name.pos.line))),
                None => {
                    ix.tools.insert(t.name.v.clone(), t);
                }
            }
        }
        for (n, role) in &f.agency.agents {
            if let Some(r) = role {
                ix.roles.entry(n.v.clone()).or_insert_with(|| r.clone());
            }
        }
    }
    ix
}

impl Index<'_> {
    fn agent_ref(&self, diags: &mut Diags, file: &str, r: &S<String>, what: &str) -> bool {
        if self.agents.contains_key(&r.v) {
            return true;
        }
        let hint = did_you_mean(&r.v, self.agents.keys().map(String::as_str));
        diags.error(
            file,
            r.pos,
            format!(
                "{what} `{}` is not an agent of this organisation{hint}",
                r.v
            ),
        );
        false
    }

    fn tool_ref(&self, diags: &mut Diags, file: &str, r: &S<String>) {
        if !self.tools.contains_key(&r.v) {
            let hint = did_you_mean(&r.v, self.tools.keys().map(String::as_str));
            diags.error(
                file,
                r.pos,
                format!(
                    "tool `{}` is not defined (no .tool file or tool script of that name){hint}",
                    r.v
                ),
            );
        }
    }

    /// An agent named in an agency must be defined in that agency's folder.
    fn own_agent(&self, diags: &mut Diags, f: &RawFolder, r: &S<String>, what: &str) {
        let file = &f.agency.file;
        if f.agents.iter().any(|a| a.name.v == r.v) {
            return;
        }
        match self.agents.get(&r.v) {
            Some((a, dir)) if *dir != f.dir => diags.error(
                file,
                r.pos,
                format!(
                    "{what} `{}` is defined in {}, not in this agency's folder",
                    r.v, a.file
                ),
            ),
            Some(_) => {}
            None => {
                let local: Vec<&str> = f.agents.iter().map(|a| a.name.v.as_str()).collect();
                let hint = did_you_mean(&r.v, local);
                diags.error(
                    file,
                    r.pos,
                    format!(
                        "{what} `{}` is not an agent of this agency (no {}.agent here){hint}",
                        r.v, r.v
                    ),
                );
            }
        }
    }
}

/// Every reference check; returns the agents whose ancestry is broken.
pub fn check(root: &RawFolder, ix: &Index, diags: &mut Diags) -> Vec<String> {
    for f in root.all() {
        let g = &f.agency;
        match &g.executive {
            Some(e) => ix.own_agent(diags, f, e, "executive agent"),
            // An agents.json without agents has been reported already.
            None if f.agents.is_empty() && g.file.ends_with("agents.json") => {}
            None => diags.error(&g.file, g.name.pos, format!("agency `{}` has no executive agent: say which of its {} agents receives its messages under `## Executive Agent`", g.name.v, f.agents.len())),
        }
        for (n, _) in &g.agents {
            ix.own_agent(diags, f, n, "agent");
        }
        if g.lists_agents {
            for a in &f.agents {
                let listed = g.agents.iter().any(|(n, _)| n.v == a.name.v);
                if !listed && g.executive.as_ref().is_none_or(|e| e.v != a.name.v) {
                    diags.warning(&a.file, a.name.pos, format!("agent `{}` is not listed under `## Agents` of {} (it is part of the agency all the same)", a.name.v, g.file));
                }
            }
        }
        for t in &g.tools {
            ix.tool_ref(diags, &g.file, t);
        }
        for s in &g.sub_agencies {
            if !f.children.iter().any(|c| c.agency.name.v == s.v) {
                let hint = did_you_mean(&s.v, f.children.iter().map(|c| c.agency.name.v.as_str()));
                diags.error(
                    &g.file,
                    s.pos,
                    format!(
                        "sub-agency `{}` is not the agency of a subfolder here{hint}",
                        s.v
                    ),
                );
            }
        }
        for (a, b) in &g.connections {
            let known = ix.agent_ref(diags, &g.file, a, "connection from")
                & ix.agent_ref(diags, &g.file, b, "connection to");
            if known && a.v == b.v {
                diags.error(
                    &g.file,
                    b.pos,
                    format!(
                        "connection `{} -> {}` connects an agent to itself; name two different agents",
                        a.v, b.v
                    ),
                );
            }
        }
        for a in &f.agents {
            for p in &a.inherits {
                ix.agent_ref(diags, &a.file, p, "parent");
            }
            for t in a
                .tools
                .iter()
                .flat_map(|t| t.v.iter())
                .chain(a.tools_add.iter())
            {
                ix.tool_ref(diags, &a.file, t);
            }
            for c in &a.connections {
                ix.agent_ref(diags, &a.file, c, "connection");
            }
        }
    }
    cycles(ix, diags)
}

/// Inheritance cycles (each named once with its whole chain) and chains
/// deeper than [`MAX_DEPTH`].
fn cycles(ix: &Index, diags: &mut Diags) -> Vec<String> {
    let mut broken: Vec<String> = Vec::new();
    let mut reported: Vec<Vec<String>> = Vec::new();
    for start in ix.agents.keys() {
        let mut path: Vec<String> = Vec::new();
        walk(ix, start, &mut path, &mut broken, &mut reported, diags);
    }
    for name in ix.agents.keys() {
        if broken.contains(name) {
            continue;
        }
        if let Some(chain) = too_deep(ix, name, 0) {
            let (a, _) = ix.agents[name];
            diags.error(
                &a.file,
                a.name.pos,
                format!(
                    "inheritance deeper than {MAX_DEPTH} levels: {}",
                    chain.join(" -> ")
                ),
            );
            broken.push(name.clone());
        }
    }
    broken
}

fn walk(
    ix: &Index,
    name: &str,
    path: &mut Vec<String>,
    broken: &mut Vec<String>,
    reported: &mut Vec<Vec<String>>,
    diags: &mut Diags,
) {
    if let Some(i) = path.iter().position(|p| p == name) {
        let members: Vec<String> = path[i..].to_vec();
        let mut key = members.clone();
        key.sort();
        if !reported.contains(&key) {
            reported.push(key);
            let (first, _) = ix.agents[&members[0]];
            let next = members.get(1).unwrap_or(&members[0]);
            let pos = first
                .inherits
                .iter()
                .find(|p| p.v == *next)
                .map_or(first.name.pos, |p| p.pos);
            let mut chain = members.clone();
            chain.push(members[0].clone());
            diags.error(
                &first.file,
                pos,
                format!("inheritance cycle: {}", chain.join(" -> ")),
            );
        }
        for m in members {
            if !broken.contains(&m) {
                broken.push(m);
            }
        }
        return;
    }
    // The path is bounded: a chain longer than the number of agents repeats.
    let Some((a, _)) = ix.agents.get(name) else {
        return;
    };
    if path.len() > ix.agents.len() {
        return;
    }
    path.push(name.to_owned());
    for p in &a.inherits {
        walk(ix, &p.v, path, broken, reported, diags);
    }
    path.pop();
}

/// The longest chain above `name` when it is longer than the limit.
fn too_deep(ix: &Index, name: &str, depth: usize) -> Option<Vec<String>> {
    if depth > MAX_DEPTH {
        return Some(vec![name.to_owned()]);
    }
    let (a, _) = ix.agents.get(name)?;
    for p in &a.inherits {
        if let Some(mut chain) = too_deep(ix, &p.v, depth + 1) {
            chain.insert(0, name.to_owned());
            return Some(chain);
        }
    }
    None
}

/// A field map as a JSON Schema object.
fn schema(fields: &[(String, String)], closed: bool) -> Value {
    let mut props = serde_json::Map::new();
    let mut required = Vec::new();
    for (name, ty) in fields {
        let base = ty.strip_suffix('?').unwrap_or(ty);
        props.insert(name.clone(), json!({ "type": base }));
        if !ty.ends_with('?') {
            required.push(name.clone());
        }
    }
    let mut s = json!({ "type": "object", "properties": props, "required": required });
    if closed {
        s["additionalProperties"] = json!(false);
    }
    s
}

fn tool(t: &RawTool) -> Option<Tool> {
    let format =
        |f: &Option<Vec<(String, String)>>| f.iter().flatten().cloned().collect::<BTreeMap<_, _>>();
    let input_schema = match &t.input {
        Some(f) => schema(f, true),
        None => json!({ "type": "object" }),
    };
    let output_schema = match &t.output {
        Some(f) => schema(f, false),
        None => json!({}),
    };
    Some(Tool {
        name: t.name.v.clone(),
        description: t.description.clone(),
        implementation: t.implementation.clone()?,
        interface: ToolInterface {
            input_format: format(&t.input),
            output_format: format(&t.output),
            input_schema,
            output_schema,
        },
        egress: t.egress.clone(),
        source: SourceRef {
            file: t.file.clone(),
            line: t.name.pos.line,
        },
    })
}

/// The model of `f` and its sub-agencies (only called without errors).
pub fn model(f: &RawFolder, explained: &BTreeMap<String, Explanation>) -> AgencyModel {
    let g = &f.agency;
    AgencyModel {
        name: g.name.v.clone(),
        kind: AgencyKind::Agency,
        description: g.description.join("\n"),
        static_memory: g.static_memory.iter().map(|s| s.v.clone()).collect(),
        executive_agent: g
            .executive
            .as_ref()
            .map(|e| e.v.clone())
            .unwrap_or_default(),
        agents: f
            .agents
            .iter()
            .filter_map(|a| explained.get(&a.name.v).map(|e| e.agent.clone()))
            .collect(),
        tools: f.tools.iter().filter_map(tool).collect(),
        sub_agencies: f.children.iter().map(|c| model(c, explained)).collect(),
        budget: g.budget.as_ref().map(|b| b.v.clone()),
        source: SourceRef {
            file: g.file.clone(),
            line: g.name.pos.line,
        },
        metadata: None,
    }
}

/// Each `.agency`'s `## Connections` (`A -> B`) added to agent A's
/// connections, as if A's own file named B (the agent's and the agency's
/// lists are one list: either way A and B may message each other), with
/// the agency file's line as its origin for `agency explain`. Agents whose
/// explanation is missing (a broken ancestry, already reported) are
/// skipped.
pub fn agency_connections(root: &RawFolder, explained: &mut BTreeMap<String, Explanation>) {
    for f in root.all() {
        let g = &f.agency;
        for (a, b) in &g.connections {
            let Some(e) = explained.get_mut(&a.v) else {
                continue;
            };
            if !e.agent.connections.contains(&b.v) {
                e.agent.connections.push(b.v.clone());
                e.agent.connections.sort();
            }
            e.fields.push(inherit::FieldOrigin {
                field: "connections".into(),
                value: json!(b.v),
                from: SourceRef {
                    file: g.file.clone(),
                    line: b.pos.line,
                },
            });
        }
    }
}

/// Effective agents and their explanations.
pub fn explain_all(
    ix: &Index,
    broken: &[String],
    diags: &mut Diags,
) -> BTreeMap<String, Explanation> {
    let raws: BTreeMap<String, &RawAgent> = ix
        .agents
        .iter()
        .map(|(k, (a, _))| (k.clone(), *a))
        .collect();
    let effs = inherit::all(&raws, broken, diags);
    effs.iter()
        .map(|(name, e)| {
            (
                name.clone(),
                inherit::finish(raws[name], e, ix.roles.get(name).map(String::as_str)),
            )
        })
        .collect()
}
