//! Reading one `.agency` file: optional frontmatter (Agency's keys only,
//! at the top level or under `agency:`), the `# Agency Name: X` heading,
//! the purpose text under it, and the sections `## Static Memory`,
//! `## Executive Agent`, `## Agents`, `## Sub-Agencies`, `## Tools` and
//! `## Connections`.

use crate::agent::{chars, lines, names, split_name, strip_name_prefix};
use crate::assist::{Assist, AssistRequest, EntityKind};
use crate::diag::{Diags, Pos, closest};
use crate::fields::{Cx, check_name};
use crate::markdown::{self, Line, Section, list_item, says_none};
use crate::node::Node;
use crate::raw::{RawAgency, S};
use crate::yaml;

pub const AGENCY_KEYS: &[&str] = &[
    "name",
    "description",
    "executive",
    "budget",
    "static_memory",
    "agents",
    "tools",
    "sub_agencies",
    "connections",
];

pub const AGENCY_SECTIONS: &[&str] = &[
    "Static Memory",
    "Executive Agent",
    "Agents",
    "Sub-Agencies",
    "Tools",
    "Connections",
];

/// Words of "The executive agent is X." that are not the name.
const FILLER: &[&str] = &[
    "the",
    "our",
    "a",
    "an",
    "executive",
    "agent",
    "is",
    "will",
    "be",
    "this",
    "agency's",
    "agency",
];

pub fn read(
    file: &str,
    stem: &str,
    text: &str,
    diags: &mut Diags,
    assist: Option<&dyn Assist>,
) -> (RawAgency, Vec<S<String>>) {
    let mut cx = Cx { file, diags };
    let mut g = RawAgency {
        file: file.to_owned(),
        name: S::new(stem.to_owned(), Pos::start()),
        ..RawAgency::default()
    };
    let mut exec = Vec::new();
    let doc = match markdown::parse(text) {
        Ok(d) => d,
        Err((pos, m)) => {
            cx.err(pos, m);
            return (g, exec);
        }
    };
    if let Some(t) = &doc.title {
        let (_, name) = strip_name_prefix(&t.text);
        let off = t.text.find(name).unwrap_or(0);
        g.name = S::new(
            name.to_owned(),
            Pos::new(t.pos.line, t.pos.col + chars(&t.text[..off])),
        );
    }
    if let Some((fm, first)) = &doc.frontmatter {
        match yaml::parse(fm, *first) {
            Err((pos, m)) => cx.err(pos, m),
            Ok(None) => {}
            Ok(Some(node)) => apply_fields(&mut cx, &unwrap_agency_key(&node), &mut g, &mut exec),
        }
    }
    if let Err(m) = check_name("agency", &g.name.v) {
        cx.err(g.name.pos, m.to_string());
    }
    g.description
        .extend(doc.preamble.iter().map(|l| l.text.clone()));
    for s in &doc.sections {
        read_section(&mut cx, s, &mut g, &mut exec, assist);
    }
    (g, exec)
}

/// Frontmatter of an `.agency` or `.tool` may wrap its keys in `agency:`.
pub fn unwrap_agency_key(node: &Node) -> Node {
    if let crate::node::NodeKind::Map(e) = &node.kind
        && e.len() == 1
        && e[0].0.scalar_text() == Some("agency")
    {
        return e[0].1.clone();
    }
    node.clone()
}

fn apply_fields(cx: &mut Cx, node: &Node, g: &mut RawAgency, exec: &mut Vec<S<String>>) {
    let Some(entries) = cx.map(node, "the frontmatter") else {
        return;
    };
    for (key, v) in cx.known_entries(entries, AGENCY_KEYS, "an .agency file's frontmatter") {
        match key {
            "name" => {
                if let Some(n) = cx.string(v, "name") {
                    g.name = n;
                }
            }
            "description" => g
                .description
                .extend(cx.string(v, "description").map(|s| s.v)),
            "executive" => exec.extend(cx.string(v, "executive")),
            "budget" => g.budget = cx.budget(v),
            "static_memory" => g
                .static_memory
                .extend(cx.string_list(v, "static_memory").unwrap_or_default()),
            "agents" => {
                g.lists_agents = true;
                let list = cx.string_list(v, "agents").unwrap_or_default();
                g.agents.extend(list.into_iter().map(|n| (n, None)));
            }
            "tools" => g
                .tools
                .extend(cx.string_list(v, "tools").unwrap_or_default()),
            "sub_agencies" => g
                .sub_agencies
                .extend(cx.string_list(v, "sub_agencies").unwrap_or_default()),
            _ => {
                for c in cx.string_list(v, "connections").unwrap_or_default() {
                    match arrow(&c.v) {
                        Some((a, b)) => {
                            for t in b {
                                g.connections.push((
                                    S::new(a.to_owned(), c.pos),
                                    S::new(t.to_owned(), c.pos),
                                ));
                            }
                        }
                        None => cx.err(c.pos, format!("connection `{}` is not `A -> B`", c.v)),
                    }
                }
            }
        }
    }
}

/// `A -> B` (or `→`) with a comma-separated right side.
fn arrow(s: &str) -> Option<(&str, Vec<&str>)> {
    let (a, b) = s.split_once("->").or_else(|| s.split_once('→'))?;
    let a = a.trim();
    let targets: Vec<&str> = b
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    (!a.is_empty() && !targets.is_empty()).then_some((a, targets))
}

/// A heading compared without case, spaces and dashes ("Sub Agencies").
fn norm(h: &str) -> String {
    h.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

fn read_section(
    cx: &mut Cx,
    s: &Section,
    g: &mut RawAgency,
    exec: &mut Vec<S<String>>,
    assist: Option<&dyn Assist>,
) {
    let known = AGENCY_SECTIONS.iter().find(|k| norm(k) == norm(&s.heading));
    match known.copied() {
        Some("Static Memory") => g.static_memory.extend(lines(&s.lines)),
        Some("Executive Agent") => exec.extend(executive(&s.lines)),
        Some("Agents") => {
            g.lists_agents = true;
            for l in &s.lines {
                match list_item(&l.text) {
                    Some((t, off)) => {
                        let (name, role) = split_name(t);
                        let off = off + chars(&t[..t.find(name).unwrap_or(0)]);
                        g.agents.push((
                            S::new(name.to_owned(), Pos::new(l.pos.line, l.pos.col + off)),
                            role.map(str::to_owned),
                        ));
                    }
                    None if says_none(std::slice::from_ref(l)) => {}
                    None => cx.warn(
                        l.pos,
                        "this line of agents is not a list item (`- Name (role)`) and is ignored",
                    ),
                }
            }
        }
        Some("Sub-Agencies") if !says_none(&s.lines) => {
            g.sub_agencies.extend(names(cx, &s.lines, "sub-agencies"))
        }
        Some("Tools") if !says_none(&s.lines) => g.tools.extend(names(cx, &s.lines, "tools")),
        Some("Connections") if !says_none(&s.lines) => connections(cx, &s.lines, g),
        Some(_) => {}
        None => {
            if let Some(near) = closest(&s.heading, AGENCY_SECTIONS.iter().copied()) {
                cx.err(
                    s.pos,
                    format!("unknown section `{}`; did you mean `{near}`?", s.heading),
                );
                return;
            }
            if let Some(assist) = assist
                && place(cx, s, g, exec, assist)
            {
                return;
            }
            cx.warn(
                s.pos,
                format!(
                    "section `{}` is not one Agency reads ({}); its text is kept as static memory",
                    s.heading,
                    AGENCY_SECTIONS.join(", ")
                ),
            );
            g.static_memory
                .push(S::new(format!("## {}", s.heading), s.pos));
            g.static_memory.extend(lines(&s.lines));
        }
    }
}

fn place(
    cx: &mut Cx,
    s: &Section,
    g: &mut RawAgency,
    exec: &mut Vec<S<String>>,
    assist: &dyn Assist,
) -> bool {
    let text: Vec<&str> = s.lines.iter().map(|l| l.text.as_str()).collect();
    let req = AssistRequest {
        file: cx.file.to_owned(),
        kind: EntityKind::Agency,
        heading: s.heading.clone(),
        text: text.join("\n"),
        schema: crate::schema::agency_fields(),
    };
    match assist.place(&req) {
        Ok(answer) => {
            apply_fields(cx, &Node::from_json(&answer, s.pos), g, exec);
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

/// Candidate names in "The executive agent is X." or `- X`: the resolver
/// takes the first that names an agent of the folder.
fn executive(ls: &[Line]) -> Vec<S<String>> {
    let mut out = Vec::new();
    for l in ls {
        let (text, base) = match list_item(&l.text) {
            Some((t, off)) => (t, l.pos.col + off),
            None => (l.text.as_str(), l.pos.col),
        };
        let mut at = 0;
        for word in text.split_whitespace() {
            let start = text[at..].find(word).map_or(at, |i| at + i);
            at = start + word.len();
            let w = word.trim_matches(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'));
            if w.is_empty() || FILLER.contains(&w.to_lowercase().as_str()) {
                continue;
            }
            let lead = word.find(w).unwrap_or(0);
            out.push(S::new(
                w.to_owned(),
                Pos::new(l.pos.line, base + chars(&text[..start + lead])),
            ));
        }
    }
    out
}

fn connections(cx: &mut Cx, ls: &[Line], g: &mut RawAgency) {
    for l in ls {
        let (text, off) = list_item(&l.text).unwrap_or((l.text.as_str(), 0));
        match arrow(text) {
            Some((a, targets)) => {
                let pos_of = |n: &str| {
                    Pos::new(
                        l.pos.line,
                        l.pos.col + off + chars(&text[..text.find(n).unwrap_or(0)]),
                    )
                };
                let from = S::new(a.to_owned(), pos_of(a));
                for t in targets {
                    let at = text.rfind(t).unwrap_or(0);
                    let to = S::new(
                        t.to_owned(),
                        Pos::new(l.pos.line, l.pos.col + off + chars(&text[..at])),
                    );
                    g.connections.push((from.clone(), to));
                }
            }
            None => cx.err(l.pos, format!("connection `{text}` is not `- A -> B`")),
        }
    }
}
