//! Export to Claude Code's subagent format (`.claude/agents/NAME.md`): an
//! agent read from such a file gets its frontmatter and body back (the
//! `agency:` key aside); other agents get a file made from their fields.

use serde_json::Value;

use crate::model::Agent;

/// Claude Code's usual field order; other fields follow, sorted.
const ORDER: &[&str] = &[
    "name",
    "description",
    "tools",
    "model",
    "color",
    "permissionMode",
];

/// The agent as a Claude Code subagent file.
pub fn export_claude(agent: &Agent) -> String {
    let (fields, body) = match &agent.claude {
        Some(c) => (c.frontmatter.clone(), c.body.clone()),
        None => {
            let mut m = std::collections::BTreeMap::new();
            m.insert("name".to_owned(), Value::from(agent.name.clone()));
            if !agent.description.is_empty() {
                m.insert(
                    "description".to_owned(),
                    Value::from(agent.description.clone()),
                );
            }
            let mut body = agent.static_memory.join("\n");
            if !agent.behavior.on_message.is_empty() {
                body.push_str("\n\nWhen a message arrives:\n");
                for (i, s) in agent.behavior.on_message.iter().enumerate() {
                    body.push_str(&format!("{}. {s}\n", i + 1));
                }
            }
            (m, format!("\n{}\n", body.trim_end()))
        }
    };
    let mut keys: Vec<&String> = fields
        .keys()
        .filter(|k| ORDER.contains(&k.as_str()))
        .collect();
    keys.sort_by_key(|k| ORDER.iter().position(|o| o == k));
    keys.extend(fields.keys().filter(|k| !ORDER.contains(&k.as_str())));
    let mut out = String::from("---\n");
    for k in keys {
        out.push_str(&format!("{}: {}\n", yaml_key(k), yaml_value(&fields[k])));
    }
    out.push_str("---\n");
    out.push_str(&body);
    out
}

fn yaml_key(k: &str) -> String {
    if is_plain(k) {
        k.to_owned()
    } else {
        Value::from(k).to_string()
    }
}

/// Scalars plain when that reads back as the same string; everything else
/// as JSON (JSON is YAML flow syntax).
fn yaml_value(v: &Value) -> String {
    match v {
        Value::String(s) if is_plain(s) => s.clone(),
        other => other.to_string(),
    }
}

fn is_plain(s: &str) -> bool {
    let Some(first) = s.chars().next() else {
        return false;
    };
    let special_start = "-?:,[]{}#&*!|>'\"%@`".contains(first);
    !special_start
        && s.trim() == s
        && !s.contains(": ")
        && !s.contains(" #")
        && !s.ends_with(':')
        && !s.contains(['\n', '\t'])
        && matches!(crate::node::resolve_plain(s), Value::String(_))
}
