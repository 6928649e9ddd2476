//! Typed reads of frontmatter and `agents.json` values, each problem a
//! diagnostic at the value's position: unknown keys (with did-you-mean),
//! duplicate keys, wrong types, bad budgets, durations, runtimes and names.

use crate::diag::{Diags, Pos, did_you_mean};
use crate::model::Budget;
use crate::node::{Node, NodeKind};
use crate::raw::S;

/// The reader's context: the file diagnostics are about.
#[derive(Debug)]
pub struct Cx<'a> {
    pub file: &'a str,
    pub diags: &'a mut Diags,
}

impl Cx<'_> {
    pub fn err(&mut self, pos: Pos, msg: impl Into<String>) {
        self.diags.error(self.file, pos, msg);
    }

    pub fn warn(&mut self, pos: Pos, msg: impl Into<String>) {
        self.diags.warning(self.file, pos, msg);
    }

    /// The entries of a mapping, or an error naming `what`.
    pub fn map<'n>(&mut self, node: &'n Node, what: &str) -> Option<&'n [(Node, Node)]> {
        match &node.kind {
            NodeKind::Map(e) => Some(e),
            _ => {
                self.err(
                    node.pos,
                    format!("{what} must be a mapping, found {}", node.type_name()),
                );
                None
            }
        }
    }

    /// The entries of `map` whose keys are in `allowed`; the others are
    /// errors (with did-you-mean), and so are repeated keys.
    pub fn known_entries<'n>(
        &mut self,
        entries: &'n [(Node, Node)],
        allowed: &[&str],
        namespace: &str,
    ) -> Vec<(&'n str, &'n Node)> {
        let mut out: Vec<(&str, &Node)> = Vec::new();
        for (k, v) in entries {
            let key = k.scalar_text().unwrap_or_default();
            if out.iter().any(|(seen, _)| *seen == key) {
                self.err(k.pos, format!("key `{key}` is given twice"));
                continue;
            }
            if allowed.contains(&key) {
                out.push((key, v));
            } else {
                let hint = did_you_mean(key, allowed.iter().copied());
                self.err(k.pos, format!("unknown key `{key}` in {namespace}{hint}"));
            }
        }
        out
    }

    pub fn string(&mut self, node: &Node, what: &str) -> Option<S<String>> {
        match node.as_str() {
            Some(s) => Some(S::new(s.to_owned(), node.pos)),
            None => {
                self.err(
                    node.pos,
                    format!("`{what}` must be a string, found {}", node.type_name()),
                );
                None
            }
        }
    }

    /// A name (`model: 4` is the name "4"): any scalar but null.
    pub fn name_like(&mut self, node: &Node, what: &str) -> Option<S<String>> {
        match node.scalar_text() {
            Some(s) if !node.is_null() => Some(S::new(s.to_owned(), node.pos)),
            _ => {
                self.err(
                    node.pos,
                    format!("`{what}` must be a name, found {}", node.type_name()),
                );
                None
            }
        }
    }

    /// A list of strings; a single string is split on commas (Claude
    /// Code's `tools: Read, Grep` style).
    pub fn string_list(&mut self, node: &Node, what: &str) -> Option<Vec<S<String>>> {
        match &node.kind {
            NodeKind::Seq(items) => {
                let mut out = Vec::new();
                for it in items {
                    if let Some(s) = self.string(it, what) {
                        out.push(s);
                    }
                }
                Some(out)
            }
            NodeKind::Scalar { .. } if node.is_null() => Some(Vec::new()),
            NodeKind::Scalar { .. } => {
                let s = self.string(node, what)?;
                Some(
                    s.v.split(',')
                        .map(str::trim)
                        .filter(|p| !p.is_empty())
                        .map(|p| S::new(p.to_owned(), node.pos))
                        .collect(),
                )
            }
            NodeKind::Map(_) => {
                self.err(
                    node.pos,
                    format!("`{what}` must be a list of strings, found a mapping"),
                );
                None
            }
        }
    }

    /// A field → type map (`{location: string}`), types checked.
    pub fn format_map(&mut self, node: &Node, what: &str) -> Option<Vec<(String, String)>> {
        let entries = self.map(node, &format!("`{what}`"))?;
        let mut out: Vec<(String, String)> = Vec::new();
        for (k, v) in entries {
            let key = k.scalar_text().unwrap_or_default().to_owned();
            let Some(ty) = self.string(v, &format!("{what}.{key}")) else {
                continue;
            };
            if let Err(m) = check_type(&ty.v) {
                self.err(v.pos, m.to_string());
                continue;
            }
            if out.iter().any(|(f, _)| *f == key) {
                self.err(k.pos, format!("field `{key}` is given twice"));
                continue;
            }
            out.push((key, ty.v));
        }
        Some(out)
    }

    pub fn budget(&mut self, node: &Node) -> Option<S<Budget>> {
        const KEYS: &[&str] = &[
            "usd",
            "tokens",
            "calls",
            "tool_calls",
            "spawns",
            "live_agents",
            "handlers",
            "depth",
            "wall_clock",
        ];
        let entries = self.map(node, "`budget`")?;
        let mut b = Budget::default();
        for (key, v) in self.known_entries(entries, KEYS, "`budget`") {
            let json = v.to_json();
            if key == "usd" {
                match json.as_f64() {
                    Some(f) if f.is_finite() && f >= 0.0 && v.as_str().is_none() => b.usd = Some(f),
                    _ => self.err(v.pos, format!("bad budget value for `usd`: expected a non-negative number of dollars, found `{}`", v.scalar_text().unwrap_or(v.type_name()))),
                }
            } else if key == "wall_clock" {
                if let Some(s) = self.name_like(v, "budget.wall_clock") {
                    match check_duration(&s.v) {
                        Ok(()) => b.wall_clock = Some(s.v),
                        Err(m) => {
                            self.err(v.pos, format!("bad budget value for `wall_clock`: {m}"))
                        }
                    }
                }
            } else {
                let Some(n) = json.as_u64() else {
                    self.err(v.pos, format!("bad budget value for `{key}`: expected a non-negative whole number, found `{}`", v.scalar_text().unwrap_or(v.type_name())));
                    continue;
                };
                let slot = match key {
                    "tokens" => &mut b.tokens,
                    "calls" => &mut b.calls,
                    "tool_calls" => &mut b.tool_calls,
                    "spawns" => &mut b.spawns,
                    "live_agents" => &mut b.live_agents,
                    "handlers" => &mut b.handlers,
                    _ => &mut b.depth,
                };
                *slot = Some(n);
            }
        }
        Some(S::new(b, node.pos))
    }
}

/// The interface field types of seed 002 (a trailing `?`: optional).
pub const FIELD_TYPES: &[&str] = &["string", "number", "integer", "boolean", "object", "array"];

/// A field type not in [`FIELD_TYPES`]; holds the type given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown field type `{0}`: expected one of {types}{hint}",
    types = FIELD_TYPES.join(", "),
    hint = type_hint(.0)
)]
pub struct UnknownType(pub String);

/// The did-you-mean of an unknown type, its `?` aside.
fn type_hint(ty: &str) -> String {
    let base = ty.strip_suffix('?').unwrap_or(ty);
    did_you_mean(base, FIELD_TYPES.iter().copied())
}

/// A text that is not a duration; holds the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a duration such as 90s, 30m, 2h, 1d or 1h30m")]
pub struct NotADuration(pub String);

/// A name agents, agencies and tools may not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad {what} name `{name}`: use 1-64 ASCII letters, digits, '_', '-' or '.'")]
pub struct BadName {
    /// What is named: `agent`, `agency`, `tool`.
    pub what: String,
    pub name: String,
}

pub fn check_type(ty: &str) -> Result<(), UnknownType> {
    let base = ty.strip_suffix('?').unwrap_or(ty);
    if FIELD_TYPES.contains(&base) {
        Ok(())
    } else {
        Err(UnknownType(ty.to_owned()))
    }
}

/// A duration such as `90s`, `30m`, `2h`, `1d`, `1h30m`, `500ms`.
pub fn check_duration(s: &str) -> Result<(), NotADuration> {
    let bad = || NotADuration(s.to_owned());
    let mut rest = s;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad());
        }
        rest = &rest[digits..];
        let unit = ["ms", "s", "m", "h", "d"]
            .into_iter()
            .find(|u| rest.starts_with(u))
            .ok_or_else(bad)?;
        rest = &rest[unit.len()..];
    }
    Ok(())
}

/// The runtimes an agent may name.
pub const RUNTIMES: &[&str] = &["builtin", "claude-code", "command"];

/// Agent and tool names: what `tool:NAME` and handler names accept.
pub fn check_name(what: &str, name: &str) -> Result<(), BadName> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(BadName {
            what: what.to_owned(),
            name: name.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        for ok in ["90s", "1h30m", "500ms", "1d"] {
            assert_eq!(check_duration(ok), Ok(()), "{ok}");
        }
        for bad in ["", "5", "m5", "5x", "1.5h"] {
            assert!(check_duration(bad).is_err(), "{bad}");
        }
    }
}
