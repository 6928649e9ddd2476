//! Reading seed 004's `agents.json` (`{"agents": {"main": {"name",
//! "description", "tools", "connections"}}}`): each entry is an agent named
//! by its key (connections name keys), titled by its `name`. The agency is
//! named after the folder; its executive is `main` when there is one, else
//! the first entry (with a warning saying so). An entry may carry Agency's
//! agent fields in an `agency` object, as an `.agent`'s `agency:` key.

use crate::agent::apply_fields;
use crate::diag::{Diags, Pos};
use crate::fields::{Cx, check_name};
use crate::json;
use crate::node::{Node, NodeKind};
use crate::raw::{RawAgency, RawAgent, S};

pub const ENTRY_KEYS: &[&str] = &["name", "description", "tools", "connections", "agency"];

/// The agency, its agents and the executive's name (if any agent).
pub fn read(
    file: &str,
    folder_name: &str,
    text: &str,
    diags: &mut Diags,
) -> (RawAgency, Vec<RawAgent>, Option<S<String>>) {
    let mut cx = Cx { file, diags };
    let agency = RawAgency {
        file: file.to_owned(),
        name: S::new(folder_name.to_owned(), Pos::start()),
        ..RawAgency::default()
    };
    if let Err(m) = check_name("agency", folder_name) {
        cx.err(
            Pos::start(),
            format!("{m} (an agents.json agency is named after its folder)"),
        );
    }
    let root = match json::parse(text) {
        Ok(r) => r,
        Err((pos, m)) => {
            cx.err(pos, m);
            return (agency, Vec::new(), None);
        }
    };
    let Some(top) = cx.map(&root, "agents.json") else {
        return (agency, Vec::new(), None);
    };
    let known = cx.known_entries(top, &["agents"], "agents.json");
    let Some((_, agents_node)) = known.first() else {
        cx.err(root.pos, "agents.json has no `agents` object");
        return (agency, Vec::new(), None);
    };
    let Some(entries) = cx.map(agents_node, "`agents`") else {
        return (agency, Vec::new(), None);
    };
    let mut agents: Vec<RawAgent> = Vec::new();
    for (k, v) in entries {
        let key = S::new(k.scalar_text().unwrap_or_default().to_owned(), k.pos);
        if let Err(m) = check_name("agent", &key.v) {
            cx.err(key.pos, m.to_string());
            continue;
        }
        if agents.iter().any(|a| a.name.v == key.v) {
            cx.err(key.pos, format!("agent `{}` is given twice", key.v));
            continue;
        }
        let mut a = RawAgent {
            file: file.to_owned(),
            name: key.clone(),
            ..RawAgent::default()
        };
        let Some(fields) = cx.map(v, &format!("agent `{}`", key.v)) else {
            continue;
        };
        for (f, val) in cx.known_entries(fields, ENTRY_KEYS, &format!("agent `{}`", key.v)) {
            match f {
                "name" => a.title = cx.string(val, "name"),
                "description" => a.description = cx.string(val, "description"),
                "tools" => a.tools = strict_list(&mut cx, val, "tools").map(|l| S::new(l, val.pos)),
                "connections" => a
                    .connections
                    .extend(strict_list(&mut cx, val, "connections").unwrap_or_default()),
                _ => apply_fields(
                    &mut cx,
                    val,
                    &mut a,
                    &format!("agent `{}`'s `agency` object", key.v),
                ),
            }
        }
        agents.push(a);
    }
    let exec = match agents.iter().find(|a| a.name.v == "main") {
        Some(m) => Some(m.name.clone()),
        None => agents.first().map(|a| {
            if agents.len() > 1 {
                cx.warn(
                    a.name.pos,
                    format!(
                        "no agent is keyed `main`: the first, `{}`, is the executive agent",
                        a.name.v
                    ),
                );
            }
            a.name.clone()
        }),
    };
    if agents.is_empty() {
        cx.err(agents_node.pos, "agents.json defines no agents");
    }
    (agency, agents, exec)
}

/// A JSON array of strings (agents.json is strict: no comma strings).
fn strict_list(cx: &mut Cx, node: &Node, what: &str) -> Option<Vec<S<String>>> {
    let NodeKind::Seq(items) = &node.kind else {
        cx.err(
            node.pos,
            format!(
                "`{what}` must be an array of strings, found {}",
                node.type_name()
            ),
        );
        return None;
    };
    Some(items.iter().filter_map(|i| cx.string(i, what)).collect())
}

/// How a seed-004 tool script is run: by its interpreter, in the folder of
/// the `agents.json` (the runner's working directory).
pub fn script_command(path: &str) -> Vec<String> {
    let interp = match path.rsplit_once('.').map(|(_, e)| e) {
        Some("py") => Some("python3"),
        Some("js" | "mjs" | "cjs") => Some("node"),
        Some("ts") => Some("bun"),
        Some("sh") => Some("sh"),
        Some("rb") => Some("ruby"),
        _ => None,
    };
    match interp {
        Some(i) => vec![i.to_owned(), path.to_owned()],
        None => vec![format!("./{path}")],
    }
}
