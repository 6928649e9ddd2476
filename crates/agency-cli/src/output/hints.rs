//! Output added for a new user's first hour: the MCP tool list and the
//! note that no agent will answer.

use agency_mcp::ToolInfo;
use serde_json::Value;

use super::{StatusView, table};

/// Said by `status`, `send` and `tell` when the daemon starts no agents:
/// mail then waits forever unless an MCP client is attached by hand.
pub fn no_runtime_hint(s: &StatusView) -> Option<String> {
    (s.runtime == "none").then(|| {
        format!(
            "note: no agent will answer: agents.runtime is \"none\" in {home}/agency.toml, so the daemon starts no agents.\n\
             Set runtime = \"builtin\" (an LLM API; see [agents.builtin]), \"claude-code\" or \"command\" under [agents]\n\
             and restart the daemon (README.md, \"Offline quickstart\", needs no API key), or attach an MCP client\n\
             with `agency token mint`.\n",
            home = s.home
        )
    })
}

/// Said by `status` on every call while agents run unconfined
/// (`agents.sandbox = "off"`) or cannot start because the sandbox is
/// unavailable on this machine.
pub fn sandbox_warning(s: &StatusView) -> Option<String> {
    let config = format!("{}/agency.toml", s.home);
    if s.sandbox == "off" {
        return Some(format!(
            "warning: agents run UNCONFINED (agents.sandbox = \"off\" in {config}): every agent can read this\n\
             home (admin.token, agency.db, other agents' tokens) and connect to any address. Remove that line and\n\
             restart the daemon to confine them again.\n"
        ));
    }
    let why = s.sandbox.strip_prefix("unavailable: ")?;
    Some(format!(
        "warning: no agent can start: the agent sandbox is unavailable ({why}).\n\
         Fix the cause and restart the daemon, or set agents.sandbox = \"off\" in {config} to run agents\n\
         unconfined (they can then read this whole home).\n"
    ))
}

/// Each tool: its name and description, then its arguments (name, type,
/// whether required, description).
pub fn tools(list: &[ToolInfo]) -> String {
    let mut out = String::new();
    for (i, t) in list.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str(&format!("{}\n", t.name));
        for l in t.description.lines() {
            out.push_str(&format!("  {l}\n"));
        }
        let required: Vec<&str> = t.input_schema["required"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let rows: Vec<Vec<String>> = t.input_schema["properties"]
            .as_object()
            .map(|props| {
                props
                    .iter()
                    .map(|(name, p)| {
                        vec![
                            name.clone(),
                            type_of(p),
                            if required.contains(&name.as_str()) {
                                "required".to_owned()
                            } else {
                                "optional".to_owned()
                            },
                            p["description"].as_str().unwrap_or_default().to_owned(),
                        ]
                    })
                    .collect()
            })
            .unwrap_or_default();
        if rows.is_empty() {
            out.push_str("  (no arguments)\n");
        } else {
            for l in table(&[], rows).lines() {
                out.push_str(&format!("    {l}\n"));
            }
        }
    }
    out
}

/// A short type for a property's schema: `string`, `integer|null`,
/// `array of string`, or `any`.
fn type_of(p: &Value) -> String {
    match &p["type"] {
        Value::String(t) if t == "array" => match type_of(&p["items"]).as_str() {
            "any" => "array".to_owned(),
            item => format!("array of {item}"),
        },
        Value::String(t) => t.clone(),
        Value::Array(ts) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join("|"),
        _ if p.get("anyOf").is_some() || p.get("oneOf").is_some() => {
            let alts = p.get("anyOf").or_else(|| p.get("oneOf"));
            alts.and_then(Value::as_array)
                .map(|a| a.iter().map(type_of).collect::<Vec<_>>().join("|"))
                .unwrap_or_else(|| "any".to_owned())
        }
        _ => "any".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue14_item14_long_end_reasons_are_cut_in_the_agents_table() {
        let id = |n: u128| uuid::Uuid::from_u128(n << 124 | n);
        let v = super::super::AgentsView {
            live: vec![],
            recent: vec![agency_api::Agent {
                id: agency_core::AgentId(id(1)),
                handler: agency_core::HandlerId(id(2)),
                started_at: agency_core::Timestamp(0),
                ended_at: Some(agency_core::Timestamp(1)),
                end_reason: Some(format!("failed: model API error: {}", "x".repeat(300))),
            }],
        };
        let text = super::super::agents(&v);
        assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
        assert!(text.contains('…'), "{text}");
        assert!(
            text.contains("--wide shows them whole, --json as data"),
            "{text}"
        );
    }

    #[test]
    fn issue9_item8_table_cells_and_bodies_show_controls_visibly() {
        let t = table(&["A"], vec![vec!["x\u{1b}[2J\ry\u{202e}".into()]]);
        assert_eq!(t, "A\nx\\u{1b}[2J\\u{d}y\\u{202e}\n");
        assert_eq!(
            super::super::indent("a\rb\n\u{1b}]52;c;x\u{7}"),
            "  a\\u{d}b\n  \\u{1b}]52;c;x\\u{7}\n"
        );
    }
}
