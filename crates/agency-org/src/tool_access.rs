//! What a `.tool` file says about its access: its request headers (HTTP
//! tools) and environment variables (command tools), whose values may
//! reference the home's secrets as `${secret:NAME}`, and the egress it
//! needs (`- Egress: HOST[:PORT]`), checked here; the reader (`tool.rs`)
//! collects them.

use crate::fields::Cx;
use crate::model::ToolImplementation;
use crate::raw::S;

/// Headers (HTTP tools) and environment variables (command tools), checked
/// and put into the implementation. A value may hold literal text and
/// `${secret:NAME}` references to the home's `[secrets]` (whether NAME is
/// declared is `agency up`'s check: the compiler knows no home).
pub(crate) fn secrets(
    cx: &mut Cx,
    name: &S<String>,
    header_list: &[(S<String>, S<String>)],
    env_list: &[(S<String>, S<String>)],
    imp: &mut Option<ToolImplementation>,
) {
    let mut headers = std::collections::BTreeMap::new();
    for (k, v) in header_list {
        let ok_name = !k.v.is_empty()
            && k.v
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !ok_name {
            cx.err(k.pos, format!("header name `{}` is not a header name (letters, digits and `-`, e.g. `X-Api-Key`)", k.v));
            continue;
        }
        if RESERVED_HEADERS
            .iter()
            .any(|r| r.eq_ignore_ascii_case(&k.v))
        {
            cx.err(
                k.pos,
                format!("header `{}` is set by the daemon and cannot be given", k.v),
            );
            continue;
        }
        if check_value(cx, &format!("header `{}`", k.v), v)
            && headers
                .insert(k.v.to_ascii_lowercase(), (k.v.clone(), v.v.clone()))
                .is_some()
        {
            cx.err(k.pos, format!("header `{}` is given twice", k.v));
        }
    }
    let mut env = std::collections::BTreeMap::new();
    for (k, v) in env_list {
        let ok_name =
            k.v.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && k.v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ok_name {
            cx.err(k.pos, format!("environment variable name `{}` is not a name (letters, digits and `_`, not starting with a digit)", k.v));
            continue;
        }
        if RESERVED_ENV.contains(&k.v.as_str()) || k.v.starts_with("AGENCY_") {
            cx.err(k.pos, format!("environment variable `{}` is set by the daemon for every tool and cannot be given", k.v));
            continue;
        }
        if check_value(cx, &format!("environment variable `{}`", k.v), v)
            && env.insert(k.v.clone(), v.v.clone()).is_some()
        {
            cx.err(
                k.pos,
                format!("environment variable `{}` is given twice", k.v),
            );
        }
    }
    match imp {
        Some(ToolImplementation::Http(h)) => {
            h.headers = headers.into_values().collect();
        }
        Some(ToolImplementation::Command(c)) => c.env = env,
        _ => {}
    }
    let kind = match imp {
        Some(ToolImplementation::Http(_)) => "http",
        Some(ToolImplementation::Command(_)) => "command",
        Some(ToolImplementation::Mcp(_)) => "mcp",
        None => return,
    };
    if kind != "http"
        && let Some((k, _)) = header_list.first()
    {
        cx.err(k.pos, format!("tool `{}` is not an HTTP tool: headers are for HTTP tools (a command tool takes `- Env: NAME=value`)", name.v));
    }
    if kind != "command"
        && let Some((k, _)) = env_list.first()
    {
        cx.err(k.pos, format!("tool `{}` is not a command tool: environment variables are for command tools (an HTTP tool takes `- Header: Name: value`)", name.v));
    }
}

/// A header's or variable's value: one line, well-formed references.
fn check_value(cx: &mut Cx, what: &str, v: &S<String>) -> bool {
    if v.v.chars().any(char::is_control) {
        cx.err(
            v.pos,
            format!("{what} has a control character (a line break?); give one line"),
        );
        return false;
    }
    if let Err(m) = secret_references(&v.v) {
        cx.err(v.pos, format!("{what}: {m}"));
        return false;
    }
    true
}

/// Headers the daemon's HTTP client sets (or that would change how the
/// request is framed or where it goes).
pub const RESERVED_HEADERS: &[&str] = &[
    "Host",
    "Content-Length",
    "Transfer-Encoding",
    "Connection",
    "Content-Type",
    "Accept",
    "Upgrade",
    "TE",
    "Trailer",
    "Proxy-Authorization",
];

/// Variables the daemon sets for every command tool.
pub const RESERVED_ENV: &[&str] = &[
    "HOME",
    "TMPDIR",
    "PATH",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "http_proxy",
    "https_proxy",
    "NO_PROXY",
    "no_proxy",
];

/// What is wrong with a `${secret:NAME}` reference in a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretRefError {
    #[error("a ${{secret:… reference is not closed with }}")]
    Unclosed,
    /// The text between `${secret:` and `}`, which is no secret's name.
    #[error("`${{secret:{0}}}` does not name a secret (a name of [secrets] in agency.toml)")]
    NotAName(String),
}

/// The names of the secrets `value` references as `${secret:NAME}`, or
/// what is wrong with a reference. The daemon fills them in
/// (`agency-config`'s `secrets::interpolate`, the same syntax).
pub fn secret_references(value: &str) -> Result<Vec<&str>, SecretRefError> {
    const OPEN: &str = "${secret:";
    let mut out = Vec::new();
    let mut rest = value;
    while let Some(at) = rest.find(OPEN) {
        let after = &rest[at + OPEN.len()..];
        let end = after.find('}').ok_or(SecretRefError::Unclosed)?;
        let name = &after[..end];
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c))
        {
            return Err(SecretRefError::NotAName(name.to_owned()));
        }
        out.push(name);
        rest = &after[end + 1..];
    }
    Ok(out)
}

/// `- Egress: host[:port]` patterns, checked as `agency grant` checks an
/// `egress:` capability (the compiled model carries them without the
/// `egress:` prefix).
pub(crate) fn egress(cx: &mut Cx, list: &[S<String>]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in list {
        match agency_core::egress::EgressPattern::parse(&e.v) {
            Ok(_) => {
                if !out.contains(&e.v) {
                    out.push(e.v.clone());
                }
            }
            Err(m) => cx.err(e.pos, format!("egress `{}`: {}", e.v, m.0)),
        }
    }
    out
}
