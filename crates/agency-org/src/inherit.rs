//! Inheritance (seed 002: an agent may inherit others): parents apply in
//! order, the first parent first and the agent's own fields last. Static
//! memory, behaviour, memory guidance, capabilities and connections append
//! unless the agent names the field in `agency.replace`; model, runtime,
//! keep-warm and budget are the last one given; tools only narrow (a child
//! that lists tools must pick them from its parents' union) unless added
//! with `agency.tools_add`. Every effective value keeps the file and line
//! it came from, for `agency explain`.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value, json};

use crate::diag::Diags;
use crate::model::{Agent, Behavior, Budget, MemorySettings, SourceRef};
use crate::raw::{RawAgent, S};

/// How many ancestors an agent may have in one chain.
pub const MAX_DEPTH: usize = 8;

type Items = Vec<(String, SourceRef)>;

/// An agent's effective fields with their origins.
#[derive(Debug, Clone, Default)]
pub struct Eff {
    static_memory: Items,
    behavior: Items,
    guidance: Items,
    tools: Items,
    capabilities: Items,
    connections: Items,
    model: Option<(String, SourceRef)>,
    runtime: Option<(String, SourceRef)>,
    keep_warm: Option<(String, SourceRef)>,
    budget: Option<(Budget, SourceRef)>,
}

/// One effective value and where it was written.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FieldOrigin {
    pub field: String,
    pub value: Value,
    pub from: SourceRef,
}

/// `agency explain`'s answer: the effective agent and each field's origin.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explanation {
    pub agent: Agent,
    pub fields: Vec<FieldOrigin>,
}

fn at<T>(file: &str, s: &S<T>) -> SourceRef {
    SourceRef {
        file: file.to_owned(),
        line: s.pos.line,
    }
}

fn own(file: &str, list: &[S<String>]) -> Items {
    list.iter().map(|s| (s.v.clone(), at(file, s))).collect()
}

/// Parents' items (in order), then the agent's own, unless replaced.
fn append(parents: &[&Eff], get: fn(&Eff) -> &Items, replace: bool, mine: Items) -> Items {
    let mut out: Items = if replace {
        Vec::new()
    } else {
        parents
            .iter()
            .flat_map(|p| get(p).iter().cloned())
            .collect()
    };
    out.extend(mine);
    out
}

fn last<T: Clone>(
    parents: &[&Eff],
    get: fn(&Eff) -> &Option<(T, SourceRef)>,
    mine: Option<(T, SourceRef)>,
) -> Option<(T, SourceRef)> {
    mine.or_else(|| parents.iter().rev().find_map(|p| get(p).clone()))
}

/// The effective fields of `a` given its parents' (already computed).
pub fn effective(a: &RawAgent, parents: &[&Eff], diags: &mut Diags) -> Eff {
    let f = a.file.as_str();
    let rep = |k: &str| a.replace.contains(k);
    let mut union: Items = Vec::new();
    for (t, src) in parents.iter().flat_map(|p| p.tools.iter()) {
        if !union.iter().any(|(u, _)| u == t) {
            union.push((t.clone(), src.clone()));
        }
    }
    let mut tools = match &a.tools {
        None => union.clone(),
        Some(list) => {
            let mut out = Vec::new();
            for t in &list.v {
                if !parents.is_empty() && !union.iter().any(|(u, _)| *u == t.v) {
                    let have: Vec<&str> = union.iter().map(|(u, _)| u.as_str()).collect();
                    let have = if have.is_empty() {
                        "none".to_owned()
                    } else {
                        have.join(", ")
                    };
                    diags.error(f, t.pos, format!("agent `{}` lists tool `{}`, which none of its parents has (they have: {have}); inherited tools only narrow: to add a tool, list it under `agency: {{tools_add: [{}]}}`", a.name.v, t.v, t.v));
                    continue;
                }
                out.push((t.v.clone(), at(f, t)));
            }
            out
        }
    };
    for t in &a.tools_add {
        if !tools.iter().any(|(u, _)| *u == t.v) {
            tools.push((t.v.clone(), at(f, t)));
        }
    }
    let one = |o: &Option<S<String>>| o.as_ref().map(|s| (s.v.clone(), at(f, s)));
    Eff {
        static_memory: append(
            parents,
            |e| &e.static_memory,
            rep("staticMemory"),
            own(f, &a.static_memory),
        ),
        behavior: append(
            parents,
            |e| &e.behavior,
            rep("behavior"),
            own(f, &a.behavior),
        ),
        guidance: append(parents, |e| &e.guidance, rep("memory"), own(f, &a.guidance)),
        capabilities: append(
            parents,
            |e| &e.capabilities,
            rep("capabilities"),
            own(f, &a.capabilities),
        ),
        connections: append(
            parents,
            |e| &e.connections,
            rep("connections"),
            own(f, &a.connections),
        ),
        tools,
        model: last(parents, |e| &e.model, one(&a.model)),
        runtime: last(parents, |e| &e.runtime, one(&a.runtime)),
        keep_warm: last(parents, |e| &e.keep_warm, one(&a.keep_warm)),
        budget: last(
            parents,
            |e| &e.budget,
            a.budget.as_ref().map(|b| (b.v.clone(), at(f, b))),
        ),
    }
}

fn values(items: &Items) -> Vec<String> {
    items.iter().map(|(v, _)| v.clone()).collect()
}

fn sorted_unique(items: &Items) -> Vec<String> {
    let mut v = values(items);
    v.sort();
    v.dedup();
    v
}

/// The model's agent and the explanation of each field.
pub fn finish(a: &RawAgent, e: &Eff, role: Option<&str>) -> Explanation {
    let f = a.file.as_str();
    let name_src = at(f, &a.name);
    let mut tools = values(&e.tools);
    let mut seen = Vec::new();
    tools.retain(|t| {
        if seen.contains(t) {
            false
        } else {
            seen.push(t.clone());
            true
        }
    });
    let agent = Agent {
        name: a.name.v.clone(),
        title: a
            .title
            .as_ref()
            .map_or_else(|| a.name.v.clone(), |t| t.v.clone()),
        description: a
            .description
            .as_ref()
            .map(|d| d.v.clone())
            .or_else(|| role.map(str::to_owned))
            .unwrap_or_default(),
        inherits: a.inherits.iter().map(|p| p.v.clone()).collect(),
        static_memory: values(&e.static_memory),
        volatile_memory: Vec::new(),
        tools,
        behavior: Behavior {
            on_message: values(&e.behavior),
        },
        model: e.model.as_ref().map(|m| m.0.clone()),
        runtime: e.runtime.as_ref().map(|m| m.0.clone()),
        capabilities: sorted_unique(&e.capabilities),
        budget: e.budget.as_ref().map(|b| b.0.clone()),
        connections: sorted_unique(&e.connections),
        memory: MemorySettings {
            guidance: values(&e.guidance),
            keep_warm: e.keep_warm.as_ref().map(|k| k.0.clone()),
        },
        verbs: a.verbs.iter().map(|v| v.v.clone()).collect(),
        claude: a.claude.clone(),
        source: name_src.clone(),
    };
    let mut fields = vec![FieldOrigin {
        field: "name".into(),
        value: json!(agent.name),
        from: name_src.clone(),
    }];
    let title_src = a.title.as_ref().map_or(name_src.clone(), |t| at(f, t));
    fields.push(FieldOrigin {
        field: "title".into(),
        value: json!(agent.title),
        from: title_src,
    });
    if let Some(d) = &a.description {
        fields.push(FieldOrigin {
            field: "description".into(),
            value: json!(d.v),
            from: at(f, d),
        });
    }
    for p in &a.inherits {
        fields.push(FieldOrigin {
            field: "inherits".into(),
            value: json!(p.v),
            from: at(f, p),
        });
    }
    for v in &a.verbs {
        fields.push(FieldOrigin {
            field: "verbs".into(),
            value: json!(v.v.name),
            from: at(f, v),
        });
    }
    let lists: [(&str, &Items); 6] = [
        ("staticMemory", &e.static_memory),
        ("behavior.onMessage", &e.behavior),
        ("tools", &e.tools),
        ("capabilities", &e.capabilities),
        ("connections", &e.connections),
        ("memory.guidance", &e.guidance),
    ];
    for (name, items) in lists {
        for (v, src) in items {
            fields.push(FieldOrigin {
                field: name.into(),
                value: json!(v),
                from: src.clone(),
            });
        }
    }
    let singles: [(&str, &Option<(String, SourceRef)>); 3] = [
        ("model", &e.model),
        ("runtime", &e.runtime),
        ("memory.keepWarm", &e.keep_warm),
    ];
    for (name, v) in singles {
        if let Some((v, src)) = v {
            fields.push(FieldOrigin {
                field: name.into(),
                value: json!(v),
                from: src.clone(),
            });
        }
    }
    if let Some((b, src)) = &e.budget {
        fields.push(FieldOrigin {
            field: "budget".into(),
            value: serde_json::to_value(b).unwrap_or(Value::Null),
            from: src.clone(),
        });
    }
    Explanation { agent, fields }
}

/// Effective agents for every agent whose ancestry is sound (no unknown
/// parent, no cycle, within the depth limit), in dependency order.
pub fn all(
    raws: &BTreeMap<String, &RawAgent>,
    broken: &[String],
    diags: &mut Diags,
) -> BTreeMap<String, Eff> {
    let mut done: BTreeMap<String, Eff> = BTreeMap::new();
    // At most one pass per level of the deepest chain.
    for _ in 0..=raws.len() {
        let mut progress = false;
        for (name, a) in raws {
            if done.contains_key(name) || broken.contains(name) {
                continue;
            }
            if a.inherits
                .iter()
                .any(|p| broken.contains(&p.v) || !raws.contains_key(&p.v))
            {
                continue;
            }
            if a.inherits.iter().all(|p| done.contains_key(&p.v)) {
                let parents: Vec<&Eff> = a.inherits.iter().filter_map(|p| done.get(&p.v)).collect();
                let e = effective(a, &parents, diags);
                done.insert(name.clone(), e);
                progress = true;
            }
        }
        if !progress {
            break;
        }
    }
    done
}
