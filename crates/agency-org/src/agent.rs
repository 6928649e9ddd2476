//! Reading one `.agent` file: Claude Code subagent frontmatter (kept
//! verbatim), Agency's own fields under `agency:`, and the Markdown
//! sections of seed 002 (`## Static Memory`, `## Behavior`, `## Tools`,
//! `## Inheritance`, `## Volatile Memory`, `## Connections`).

use std::collections::BTreeMap;

use crate::assist::{Assist, AssistRequest, EntityKind};
use crate::diag::{Diags, Pos, closest, did_you_mean};
use crate::fields::{Cx, RUNTIMES, check_duration, check_name};
use crate::markdown::{self, Doc, Line, Section, list_item, says_none};
use crate::model::ClaudeSubagent;
use crate::node::{Node, NodeKind};
use crate::raw::{RawAgent, S};
use crate::yaml;

/// Agency's keys under an agent's `agency:` frontmatter key.
pub const AGENT_KEYS: &[&str] = &[
    "title",
    "inherits",
    "runtime",
    "model",
    "capabilities",
    "budget",
    "connections",
    "memory",
    "tools",
    "tools_add",
    "replace",
    "static_memory",
    "behavior",
    "verbs",
];

/// Claude Code's subagent fields (others are kept too; these are only
/// for did-you-mean warnings on near misses).
pub const CLAUDE_KEYS: &[&str] = &[
    "name",
    "description",
    "tools",
    "disallowedTools",
    "model",
    "color",
    "permissionMode",
    "mcpServers",
    "hooks",
    "maxTurns",
    "skills",
    "memory",
];

pub const AGENT_SECTIONS: &[&str] = &[
    "Static Memory",
    "Behavior",
    "Behaviour",
    "Tools",
    "Inheritance",
    "Volatile Memory",
    "Connections",
];

/// What `agency.replace` may name: the fields that otherwise append.
pub const REPLACEABLE: &[&str] = &[
    "staticMemory",
    "behavior",
    "memory",
    "capabilities",
    "connections",
];

pub fn read(
    file: &str,
    stem: &str,
    text: &str,
    diags: &mut Diags,
    assist: Option<&dyn Assist>,
) -> Option<RawAgent> {
    let mut cx = Cx { file, diags };
    let doc = match markdown::parse(text) {
        Ok(d) => d,
        Err((pos, m)) => {
            cx.err(pos, m);
            return None;
        }
    };
    let mut a = RawAgent {
        file: file.to_owned(),
        ..RawAgent::default()
    };
    let mut fm_name: Option<S<String>> = None;
    if let Some((fm, first)) = &doc.frontmatter {
        match yaml::parse(fm, *first) {
            Err((pos, m)) => cx.err(pos, m),
            Ok(None) => {}
            Ok(Some(node)) => fm_name = read_frontmatter(&mut cx, &node, &doc, &mut a),
        }
    }
    let claude_mode = a.claude.is_some();
    // The name: frontmatter `name`, else the title heading, else the file.
    let heading = doc.title.as_ref().map(|t| {
        let (explicit, name) = strip_name_prefix(&t.text);
        let off = t.text.find(name).unwrap_or(0);
        (
            explicit,
            S::new(
                name.to_owned(),
                Pos::new(t.pos.line, t.pos.col + chars(&t.text[..off])),
            ),
        )
    });
    a.name = match (fm_name, heading) {
        (Some(f), Some((true, h))) if h.v != f.v => {
            cx.err(
                h.pos,
                format!(
                    "the heading names the agent `{}` but the frontmatter `name` is `{}`",
                    h.v, f.v
                ),
            );
            f
        }
        (Some(f), _) => f,
        (None, Some((_, h))) => h,
        (None, None) => S::new(stem.to_owned(), Pos::start()),
    };
    if let Err(m) = check_name("agent", &a.name.v) {
        cx.err(a.name.pos, m.to_string());
    }
    // A bare `# Heading` of a Claude file that has a `name` is prose.
    if claude_mode
        && let Some(t) = &doc.title
        && !strip_name_prefix(&t.text).0
        && a.name.v != t.text
    {
        a.static_memory.push(S::new(format!("# {}", t.text), t.pos));
    }
    for l in &doc.preamble {
        match l.text.strip_prefix("Title:") {
            Some(t) if a.title.is_none() => a.title = Some(S::new(t.trim().to_owned(), l.pos)),
            _ => a.static_memory.push(S::new(l.text.clone(), l.pos)),
        }
    }
    for s in &doc.sections {
        read_section(&mut cx, s, &mut a, claude_mode, assist);
    }
    Some(a)
}

/// `Agent Name: X`, `Name: X` or `X`; whether a prefix was written.
pub fn strip_name_prefix(title: &str) -> (bool, &str) {
    for p in ["Agency Name:", "Agent Name:", "Tool Name:", "Name:"] {
        if let Some(rest) = strip_prefix_ci(title, p) {
            return (true, rest.trim());
        }
    }
    (false, title.trim())
}

/// `s` without the ASCII prefix `p`, compared case-insensitively.
pub fn strip_prefix_ci<'a>(s: &'a str, p: &str) -> Option<&'a str> {
    let head = s.get(..p.len())?;
    head.eq_ignore_ascii_case(p).then(|| &s[p.len()..])
}

/// The length of `s` in characters, as a column offset.
pub fn chars(s: &str) -> u32 {
    u32::try_from(s.chars().count()).unwrap_or(u32::MAX / 2)
}

/// The Claude fields (kept verbatim) and the `agency:` fields; returns
/// the frontmatter `name`.
fn read_frontmatter(cx: &mut Cx, node: &Node, doc: &Doc, a: &mut RawAgent) -> Option<S<String>> {
    let entries = cx.map(node, "the frontmatter")?;
    let mut claude = BTreeMap::new();
    let mut name = None;
    let mut seen: Vec<&str> = Vec::new();
    for (k, v) in entries {
        let key = k.scalar_text().unwrap_or_default();
        if seen.contains(&key) {
            cx.err(k.pos, format!("key `{key}` is given twice"));
            continue;
        }
        seen.push(key);
        match key {
            "agency" => apply_fields(cx, v, a, "`agency:`"),
            _ => {
                if key != "agency" && closest(key, ["agency"]).is_some() {
                    cx.err(k.pos, format!("unknown key `{key}`; did you mean `agency`? (Agency's fields go under one `agency:` key)"));
                    continue;
                }
                if !CLAUDE_KEYS.contains(&key) {
                    let hint = did_you_mean(key, CLAUDE_KEYS.iter().copied());
                    if !hint.is_empty() {
                        cx.warn(k.pos, format!("`{key}` is not a Claude Code subagent field; it is kept as is{hint}"));
                    }
                }
                match key {
                    "name" => name = cx.string(v, "name"),
                    "description" => a.description = cx.string(v, "description"),
                    _ => {}
                }
                claude.insert(key.to_owned(), v.to_json());
            }
        }
    }
    if !claude.is_empty() {
        a.claude = Some(ClaudeSubagent {
            frontmatter: claude,
            body: doc.body.clone(),
        });
    }
    name
}

/// Apply Agency's agent fields from a mapping (the `agency:` key, an
/// `agents.json` entry's `agency` object, or an assistant's answer).
pub fn apply_fields(cx: &mut Cx, node: &Node, a: &mut RawAgent, namespace: &str) {
    let Some(entries) = cx.map(node, namespace) else {
        return;
    };
    for (key, v) in cx.known_entries(entries, AGENT_KEYS, namespace) {
        match key {
            "title" => a.title = cx.string(v, "title"),
            "inherits" => a
                .inherits
                .extend(cx.string_list(v, "inherits").unwrap_or_default()),
            "runtime" => {
                if let Some(r) = cx.string(v, "runtime") {
                    if RUNTIMES.contains(&r.v.as_str()) {
                        a.runtime = Some(r);
                    } else {
                        let hint = did_you_mean(&r.v, RUNTIMES.iter().copied());
                        cx.err(r.pos, format!("unknown runtime `{}`: expected builtin, claude-code or command{hint}", r.v));
                    }
                }
            }
            "model" => a.model = cx.name_like(v, "model"),
            "capabilities" => {
                for c in cx.string_list(v, "capabilities").unwrap_or_default() {
                    match check_capability(&c.v) {
                        Ok(norm) => a.capabilities.push(S::new(norm, c.pos)),
                        Err(m) => cx.err(c.pos, m.to_string()),
                    }
                }
            }
            "budget" => a.budget = cx.budget(v),
            "connections" => a
                .connections
                .extend(cx.string_list(v, "connections").unwrap_or_default()),
            "memory" => read_memory(cx, v, a),
            "tools" => {
                let list = cx.string_list(v, "tools").unwrap_or_default();
                match &mut a.tools {
                    Some(t) => t.v.extend(list),
                    None => a.tools = Some(S::new(list, v.pos)),
                }
            }
            "tools_add" => a
                .tools_add
                .extend(cx.string_list(v, "tools_add").unwrap_or_default()),
            "replace" => {
                for r in cx.string_list(v, "replace").unwrap_or_default() {
                    if REPLACEABLE.contains(&r.v.as_str()) {
                        a.replace.insert(r.v);
                    } else {
                        let hint = did_you_mean(&r.v, REPLACEABLE.iter().copied());
                        cx.err(r.pos, format!("`replace` names `{}`, which is not a field that inherits by appending (staticMemory, behavior, memory, capabilities, connections){hint}", r.v));
                    }
                }
            }
            "static_memory" => a
                .static_memory
                .extend(cx.string_list_lines(v, "static_memory")),
            "verbs" => crate::verbs::read_verbs(cx, v, a),
            _ => a.behavior.extend(cx.string_list_lines(v, "behavior")),
        }
    }
}

impl Cx<'_> {
    /// A list of lines (a single string is one line, not split on commas).
    fn string_list_lines(&mut self, v: &Node, what: &str) -> Vec<S<String>> {
        match &v.kind {
            NodeKind::Scalar { .. } => self.string(v, what).into_iter().collect(),
            _ => self.string_list(v, what).unwrap_or_default(),
        }
    }
}

fn read_memory(cx: &mut Cx, v: &Node, a: &mut RawAgent) {
    let Some(entries) = cx.map(v, "`memory`") else {
        return;
    };
    for (key, v) in cx.known_entries(entries, &["guidance", "keep_warm"], "`agency.memory`") {
        if key == "guidance" {
            a.guidance
                .extend(cx.string_list_lines(v, "memory.guidance"));
        } else if let Some(s) = cx.string(v, "memory.keep_warm") {
            match check_duration(&s.v) {
                Ok(()) => a.keep_warm = Some(s),
                Err(m) => cx.err(s.pos, format!("bad `keep_warm`: {m}")),
            }
        }
    }
}

/// Why a capability is refused; quotes it as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadCapability {
    #[error("bad capability `{capability}`: level `{level}` is not read or write")]
    Level { capability: String, level: String },
    #[error("bad capability `{0}`: expected egress:HOST[:PORT], mcp_server:NAME or repo:NAME")]
    Shape(String),
    #[error(
        "bad capability `{capability}`: kind `{kind}` is not egress, mcp_server or repo{hint}",
        hint = did_you_mean(kind, ["egress", "mcp_server", "repo"])
    )]
    Kind { capability: String, kind: String },
    /// The resource's key (a host, a server or repo name) is not valid.
    #[error("bad capability `{capability}`: {cause}")]
    Key {
        capability: String,
        cause: agency_core::InvalidInput,
    },
}

/// `egress:HOST[:PORT]`, `mcp_server:NAME` or `repo:NAME`, optionally
/// `=read`/`=write` (read when omitted); returned normalised.
pub fn check_capability(c: &str) -> Result<String, BadCapability> {
    let (res, level) = match c.rsplit_once('=') {
        Some((r, l)) if l == "read" || l == "write" => (r, l),
        Some((_, l)) => {
            return Err(BadCapability::Level {
                capability: c.to_owned(),
                level: l.to_owned(),
            });
        }
        None => (c, "read"),
    };
    let Some((kind, key)) = res.split_once(':') else {
        return Err(BadCapability::Shape(c.to_owned()));
    };
    if !matches!(kind, "egress" | "mcp_server" | "repo") {
        return Err(BadCapability::Kind {
            capability: c.to_owned(),
            kind: kind.to_owned(),
        });
    }
    let r = agency_core::Resource::from_parts(kind, key).map_err(|cause| BadCapability::Key {
        capability: c.to_owned(),
        cause,
    })?;
    Ok(format!("{kind}:{}={level}", r.key()))
}

fn read_section(
    cx: &mut Cx,
    s: &Section,
    a: &mut RawAgent,
    claude_mode: bool,
    assist: Option<&dyn Assist>,
) {
    let known = AGENT_SECTIONS
        .iter()
        .find(|k| k.eq_ignore_ascii_case(&s.heading));
    match known.copied() {
        Some("Static Memory") => a.static_memory.extend(lines(&s.lines)),
        Some("Behavior" | "Behaviour") => a.behavior.extend(steps(&s.lines)),
        Some("Volatile Memory") => a.guidance.extend(lines(&s.lines)),
        Some("Tools") => {
            let list = if says_none(&s.lines) {
                Vec::new()
            } else {
                names(cx, &s.lines, "tools")
            };
            match &mut a.tools {
                Some(t) => t.v.extend(list),
                None => a.tools = Some(S::new(list, s.pos)),
            }
        }
        Some("Inheritance") => {
            if !says_none(&s.lines) {
                a.inherits.extend(inherits(cx, &s.lines));
            }
        }
        Some(_) => a.connections.extend(names(cx, &s.lines, "connections")),
        None => unknown_section(cx, s, a, claude_mode, assist),
    }
}

fn unknown_section(
    cx: &mut Cx,
    s: &Section,
    a: &mut RawAgent,
    claude_mode: bool,
    assist: Option<&dyn Assist>,
) {
    if let Some(near) = closest(&s.heading, AGENT_SECTIONS.iter().copied()) {
        cx.err(
            s.pos,
            format!("unknown section `{}`; did you mean `{near}`?", s.heading),
        );
        return;
    }
    // A Claude Code subagent's body is its prompt: its own headings are prose.
    if !claude_mode {
        if let Some(assist) = assist
            && place(cx, s, a, assist)
        {
            return;
        }
        cx.warn(
            s.pos,
            format!(
                "section `{}` is not one Agency reads ({}); its text is kept as static memory",
                s.heading,
                AGENT_SECTIONS.join(", ")
            ),
        );
    }
    a.static_memory
        .push(S::new(format!("## {}", s.heading), s.pos));
    a.static_memory.extend(lines(&s.lines));
}

/// Ask the assistant; its answer is applied like `agency:` frontmatter.
fn place(cx: &mut Cx, s: &Section, a: &mut RawAgent, assist: &dyn Assist) -> bool {
    let text: Vec<&str> = s.lines.iter().map(|l| l.text.as_str()).collect();
    let req = AssistRequest {
        file: cx.file.to_owned(),
        kind: EntityKind::Agent,
        heading: s.heading.clone(),
        text: text.join("\n"),
        schema: crate::schema::agent_fields(),
    };
    match assist.place(&req) {
        Ok(answer) => {
            let node = Node::from_json(&answer, s.pos);
            apply_fields(
                cx,
                &node,
                a,
                &format!("the --assist answer for section `{}`", s.heading),
            );
            cx.warn(
                s.pos,
                format!("section `{}` was placed by --assist: {answer}", s.heading),
            );
            true
        }
        Err(e) => {
            cx.warn(
                s.pos,
                format!("--assist could not place section `{}`: {e}", s.heading),
            );
            false
        }
    }
}

pub fn lines(ls: &[Line]) -> Vec<S<String>> {
    ls.iter().map(|l| S::new(l.text.clone(), l.pos)).collect()
}

/// Behaviour steps: list items; a prose line ending in `:` before them
/// ("When a message arrives:") introduces them and is dropped.
fn steps(ls: &[Line]) -> Vec<S<String>> {
    let has_items = ls.iter().any(|l| list_item(&l.text).is_some());
    ls.iter()
        .filter_map(|l| match list_item(&l.text) {
            Some((t, off)) => Some(S::new(t.to_owned(), Pos::new(l.pos.line, l.pos.col + off))),
            None if has_items && l.text.ends_with(':') => None,
            None => Some(S::new(l.text.clone(), l.pos)),
        })
        .collect()
}

/// Names from list items (`- Name (role)`, `- Name: …`, `` - `Name` ``);
/// prose lines are warned about.
pub fn names(cx: &mut Cx, ls: &[Line], what: &str) -> Vec<S<String>> {
    let mut out = Vec::new();
    for l in ls {
        match list_item(&l.text) {
            Some((t, off)) => {
                let (name, _) = split_name(t);
                if !name.is_empty() {
                    out.push(S::new(
                        name.to_owned(),
                        Pos::new(l.pos.line, l.pos.col + off),
                    ));
                }
            }
            None => cx.warn(
                l.pos,
                format!("this line of {what} is not a list item (`- Name`) and is ignored"),
            ),
        }
    }
    out
}

/// `Name (role)` / `Name: role` / `Name - role` → the name and the role.
pub fn split_name(item: &str) -> (&str, Option<&str>) {
    let item = item.trim();
    let end = item
        .find(|c: char| c.is_whitespace() || c == '(' || c == ':' || c == ',')
        .unwrap_or(item.len());
    let name = item[..end].trim_matches('`').trim_matches('*');
    let rest = item[end..]
        .trim()
        .trim_start_matches([':', '-', '–', ','])
        .trim();
    let role = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or(rest)
        .trim();
    (name, (!role.is_empty()).then_some(role))
}

/// `## Inheritance`: list items, or "Inherits X" / "Inherits from X and Y".
fn inherits(cx: &mut Cx, ls: &[Line]) -> Vec<S<String>> {
    let mut out = Vec::new();
    for l in ls {
        if list_item(&l.text).is_some() {
            out.extend(names(cx, std::slice::from_ref(l), "inheritance"));
            continue;
        }
        let Some(rest) = strip_prefix_ci(&l.text, "inherits from ")
            .or_else(|| strip_prefix_ci(&l.text, "inherits "))
        else {
            cx.warn(
                l.pos,
                "this line of inheritance is not `- Parent` or `Inherits Parent` and is ignored",
            );
            continue;
        };
        let mut cursor = l.text.len() - rest.len();
        let parts = rest
            .split([',', '.'])
            .flat_map(|p| p.split(" and "))
            .map(str::trim);
        for name in parts.filter(|n| !n.is_empty()) {
            let at = l.text[cursor..].find(name).map_or(cursor, |i| cursor + i);
            cursor = at + name.len();
            let col = l.pos.col + chars(&l.text[..at]);
            out.push(S::new(name.to_owned(), Pos::new(l.pos.line, col)));
        }
    }
    out
}
