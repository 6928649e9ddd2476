//! The tool-call policy: classify a call an agent is
//! about to make as allow, deny or ask, before it runs.
//!
//! The policy is the user's `policy.toml` (ordered rules, first match wins)
//! followed by the built-in defaults (`defaults.rs`: the SafetyGuard
//! patterns of seed 001, writes through extra MCP tools not annotated as
//! read-only, pushes to a repo). It is a tripwire, not a wall: the sandbox
//! is what confines an agent; this asks the user before the calls that a
//! sandboxed agent could still do damage with (its workspace, its pushes,
//! its MCP servers' side effects) and refuses the ones no task needs.
//!
//! Tool names are namespaced: built-in runtime tools by their name (`bash`,
//! `write_file`, …), Claude Code's tools as `claude:Bash`, `claude:Write`…,
//! extra MCP server tools as `mcp:SERVER/TOOL`, an organisation's tools as
//! `tool:NAME`, and `repo_push`. A rule naming none of them (without a
//! glob) is refused when the policy is loaded (`names.rs`).
//!
//! ```toml
//! defaults = true          # the built-in rules apply after these (default true)
//! unmatched = "allow"      # verdict when nothing matched (default "allow")
//!
//! [[rule]]
//! tool = "bash"            # glob on the tool name (`*` any run of characters)
//! command = '^make( |$)'   # regex on each simple command of a shell call
//! verdict = "allow"
//! reason = "make is how we build"
//!
//! [[rule]]
//! tool = "mcp:mail/*"
//! args = '"to":"[^"]*@example\.com"'   # regex on the canonical JSON arguments
//! verdict = "ask"
//! reason = "mail leaves the house"
//! ```
//!
//! Matchers: `command` (regex, shell tools: each simple command with its
//! program as a base name and words joined by one space, and the whole
//! line), `path` (glob on each path argument, made absolute against the
//! workspace; `*` stays in one component, `**` crosses them), `args` (regex
//! on the arguments as canonical JSON), `read_only` (the tool's
//! annotation). A rule matches when its tool glob and all its matchers do.

mod defaults;
mod names;
pub mod plan;
pub mod shell;

pub use names::ToolNames;

use std::path::{Component, Path, PathBuf};

use regex::Regex;
use serde::Deserialize;
use serde_json::Value;

/// The id of an approval request (a small integer, easy to type in
/// `agency approve 12`; knowing it gives an agent nothing, since only the
/// user decides and an approval only ever serves the handler that asked).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct ApprovalId(pub i64);

impl std::fmt::Display for ApprovalId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl std::str::FromStr for ApprovalId {
    type Err = std::num::ParseIntError;
    fn from_str(s: &str) -> Result<ApprovalId, Self::Err> {
        s.trim().trim_start_matches('#').parse().map(ApprovalId)
    }
}

/// What the policy says about one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verdict {
    Allow,
    Ask,
    Deny,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allow => "allow",
            Verdict::Ask => "ask",
            Verdict::Deny => "deny",
        }
    }
}

/// A verdict and why (the reason is shown to the agent and the user).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub verdict: Verdict,
    pub reason: String,
}

impl Decision {
    pub fn allow() -> Decision {
        Decision {
            verdict: Verdict::Allow,
            reason: String::new(),
        }
    }
    pub fn ask(reason: impl Into<String>) -> Decision {
        Decision {
            verdict: Verdict::Ask,
            reason: reason.into(),
        }
    }
    pub fn deny(reason: impl Into<String>) -> Decision {
        Decision {
            verdict: Verdict::Deny,
            reason: reason.into(),
        }
    }
}

/// The call to classify.
#[derive(Debug, Clone, Copy)]
pub struct ToolCall<'a> {
    /// Namespaced tool name (see the module doc).
    pub tool: &'a str,
    pub args: &'a Value,
    /// The agent's workspace; relative paths are resolved against it and
    /// paths outside it are flagged. `None`: every absolute path counts as
    /// outside.
    pub workspace: Option<&'a Path>,
    /// The tool's read-only annotation, when it has one (extra MCP tools).
    pub read_only: Option<bool>,
}

/// A `policy.toml` that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct PolicyError {
    /// 1-based line of the problem.
    pub line: usize,
    pub message: String,
}

/// The policy: user rules, then (unless turned off) the defaults.
#[derive(Debug, Clone)]
pub struct Policy {
    rules: Vec<Rule>,
    defaults: bool,
    unmatched: Verdict,
}

impl Default for Policy {
    /// The documented defaults, as used when the home has no `policy.toml`.
    fn default() -> Policy {
        Policy {
            rules: Vec::new(),
            defaults: true,
            unmatched: Verdict::Allow,
        }
    }
}

#[derive(Debug, Clone)]
struct Rule {
    tool: String,
    /// The line of its `tool = …`, for [`Policy::check_tool_names`].
    tool_line: usize,
    command: Option<Regex>,
    path: Option<String>,
    args: Option<Regex>,
    read_only: Option<bool>,
    verdict: Verdict,
    reason: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    defaults: Option<bool>,
    unmatched: Option<toml::Spanned<String>>,
    #[serde(default)]
    rule: Vec<toml::Spanned<FileRule>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileRule {
    tool: toml::Spanned<String>,
    command: Option<toml::Spanned<String>>,
    path: Option<toml::Spanned<String>>,
    args: Option<toml::Spanned<String>>,
    read_only: Option<bool>,
    verdict: toml::Spanned<String>,
    reason: Option<String>,
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

fn parse_verdict(text: &str, v: &toml::Spanned<String>) -> Result<Verdict, PolicyError> {
    match v.get_ref().as_str() {
        "allow" => Ok(Verdict::Allow),
        "ask" => Ok(Verdict::Ask),
        "deny" => Ok(Verdict::Deny),
        other => Err(PolicyError {
            line: line_of(text, v.span().start),
            message: format!("unknown verdict {other:?}; use \"allow\", \"ask\" or \"deny\""),
        }),
    }
}

fn parse_regex(text: &str, what: &str, v: &toml::Spanned<String>) -> Result<Regex, PolicyError> {
    Regex::new(v.get_ref()).map_err(|e| PolicyError {
        line: line_of(text, v.span().start),
        message: format!("the {what} regex does not compile: {e}"),
    })
}

impl Policy {
    /// Parse a `policy.toml` (format in the module doc). Every error names
    /// its line.
    pub fn from_toml(text: &str) -> Result<Policy, PolicyError> {
        let doc: FileDoc = toml::from_str(text).map_err(|e| PolicyError {
            line: e.span().map(|s| line_of(text, s.start)).unwrap_or(1),
            message: e.message().trim().to_string(),
        })?;
        let unmatched = match &doc.unmatched {
            Some(v) => parse_verdict(text, v)?,
            None => Verdict::Allow,
        };
        let mut rules = Vec::new();
        for r in doc.rule {
            let line = line_of(text, r.span().start);
            let r = r.into_inner();
            if r.tool.get_ref().is_empty() {
                return Err(PolicyError {
                    line,
                    message: "a rule's tool pattern is empty; use \"*\" for every tool".into(),
                });
            }
            if let Some(p) = &r.path
                && !p.get_ref().starts_with('/')
                && !p.get_ref().starts_with('*')
            {
                return Err(PolicyError {
                    line: line_of(text, p.span().start),
                    message: format!(
                        "the path glob {:?} is relative; start it with / or ** (paths are matched made absolute)",
                        p.get_ref()
                    ),
                });
            }
            let verdict = parse_verdict(text, &r.verdict)?;
            rules.push(Rule {
                tool_line: line_of(text, r.tool.span().start),
                tool: r.tool.into_inner(),
                command: r
                    .command
                    .as_ref()
                    .map(|c| parse_regex(text, "command", c))
                    .transpose()?,
                path: r.path.map(|p| p.into_inner()),
                args: r
                    .args
                    .as_ref()
                    .map(|c| parse_regex(text, "args", c))
                    .transpose()?,
                read_only: r.read_only,
                reason: r
                    .reason
                    .unwrap_or_else(|| format!("policy.toml rule at line {line}")),
                verdict,
            });
        }
        Ok(Policy {
            rules,
            defaults: doc.defaults.unwrap_or(true),
            unmatched,
        })
    }

    /// Classify one call: the first user rule that matches decides; else
    /// the defaults (the most severe finding wins); else `unmatched`.
    pub fn classify(&self, call: &ToolCall<'_>) -> Decision {
        let facts = Facts::of(call);
        for r in &self.rules {
            if r.matches(call, &facts) {
                return Decision {
                    verdict: r.verdict,
                    reason: r.reason.clone(),
                };
            }
        }
        if self.defaults
            && let Some(d) = defaults::classify(call, &facts)
        {
            return d;
        }
        Decision {
            verdict: self.unmatched,
            reason: match self.unmatched {
                Verdict::Allow => String::new(),
                _ => "no policy rule matched this call".into(),
            },
        }
    }
}

/// What the matchers look at, computed once per call.
#[derive(Debug)]
pub(crate) struct Facts {
    /// The shell command line, for shell tools.
    pub command: Option<String>,
    /// Path arguments made absolute (lexically) against the workspace.
    pub paths: Vec<PathBuf>,
    pub canonical_args: String,
}

/// Tools whose `command` argument is a shell command line.
pub fn is_shell_tool(tool: &str) -> bool {
    matches!(tool, "bash" | "claude:Bash")
}

/// Argument names that hold a path, for every tool.
const PATH_KEYS: &[&str] = &["path", "file_path", "notebook_path"];

impl Facts {
    fn of(call: &ToolCall<'_>) -> Facts {
        let command = if is_shell_tool(call.tool) {
            Some(
                call.args
                    .get("command")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            )
        } else {
            None
        };
        let mut paths = Vec::new();
        if let Value::Object(m) = call.args {
            for k in PATH_KEYS {
                if let Some(Value::String(p)) = m.get(*k) {
                    paths.push(absolute(p, call.workspace));
                }
            }
        }
        Facts {
            command,
            paths,
            canonical_args: canonical_json(call.args),
        }
    }
}

/// `p` made absolute against the workspace and normalised without touching
/// the file system (`.` dropped, `..` pops; `~` kept as a leading `~`).
pub fn absolute(p: &str, workspace: Option<&Path>) -> PathBuf {
    let path = Path::new(p);
    let joined = if path.is_absolute() || p.starts_with('~') || p.starts_with('$') {
        path.to_path_buf()
    } else {
        match workspace {
            Some(w) => w.join(path),
            None => path.to_path_buf(),
        }
    };
    normalize(&joined)
}

/// Lexical normalisation: `.` dropped, `..` pops (never above `/`).
pub fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() || out.as_os_str().is_empty() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// Whether `p` (already absolute and normalised) lies inside the workspace.
pub fn inside(p: &Path, workspace: Option<&Path>) -> bool {
    match workspace {
        Some(w) => p.starts_with(normalize(w)),
        None => false,
    }
}

/// JSON with object keys sorted and no whitespace: the same arguments give
/// the same text (and the same hash) whatever order the caller wrote them in.
pub fn canonical_json(v: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                let mut out = serde_json::Map::new();
                for k in keys {
                    out.insert(k.clone(), sorted(&m[k]));
                }
                Value::Object(out)
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    // serde_json's Map keeps insertion order only with `preserve_order`;
    // without it (our build) it is a BTreeMap, sorted either way.
    serde_json::to_string(&sorted(v)).unwrap_or_default()
}

impl Rule {
    fn matches(&self, call: &ToolCall<'_>, facts: &Facts) -> bool {
        if !glob_match(&self.tool, call.tool, false) {
            return false;
        }
        if let Some(ro) = self.read_only
            && call.read_only != Some(ro)
        {
            return false;
        }
        if let Some(re) = &self.command {
            let Some(line) = &facts.command else {
                return false;
            };
            let mut hit = re.is_match(line);
            if !hit && let Ok(pipelines) = shell::split_all(line) {
                hit = pipelines
                    .iter()
                    .flatten()
                    .any(|c| re.is_match(&defaults::normalized_command(c)));
            }
            if !hit {
                return false;
            }
        }
        if let Some(g) = &self.path
            && !facts
                .paths
                .iter()
                .any(|p| glob_match(g, &p.to_string_lossy(), true))
        {
            return false;
        }
        if let Some(re) = &self.args
            && !re.is_match(&facts.canonical_args)
        {
            return false;
        }
        true
    }
}

/// Glob match: `?` one character, `*` any run (within one `/` component
/// when `paths`), `**` any run including `/`.
pub fn glob_match(pattern: &str, text: &str, paths: bool) -> bool {
    fn go(p: &[char], t: &[char], paths: bool) -> bool {
        match p.first() {
            None => t.is_empty(),
            Some('*') => {
                let double = p.get(1) == Some(&'*');
                let rest = if double { &p[2..] } else { &p[1..] };
                let crosses = double || !paths;
                for i in 0..=t.len() {
                    if go(rest, &t[i..], paths) {
                        return true;
                    }
                    if i < t.len() && !crosses && t[i] == '/' {
                        return false;
                    }
                }
                false
            }
            Some('?') => !t.is_empty() && (!paths || t[0] != '/') && go(&p[1..], &t[1..], paths),
            Some(c) => t.first() == Some(c) && go(&p[1..], &t[1..], paths),
        }
    }
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    go(&p, &t, paths)
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
