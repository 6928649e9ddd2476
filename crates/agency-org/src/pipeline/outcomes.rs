//! A stage whose output is a plan (`outcomes:`): reading the key,
//! checking at compile time that it names an array of items with string
//! ids and titles in the stage's output schema, and the plan's graph
//! check, which the engine's output contract and the service's
//! re-validation both run (one function, so they cannot disagree):
//! ids unique, every dependency another item's id, no cycle.
//!
//! "B depends on A" becomes the outcome edge B→A: in the outcome DAG a
//! parent's children are what it needs done, so A is a child of B.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::diag::{Pos, did_you_mean};
use crate::fields::Cx;
use crate::node::Node;
use crate::raw::S;

use super::model::OutcomesSpec;
use super::schemas;

/// The keys of a stage's `outcomes`.
pub const OUTCOMES_KEYS: &[&str] = &["items", "id", "title", "description", "depends"];

/// Most items a plan may have: each becomes an outcome with its own
/// rendered file, so an answer cannot make thousands.
pub const MAX_PLAN_ITEMS: usize = 200;

/// `outcomes:` as written, each value with its position.
#[derive(Debug, Clone, Default)]
pub struct RawOutcomes {
    pub pos: Pos,
    pub items: Option<S<String>>,
    pub id: Option<S<String>>,
    pub title: Option<S<String>>,
    pub description: Option<S<String>>,
    pub depends: Option<S<String>>,
}

/// Read a stage's `outcomes:` mapping.
pub fn read(cx: &mut Cx, v: &Node) -> Option<RawOutcomes> {
    let entries = cx.map(v, "`outcomes`")?;
    let mut o = RawOutcomes {
        pos: v.pos,
        ..RawOutcomes::default()
    };
    for (key, val) in cx.known_entries(entries, OUTCOMES_KEYS, "`outcomes`") {
        let s = cx.name_like(val, &format!("outcomes.{key}"));
        match key {
            "items" => o.items = s,
            "id" => o.id = s,
            "title" => o.title = s,
            "description" => o.description = s,
            _ => o.depends = s,
        }
    }
    let missing: Vec<&str> = [("items", &o.items), ("id", &o.id), ("title", &o.title)]
        .into_iter()
        .filter(|(_, v)| v.is_none())
        .map(|(k, _)| k)
        .collect();
    if !missing.is_empty() {
        cx.err(
            v.pos,
            format!(
                "`outcomes` needs `items` (the output's array of plan items), `id` and `title` (fields of each item); missing: {}",
                missing.join(", ")
            ),
        );
    }
    Some(o)
}

/// What a field of the items must be.
#[derive(Clone, Copy, PartialEq)]
enum Want {
    String,
    Strings,
}

/// Check `raw` against the stage's compiled output schema; the spec when
/// it holds.
pub fn build(cx: &mut Cx, raw: &RawOutcomes, me: &str, output: &Value) -> Option<OutcomesSpec> {
    let (Some(items), Some(id), Some(title)) = (&raw.items, &raw.id, &raw.title) else {
        return None;
    };
    let fields: Vec<String> = items.v.split('.').map(str::to_owned).collect();
    let list = match schemas::walk(output, &fields) {
        Ok(s) => s,
        Err(e) => {
            let hint = did_you_mean(&fields[e.index], e.available.iter().map(String::as_str));
            cx.err(
                items.pos,
                format!(
                    "`outcomes.items` of stage `{me}` names `{}`, but the stage's output has no field `{}`{hint}",
                    items.v, fields[e.index]
                ),
            );
            return None;
        }
    };
    let item = list.get("items").map(|i| schemas::deref(i, output));
    let is_array = schemas::types_of(list).is_some_and(|t| t.len() == 1 && t.contains("array"));
    let Some(item) = item.filter(|i| {
        is_array
            && schemas::types_of(i).is_some_and(|t| t.len() == 1 && t.contains("object"))
            && i.get("properties").is_some()
    }) else {
        cx.err(
            items.pos,
            format!(
                "`outcomes.items` of stage `{me}` names `{}`, which must be an array of objects with properties (the plan's items)",
                items.v
            ),
        );
        return None;
    };
    let required: BTreeSet<&str> = item
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut ok = true;
    let checks = [
        ("id", Some(id), true, Want::String),
        ("title", Some(title), true, Want::String),
        ("description", raw.description.as_ref(), false, Want::String),
        ("depends", raw.depends.as_ref(), false, Want::Strings),
    ];
    for (key, named, must, want) in checks {
        let Some(named) = named else { continue };
        let props = item.get("properties").and_then(Value::as_object);
        let Some(prop) = props.and_then(|p| p.get(&named.v)) else {
            let names: Vec<&str> = props
                .map(|p| p.keys().map(String::as_str).collect())
                .unwrap_or_default();
            cx.err(
                named.pos,
                format!(
                    "`outcomes.{key}` of stage `{me}` names `{}`, but an item of `{}` has no such field{} (it has: {})",
                    named.v,
                    items.v,
                    did_you_mean(&named.v, names.iter().copied()),
                    names.join(", ")
                ),
            );
            ok = false;
            continue;
        };
        let prop = schemas::deref(prop, output);
        let only = |s: &Value, t: &str| {
            schemas::types_of(s).is_some_and(|ts| ts.len() == 1 && ts.contains(t))
        };
        let fits = match want {
            Want::String => only(prop, "string"),
            Want::Strings => {
                only(prop, "array")
                    && prop
                        .get("items")
                        .is_some_and(|i| only(schemas::deref(i, output), "string"))
            }
        };
        if !fits {
            let what = if want == Want::String {
                "a string"
            } else {
                "an array of strings (the ids an item depends on)"
            };
            cx.err(
                named.pos,
                format!(
                    "`outcomes.{key}` of stage `{me}` names `{}`, which must be {what} in the output schema",
                    named.v
                ),
            );
            ok = false;
        } else if must && !required.contains(named.v.as_str()) {
            cx.err(
                named.pos,
                format!(
                    "`outcomes.{key}` of stage `{me}` names `{}`, which every item of `{}` must have: add it to the item schema's `required`",
                    named.v, items.v
                ),
            );
            ok = false;
        }
    }
    ok.then(|| OutcomesSpec {
        items: items.v.clone(),
        id: id.v.clone(),
        title: title.v.clone(),
        description: raw.description.as_ref().map(|d| d.v.clone()),
        depends: raw.depends.as_ref().map(|d| d.v.clone()),
    })
}

/// One way a plan is not a DAG of uniquely named items.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanIssue {
    /// JSON Pointer into the output (`/tasks/2/dependencies/0`).
    pub instance_path: String,
    /// `uniqueId`, `dependency`, `cycle`, `maxItems` or `type`.
    pub keyword: &'static str,
    pub message: String,
}

/// One item of a checked plan, as the service turns it into an outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanItem {
    pub id: String,
    pub title: String,
    /// The item's description, then each of its other fields.
    pub description: String,
    /// Ids of the items it depends on, each once.
    pub depends: Vec<String>,
}

fn escape(s: &str) -> String {
    s.replace('~', "~0").replace('/', "~1")
}

/// The JSON Pointer of the items' array.
fn items_pointer(spec: &OutcomesSpec) -> String {
    spec.items
        .split('.')
        .map(|p| format!("/{}", escape(p)))
        .collect()
}

fn items_of<'v>(spec: &OutcomesSpec, value: &'v Value) -> Option<&'v Vec<Value>> {
    value
        .pointer(&items_pointer(spec))
        .and_then(Value::as_array)
}

fn deps_of<'v>(spec: &OutcomesSpec, item: &'v Value) -> Vec<&'v Value> {
    spec.depends
        .as_ref()
        .and_then(|d| item.get(d))
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default()
}

/// Check the plan in `value`: every item has a string id, ids are
/// unique, every dependency names another item, and the dependencies
/// make no cycle. Empty when it holds (or when the output has no items
/// field: there is no plan).
pub fn check_plan(spec: &OutcomesSpec, value: &Value) -> Vec<PlanIssue> {
    let base = items_pointer(spec);
    let mut out = Vec::new();
    let Some(items) = value.pointer(&base) else {
        return out;
    };
    let Some(items) = items.as_array() else {
        out.push(PlanIssue {
            instance_path: base,
            keyword: "type",
            message: format!("{} must be an array of plan items", spec.items),
        });
        return out;
    };
    if items.len() > MAX_PLAN_ITEMS {
        out.push(PlanIssue {
            instance_path: base.clone(),
            keyword: "maxItems",
            message: format!(
                "{} has {} items; a plan has at most {MAX_PLAN_ITEMS}",
                spec.items,
                items.len()
            ),
        });
        return out;
    }
    let id_at = |i: usize| format!("{base}/{i}/{}", escape(&spec.id));
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, it) in items.iter().enumerate() {
        match it.get(&spec.id).and_then(Value::as_str) {
            None => out.push(PlanIssue {
                instance_path: id_at(i),
                keyword: "type",
                message: format!("item {i} of {} has no string `{}`", spec.items, spec.id),
            }),
            Some(id) => {
                if let Some(first) = index.get(id) {
                    out.push(PlanIssue {
                        instance_path: id_at(i),
                        keyword: "uniqueId",
                        message: format!(
                            "id {id:?} of item {i} is already item {first}'s: ids must be unique"
                        ),
                    });
                } else {
                    index.insert(id, i);
                }
            }
        }
    }
    let dep_at = |i: usize, j: usize| {
        format!(
            "{base}/{i}/{}/{j}",
            escape(spec.depends.as_deref().unwrap_or_default())
        )
    };
    // Edges by item index: i needs each of edges[i] done first.
    let mut edges: Vec<Vec<(usize, usize)>> = vec![Vec::new(); items.len()];
    for (i, it) in items.iter().enumerate() {
        let me = it.get(&spec.id).and_then(Value::as_str).unwrap_or_default();
        for (j, d) in deps_of(spec, it).into_iter().enumerate() {
            let Some(d) = d.as_str() else {
                out.push(PlanIssue {
                    instance_path: dep_at(i, j),
                    keyword: "type",
                    message: "a dependency is the id of another item (a string)".to_owned(),
                });
                continue;
            };
            if d == me {
                out.push(PlanIssue {
                    instance_path: dep_at(i, j),
                    keyword: "cycle",
                    message: format!("item {me:?} depends on itself"),
                });
                continue;
            }
            match index.get(d) {
                Some(&k) => edges[i].push((k, j)),
                None => {
                    let ids = index.keys().copied().collect::<Vec<_>>();
                    out.push(PlanIssue {
                        instance_path: dep_at(i, j),
                        keyword: "dependency",
                        message: format!(
                            "item {me:?} depends on {d:?}, which is no item's id{} (ids: {})",
                            did_you_mean(d, ids.iter().copied()),
                            ids.join(", ")
                        ),
                    });
                }
            }
        }
    }
    out.extend(cycles(items, spec, &edges, &dep_at));
    out
}

/// One issue per dependency that closes a cycle (a back edge of a
/// depth-first search), naming the cycle. Iterative: a plan's depth is
/// bounded by [`MAX_PLAN_ITEMS`], but recursion depth should not depend
/// on an answer.
fn cycles(
    items: &[Value],
    spec: &OutcomesSpec,
    edges: &[Vec<(usize, usize)>],
    dep_at: &dyn Fn(usize, usize) -> String,
) -> Vec<PlanIssue> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    let name = |i: usize| {
        items[i]
            .get(&spec.id)
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_owned()
    };
    let mut mark = vec![Mark::New; items.len()];
    let mut out = Vec::new();
    for start in 0..items.len() {
        if mark[start] != Mark::New {
            continue;
        }
        // (node, next edge to look at)
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        mark[start] = Mark::OnPath;
        while let Some(top) = stack.last_mut() {
            let node = top.0;
            let Some(&(to, j)) = edges[node].get(top.1) else {
                mark[node] = Mark::Done;
                stack.pop();
                continue;
            };
            top.1 += 1;
            match mark[to] {
                Mark::New => {
                    mark[to] = Mark::OnPath;
                    stack.push((to, 0));
                }
                Mark::OnPath => {
                    let from = stack.iter().position(|(n, _)| *n == to).unwrap_or(0);
                    let path: Vec<String> = stack[from..]
                        .iter()
                        .map(|(n, _)| name(*n))
                        .chain(std::iter::once(name(to)))
                        .collect();
                    out.push(PlanIssue {
                        instance_path: dep_at(node, j),
                        keyword: "cycle",
                        message: format!(
                            "the dependencies make a cycle: {} (each depends on the next)",
                            path.join(" → ")
                        ),
                    });
                }
                Mark::Done => {}
            }
        }
    }
    out
}

/// The items of a plan that passed [`check_plan`], in order.
pub fn plan_items(spec: &OutcomesSpec, value: &Value) -> Vec<PlanItem> {
    let Some(items) = items_of(spec, value) else {
        return Vec::new();
    };
    let own: BTreeSet<&str> = [Some(&spec.id), Some(&spec.title)]
        .into_iter()
        .chain([spec.description.as_ref(), spec.depends.as_ref()])
        .flatten()
        .map(String::as_str)
        .collect();
    items
        .iter()
        .map(|it| {
            let text = |f: &str| it.get(f).and_then(Value::as_str).unwrap_or_default();
            let mut description = spec
                .description
                .as_deref()
                .map(text)
                .unwrap_or_default()
                .to_owned();
            if let Some(obj) = it.as_object() {
                // By name, whatever order the map keeps.
                let mut rest: Vec<(&String, &Value)> = obj
                    .iter()
                    .filter(|(k, _)| !own.contains(k.as_str()))
                    .collect();
                rest.sort_by(|a, b| a.0.cmp(b.0));
                for (k, v) in rest {
                    if !description.is_empty() {
                        description.push_str("\n\n");
                    }
                    description.push_str(&field_text(k, v));
                }
            }
            let mut depends: Vec<String> = Vec::new();
            for d in deps_of(spec, it).into_iter().filter_map(Value::as_str) {
                if !depends.iter().any(|x| x == d) {
                    depends.push(d.to_owned());
                }
            }
            PlanItem {
                id: text(&spec.id).to_owned(),
                title: text(&spec.title).to_owned(),
                description,
                depends,
            }
        })
        .collect()
}

/// `**steps**:` and a bullet per string of a list; `**owner**: qa`.
fn field_text(key: &str, v: &Value) -> String {
    match v {
        Value::String(s) => format!("**{key}**: {s}"),
        Value::Array(a) => {
            let mut s = format!("**{key}**:");
            if a.is_empty() {
                s.push_str(" (none)");
            }
            for x in a {
                s.push_str("\n- ");
                match x {
                    Value::String(t) => s.push_str(t),
                    other => s.push_str(&other.to_string()),
                }
            }
            s
        }
        other => format!("**{key}**: {other}"),
    }
}

#[cfg(test)]
#[path = "outcomes_tests.rs"]
mod tests;
