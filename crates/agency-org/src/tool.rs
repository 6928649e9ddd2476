//! Reading one `.tool` file: seed 002's WeatherTool bullets (`- Base URL:`,
//! `- Endpoint:`, `- Required Query Param:`, `- Returns JSON with fields:
//! { … }`, …) or explicit frontmatter, into a declarative implementation
//! (http, command or mcp) with an interface. Prose, `## Implementation`
//! included, is description only: no code is generated from it.

use crate::agent::{chars, strip_name_prefix};
use crate::assist::{Assist, AssistRequest, EntityKind};
use crate::diag::{Diags, Pos, closest, did_you_mean};
use crate::fields::{Cx, UnknownType, check_name, check_type};
use crate::markdown::{self, Line, list_item};
use crate::model::{CommandTool, HttpTool, McpTool, ToolImplementation, default_tool_timeout_ms};
use crate::node::Node;
use crate::raw::{RawTool, S};
use crate::yaml;

pub use crate::tool_access::{RESERVED_ENV, RESERVED_HEADERS, SecretRefError, secret_references};

pub const TOOL_KEYS: &[&str] = &[
    "name",
    "description",
    "type",
    "base_url",
    "endpoint",
    "method",
    "query",
    "body",
    "output_map",
    "timeout_ms",
    "command",
    "url",
    "tool",
    "input",
    "output",
    "headers",
    "env",
    "egress",
];

pub const TOOL_SECTIONS: &[&str] = &["Implementation", "Interface"];

/// The bullet keys of seed 002's WeatherTool and their siblings.
const BULLETS: &[&str] = &[
    "Base URL",
    "Endpoint",
    "Method",
    "Required Query Param",
    "Optional Query Param",
    "Required Body Field",
    "Optional Body Field",
    "Returns JSON with fields",
    "Accepts JSON with fields",
    "Command",
    "MCP Command",
    "MCP URL",
    "Header",
    "Env",
    "Egress",
];

/// Everything said about the tool, from bullets and frontmatter alike.
#[derive(Debug, Default)]
struct Spec {
    kind: Option<S<String>>,
    base_url: Option<S<String>>,
    endpoint: Option<S<String>>,
    method: Option<S<String>>,
    query: Vec<(S<String>, bool)>,
    body: Vec<(S<String>, bool)>,
    output_map: Vec<(String, S<String>)>,
    timeout_ms: Option<u64>,
    command: Option<S<Vec<String>>>,
    url: Option<S<String>>,
    mcp_tool: Option<S<String>>,
    input: Option<Vec<(String, String)>>,
    output: Option<Vec<(String, String)>>,
    /// `- Header: Name: value` / `headers:` (HTTP tools).
    headers: Vec<(S<String>, S<String>)>,
    /// `- Env: NAME=value` / `env:` (command tools).
    env: Vec<(S<String>, S<String>)>,
    /// `- Egress: host[:port]` / `egress:`.
    egress: Vec<S<String>>,
}

pub fn read(
    file: &str,
    stem: &str,
    text: &str,
    diags: &mut Diags,
    assist: Option<&dyn Assist>,
) -> Option<RawTool> {
    let mut cx = Cx { file, diags };
    let doc = match markdown::parse(text) {
        Ok(d) => d,
        Err((pos, m)) => {
            cx.err(pos, m);
            return None;
        }
    };
    let mut name = S::new(stem.to_owned(), Pos::start());
    if let Some(t) = &doc.title {
        let (_, n) = strip_name_prefix(&t.text);
        let off = t.text.find(n).unwrap_or(0);
        name = S::new(
            n.to_owned(),
            Pos::new(t.pos.line, t.pos.col + chars(&t.text[..off])),
        );
    }
    let mut spec = Spec::default();
    let mut description: Vec<String> = Vec::new();
    if let Some((fm, first)) = &doc.frontmatter {
        match yaml::parse(fm, *first) {
            Err((pos, m)) => cx.err(pos, m),
            Ok(None) => {}
            Ok(Some(node)) => {
                let node = crate::agency::unwrap_agency_key(&node);
                apply_fields(
                    &mut cx,
                    &node,
                    &mut spec,
                    &mut name,
                    &mut description,
                    "a .tool file's frontmatter",
                );
            }
        }
    }
    if let Err(m) = check_name("tool", &name.v) {
        cx.err(name.pos, m.to_string());
    }
    bullets(&mut cx, &doc.preamble, &mut spec, &mut description);
    for s in &doc.sections {
        match TOOL_SECTIONS
            .iter()
            .find(|k| k.eq_ignore_ascii_case(&s.heading))
            .copied()
        {
            Some("Interface") => bullets(&mut cx, &s.lines, &mut spec, &mut description),
            Some(_) => {
                description.push(format!("{}:", s.heading));
                description.extend(s.lines.iter().map(|l| l.text.clone()));
            }
            None => {
                if let Some(near) = closest(&s.heading, TOOL_SECTIONS.iter().copied()) {
                    cx.err(
                        s.pos,
                        format!("unknown section `{}`; did you mean `{near}`?", s.heading),
                    );
                } else {
                    cx.warn(s.pos, format!("section `{}` is not one Agency reads (Implementation, Interface); its text is kept as the description", s.heading));
                    description.push(format!("{}:", s.heading));
                    description.extend(s.lines.iter().map(|l| l.text.clone()));
                }
            }
        }
    }
    if spec_is_empty(&spec)
        && let Some(assist) = assist
    {
        let req = AssistRequest {
            file: file.to_owned(),
            kind: EntityKind::Tool,
            heading: String::new(),
            text: doc.body.clone(),
            schema: crate::schema::tool_fields(),
        };
        match assist.place(&req) {
            Ok(answer) => {
                let at = name.pos;
                let mut ignored = name.clone();
                apply_fields(
                    &mut cx,
                    &Node::from_json(&answer, at),
                    &mut spec,
                    &mut ignored,
                    &mut Vec::new(),
                    "the --assist answer for this tool",
                );
                cx.warn(
                    at,
                    format!(
                        "the implementation of tool `{}` was placed by --assist: {answer}",
                        name.v
                    ),
                );
            }
            Err(e) => cx.warn(
                name.pos,
                format!("--assist could not place tool `{}`: {e}", name.v),
            ),
        }
    }
    let mut implementation = implementation(&mut cx, &name, &mut spec);
    let egress = crate::tool_access::egress(&mut cx, &spec.egress);
    crate::tool_access::secrets(
        &mut cx,
        &name,
        &spec.headers,
        &spec.env,
        &mut implementation,
    );
    Some(RawTool {
        file: file.to_owned(),
        name,
        description: description.join("\n"),
        implementation,
        input: spec.input,
        output: spec.output,
        egress,
    })
}

fn spec_is_empty(s: &Spec) -> bool {
    s.kind.is_none()
        && s.base_url.is_none()
        && s.endpoint.is_none()
        && s.command.is_none()
        && s.url.is_none()
}

fn apply_fields(
    cx: &mut Cx,
    node: &Node,
    spec: &mut Spec,
    name: &mut S<String>,
    description: &mut Vec<String>,
    ns: &str,
) {
    let Some(entries) = cx.map(node, "the frontmatter") else {
        return;
    };
    for (key, v) in cx.known_entries(entries, TOOL_KEYS, ns) {
        match key {
            "name" => {
                if let Some(n) = cx.string(v, "name") {
                    *name = n;
                }
            }
            "description" => description.extend(cx.string(v, "description").map(|s| s.v)),
            "type" => spec.kind = cx.string(v, "type"),
            "base_url" => spec.base_url = cx.string(v, "base_url"),
            "endpoint" => spec.endpoint = cx.string(v, "endpoint"),
            "method" => spec.method = cx.string(v, "method"),
            "query" => spec.query.extend(
                cx.string_list(v, "query")
                    .unwrap_or_default()
                    .into_iter()
                    .map(|q| (q, true)),
            ),
            "body" => spec.body.extend(
                cx.string_list(v, "body")
                    .unwrap_or_default()
                    .into_iter()
                    .map(|q| (q, true)),
            ),
            "output_map" => {
                if let Some(entries) = cx.map(v, "`output_map`") {
                    for (k, p) in entries {
                        if let Some(p) = cx.string(p, "output_map") {
                            spec.output_map
                                .push((k.scalar_text().unwrap_or_default().to_owned(), p));
                        }
                    }
                }
            }
            "timeout_ms" => match v.to_json().as_u64() {
                Some(n) if (1..=600_000).contains(&n) => spec.timeout_ms = Some(n),
                _ => cx.err(
                    v.pos,
                    "`timeout_ms` must be a whole number of milliseconds from 1 to 600000",
                ),
            },
            "command" => {
                let parts = match &v.kind {
                    crate::node::NodeKind::Seq(_) => cx
                        .string_list(v, "command")
                        .map(|l| l.into_iter().map(|s| s.v).collect()),
                    _ => cx
                        .string(v, "command")
                        .map(|s| s.v.split_whitespace().map(str::to_owned).collect()),
                };
                spec.command = parts.map(|p| S::new(p, v.pos));
            }
            "url" => spec.url = cx.string(v, "url"),
            "tool" => spec.mcp_tool = cx.string(v, "tool"),
            "input" => spec.input = cx.format_map(v, "input"),
            "headers" | "env" => {
                let what = format!("`{key}`");
                for (k, val) in cx.map(v, &what).unwrap_or_default() {
                    let Some(val) = cx.string(val, key) else {
                        continue;
                    };
                    let k = S::new(k.scalar_text().unwrap_or_default().to_owned(), k.pos);
                    if key == "headers" {
                        spec.headers.push((k, val));
                    } else {
                        spec.env.push((k, val));
                    }
                }
            }
            "egress" => spec
                .egress
                .extend(cx.string_list(v, "egress").unwrap_or_default()),
            _ => spec.output = cx.format_map(v, "output"),
        }
    }
}

/// `- Key: value` bullets; other lines (and bullets that are not `Key:
/// value`) are description.
fn bullets(cx: &mut Cx, ls: &[Line], spec: &mut Spec, description: &mut Vec<String>) {
    for l in ls {
        let Some((item, off)) = list_item(&l.text) else {
            description.push(l.text.clone());
            continue;
        };
        let Some((key, value)) = item.split_once(':') else {
            description.push(l.text.clone());
            continue;
        };
        let value_off = off
            + chars(&item[..key.len() + 1])
            + chars(&value[..value.len() - value.trim_start().len()]);
        let vpos = Pos::new(l.pos.line, l.pos.col + value_off);
        let kpos = Pos::new(l.pos.line, l.pos.col + off);
        let value = value.trim();
        let k = key.trim().trim_end_matches('s');
        let Some(known) = BULLETS
            .iter()
            .find(|b| b.trim_end_matches('s').eq_ignore_ascii_case(k))
            .copied()
        else {
            if key.split_whitespace().count() <= 5 {
                let hint = did_you_mean(key.trim(), BULLETS.iter().copied());
                if !hint.is_empty() {
                    cx.err(kpos, format!("unknown tool detail `{}`{hint}", key.trim()));
                    continue;
                }
            }
            description.push(l.text.clone());
            continue;
        };
        let sv = S::new(value.to_owned(), vpos);
        let params = |v: &str| -> Vec<S<String>> {
            v.split(',')
                .map(str::trim)
                .filter(|p| !p.is_empty())
                .map(|p| S::new(p.trim_matches('`').to_owned(), vpos))
                .collect()
        };
        match known {
            "Base URL" => spec.base_url = Some(sv),
            "Endpoint" => spec.endpoint = Some(sv),
            "Method" => spec.method = Some(sv),
            "Required Query Param" => spec
                .query
                .extend(params(value).into_iter().map(|p| (p, true))),
            "Optional Query Param" => spec
                .query
                .extend(params(value).into_iter().map(|p| (p, false))),
            "Required Body Field" => spec
                .body
                .extend(params(value).into_iter().map(|p| (p, true))),
            "Optional Body Field" => spec
                .body
                .extend(params(value).into_iter().map(|p| (p, false))),
            "Returns JSON with fields" | "Accepts JSON with fields" => match fields(value) {
                Ok(f) if known.starts_with("Returns") => spec.output = Some(f),
                Ok(f) => spec.input = Some(f),
                Err(m) => cx.err(vpos, m.to_string()),
            },
            "Command" => {
                spec.command = Some(S::new(
                    value.split_whitespace().map(str::to_owned).collect(),
                    vpos,
                ))
            }
            "Header" => match key_value(value, ':', vpos) {
                Some(pair) => spec.headers.push(pair),
                None => cx.err(
                    vpos,
                    format!("header `{value}` is not `Name: value` (e.g. `- Header: X-Api-Key: ${{secret:weather}}`)"),
                ),
            },
            "Env" => match key_value(value, '=', vpos) {
                Some(pair) => spec.env.push(pair),
                None => cx.err(
                    vpos,
                    format!("environment variable `{value}` is not `NAME=value` (e.g. `- Env: API_TOKEN=${{secret:token}}`)"),
                ),
            },
            "Egress" => spec.egress.extend(params(value)),
            "MCP Command" => {
                spec.kind = Some(S::new("mcp".into(), kpos));
                spec.command = Some(S::new(
                    value.split_whitespace().map(str::to_owned).collect(),
                    vpos,
                ));
            }
            _ => {
                spec.kind = Some(S::new("mcp".into(), kpos));
                spec.url = Some(sv);
            }
        }
    }
}

/// `NAME<sep>value` of a `- Header:` or `- Env:` bullet, both trimmed, the
/// value's position pointing at its first character (diagnostics name it).
fn key_value(value: &str, sep: char, vpos: Pos) -> Option<(S<String>, S<String>)> {
    let (k, v) = value.split_once(sep)?;
    let v_off = chars(&value[..k.len() + 1]) + chars(&v[..v.len() - v.trim_start().len()]);
    Some((
        S::new(k.trim().to_owned(), vpos),
        S::new(v.trim().to_owned(), Pos::new(vpos.line, vpos.col + v_off)),
    ))
}

/// Why a `{ "name": type, … }` list of fields is refused; quotes the part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FieldsError {
    #[error("expected fields as `{{ \"name\": type, … }}`, found `{0}`")]
    NotBraced(String),
    #[error("field `{0}` is not `\"name\": type`")]
    NotNameType(String),
    #[error("field `{0}` has no name")]
    NoName(String),
    #[error(transparent)]
    Type(#[from] UnknownType),
    #[error("field `{0}` is given twice")]
    Twice(String),
}

/// `{ "temp": number, "conditions": string }` → fields with types.
pub fn fields(text: &str) -> Result<Vec<(String, String)>, FieldsError> {
    let inner = text
        .trim()
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .ok_or_else(|| FieldsError::NotBraced(text.to_owned()))?;
    let mut out: Vec<(String, String)> = Vec::new();
    for part in inner.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, t) = part
            .split_once(':')
            .ok_or_else(|| FieldsError::NotNameType(part.to_owned()))?;
        let k = k.trim().trim_matches('"').trim_matches('\'').to_owned();
        let t = t.trim().trim_matches('"').to_owned();
        if k.is_empty() {
            return Err(FieldsError::NoName(part.to_owned()));
        }
        check_type(&t)?;
        if out.iter().any(|(f, _)| *f == k) {
            return Err(FieldsError::Twice(k));
        }
        out.push((k, t));
    }
    Ok(out)
}

/// Decide the implementation; every missing piece is named.
fn implementation(cx: &mut Cx, name: &S<String>, spec: &mut Spec) -> Option<ToolImplementation> {
    let timeout_ms = spec.timeout_ms.unwrap_or_else(default_tool_timeout_ms);
    let kind = match &spec.kind {
        Some(k) => k.v.to_lowercase(),
        None if spec.base_url.is_some() || spec.endpoint.is_some() => "http".into(),
        None if spec.command.is_some() => "command".into(),
        None => {
            cx.err(name.pos, format!("tool `{}` has no implementation: give `- Base URL:` and `- Endpoint:` (an HTTP API), `- Command:` (a program reading JSON on stdin), `- MCP Command:`/`- MCP URL:`, or frontmatter `type:`", name.v));
            return None;
        }
    };
    match kind.as_str() {
        "http" => http(cx, name, spec, timeout_ms),
        "command" => match &spec.command {
            Some(c) if !c.v.is_empty() => Some(ToolImplementation::Command(CommandTool {
                command: c.v.clone(),
                timeout_ms,
                env: std::collections::BTreeMap::new(),
                dir: None,
            })),
            _ => {
                cx.err(
                    name.pos,
                    format!("command tool `{}` has no `command`", name.v),
                );
                None
            }
        },
        "mcp" => {
            let command = spec
                .command
                .as_ref()
                .map(|c| c.v.clone())
                .filter(|c| !c.is_empty());
            let url = spec.url.as_ref().map(|u| u.v.clone());
            if command.is_some() == url.is_some() {
                cx.err(
                    name.pos,
                    format!(
                        "MCP tool `{}` needs exactly one of `command` and `url`",
                        name.v
                    ),
                );
                return None;
            }
            Some(ToolImplementation::Mcp(McpTool {
                command,
                url,
                tool: spec.mcp_tool.as_ref().map(|t| t.v.clone()),
                timeout_ms,
            }))
        }
        other => {
            let at = spec.kind.as_ref().map_or(name.pos, |k| k.pos);
            let hint = did_you_mean(other, ["http", "command", "mcp"]);
            cx.err(
                at,
                format!("unknown tool type `{other}`: expected http, command or mcp{hint}"),
            );
            None
        }
    }
}

fn http(
    cx: &mut Cx,
    name: &S<String>,
    spec: &mut Spec,
    timeout_ms: u64,
) -> Option<ToolImplementation> {
    let mut missing = Vec::new();
    if spec.base_url.is_none() {
        missing.push("`- Base URL:` (or `base_url`)");
    }
    if spec.endpoint.is_none() {
        missing.push("`- Endpoint:` (or `endpoint`)");
    }
    let mut ok = missing.is_empty();
    if !ok {
        cx.err(
            name.pos,
            format!(
                "HTTP tool `{}` has no implementation: missing {}",
                name.v,
                missing.join(" and ")
            ),
        );
    }
    let base_url = spec
        .base_url
        .as_ref()
        .map(|b| b.v.trim_end_matches('/').to_owned())
        .unwrap_or_default();
    if let Some(base) = &spec.base_url {
        let rest = base_url
            .strip_prefix("https://")
            .or_else(|| base_url.strip_prefix("http://"));
        if !rest.is_some_and(|r| !r.is_empty() && !r.contains(['/', '?', '#', ' ', '@'])) {
            cx.err(base.pos, format!("bad base URL `{}`: expected http(s)://HOST[:PORT] with no path (the path goes in the endpoint)", base.v));
            ok = false;
        }
    }
    let endpoint = spec
        .endpoint
        .clone()
        .unwrap_or_else(|| S::new(String::new(), name.pos));
    if spec.endpoint.is_some() && (!endpoint.v.starts_with('/') || endpoint.v.contains([' ', '#']))
    {
        cx.err(
            endpoint.pos,
            format!(
                "bad endpoint `{}`: expected a path starting with `/`",
                endpoint.v
            ),
        );
        ok = false;
    }
    let method = spec
        .method
        .as_ref()
        .map_or_else(|| "GET".to_owned(), |m| m.v.to_uppercase());
    if !matches!(method.as_str(), "GET" | "POST") {
        let at = spec.method.as_ref().map_or(name.pos, |m| m.pos);
        cx.err(
            at,
            format!("unsupported HTTP method `{method}`: expected GET or POST"),
        );
        ok = false;
    }
    if method == "GET" && !spec.body.is_empty() {
        cx.err(spec.body[0].0.pos, "body fields need `Method: POST`");
        ok = false;
    }
    // Every parameter is an input field: declared ones must match, the
    // others are added as strings (optional ones with `?`).
    let declared = spec.input.is_some();
    let mut input = spec.input.clone().unwrap_or_default();
    let path_params: Vec<String> = endpoint
        .v
        .split('{')
        .skip(1)
        .filter_map(|p| p.split_once('}').map(|(n, _)| n.to_owned()))
        .collect();
    let params = spec
        .query
        .iter()
        .chain(spec.body.iter())
        .map(|(p, req)| (p.v.clone(), *req, p.pos));
    for (p, required, pos) in params.chain(path_params.into_iter().map(|p| (p, true, endpoint.pos)))
    {
        if input
            .iter()
            .any(|(f, _)| f == &p || f.strip_suffix('?') == Some(&p))
        {
            continue;
        }
        if declared {
            cx.err(
                pos,
                format!("parameter `{p}` is not a field of the tool's declared input"),
            );
            ok = false;
        } else {
            input.push((
                p,
                if required {
                    "string".into()
                } else {
                    "string?".into()
                },
            ));
        }
    }
    spec.input = Some(input);
    let mut output = std::collections::BTreeMap::new();
    for (field, ptr) in &spec.output_map {
        if !(ptr.v.is_empty() || ptr.v.starts_with('/')) {
            cx.err(
                ptr.pos,
                format!("`output_map.{field}` must be a JSON pointer such as `/main/temp`"),
            );
            ok = false;
        }
        output.insert(field.clone(), ptr.v.clone());
    }
    ok.then(|| {
        ToolImplementation::Http(HttpTool {
            base_url,
            endpoint: endpoint.v,
            method,
            query: spec.query.iter().map(|(p, _)| p.v.clone()).collect(),
            body: spec.body.iter().map(|(p, _)| p.v.clone()).collect(),
            output,
            headers: std::collections::BTreeMap::new(),
            timeout_ms,
        })
    })
}
