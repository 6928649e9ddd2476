//! An agent's verbs (seed 003's "agents as tools with
//! typed contracts"): under `agency.verbs`, a list of `{name,
//! description?, input, output}` where `input` and `output` are JSON
//! Schemas (draft 2020-12) written in YAML. Another agent calls a verb with
//! `agent_call`; the service validates the input before anything is sent
//! and the callee's answer against `output`. Each problem is reported at
//! the line and column of the part of the source that causes it.

use serde_json::Value;

use crate::fields::Cx;
use crate::model::Verb;
use crate::node::Node;
use crate::pipeline::schemas::{node_at, validator};
use crate::raw::{RawAgent, S};

/// The keys of one verb.
pub const VERB_KEYS: &[&str] = &["name", "description", "input", "output"];

/// Why a verb name is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "bad verb name `{0}`: expected a lowercase letter then lowercase letters, digits or `_` (at most 64)"
)]
pub struct BadVerbName(pub String);

/// A verb name: `[a-z][a-z0-9_]*`, at most 64 bytes.
pub fn check_verb_name(name: &str) -> Result<(), BadVerbName> {
    let mut bytes = name.bytes();
    let ok = name.len() <= 64
        && bytes.next().is_some_and(|b| b.is_ascii_lowercase())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(BadVerbName(name.to_owned()))
    }
}

/// Read `agency.verbs` into `a.verbs`; a verb with any error is dropped
/// (its errors are reported), so the model only holds verbs that compile.
pub fn read_verbs(cx: &mut Cx, node: &Node, a: &mut RawAgent) {
    let crate::node::NodeKind::Seq(items) = &node.kind else {
        cx.err(
            node.pos,
            format!(
                "`verbs` must be a list of verbs, found {}",
                node.type_name()
            ),
        );
        return;
    };
    for item in items {
        let before = cx.diags.len();
        let verb = read_verb(cx, item);
        if let Some(v) = verb {
            if a.verbs.iter().any(|seen| seen.v.name == v.v.name) {
                cx.err(v.pos, format!("verb `{}` is declared twice", v.v.name));
            } else if cx.diags.len() == before {
                a.verbs.push(v);
            }
        }
    }
}

fn read_verb(cx: &mut Cx, item: &Node) -> Option<S<Verb>> {
    let entries = cx.map(item, "a verb")?;
    let mut name = None;
    let mut description = String::new();
    let mut input = None;
    let mut output = None;
    for (key, v) in cx.known_entries(entries, VERB_KEYS, "a verb") {
        match key {
            "name" => {
                if let Some(n) = cx.string(v, "verb name") {
                    match check_verb_name(&n.v) {
                        Ok(()) => name = Some(n),
                        Err(e) => cx.err(n.pos, e.to_string()),
                    }
                }
            }
            "description" => {
                description = cx
                    .string(v, "verb description")
                    .map(|d| d.v)
                    .unwrap_or_default();
            }
            "input" => input = schema(cx, v, "input"),
            _ => output = schema(cx, v, "output"),
        }
    }
    let name = match name {
        Some(n) => n,
        None => {
            if !entries.iter().any(|(k, _)| k.scalar_text() == Some("name")) {
                cx.err(item.pos, "a verb needs a `name`");
            }
            return None;
        }
    };
    for (what, given) in [("input", &input), ("output", &output)] {
        if given.is_none() && !entries.iter().any(|(k, _)| k.scalar_text() == Some(what)) {
            cx.err(
                name.pos,
                format!("verb `{}` needs an `{what}` schema", name.v),
            );
        }
    }
    Some(S::new(
        Verb {
            name: name.v,
            description,
            input: input?,
            output: output?,
        },
        name.pos,
    ))
}

/// A schema: a mapping (or `true`/`false`) that compiles as JSON Schema
/// 2020-12; an error points into the schema where the compiler says.
fn schema(cx: &mut Cx, v: &Node, what: &str) -> Option<Value> {
    let value = v.to_json();
    if !matches!(value, Value::Object(_) | Value::Bool(_)) {
        cx.err(
            v.pos,
            format!(
                "the verb's `{what}` must be a JSON Schema (a mapping), found {}",
                v.type_name()
            ),
        );
        return None;
    }
    match validator(&value) {
        Ok(_) => Some(value),
        Err(e) => {
            cx.err(
                node_at(v, &e.pointer),
                format!(
                    "the verb's `{what}` is not a valid JSON Schema (2020-12): {}",
                    e.message
                ),
            );
            None
        }
    }
}
