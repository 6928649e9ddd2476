//! The tools of applied organisations: a `.tool` file
//! compiles to an [`agency_org::Tool`] — an HTTP call described
//! declaratively, a command reading JSON on stdin, or an MCP server — with
//! a strict JSON interface. The store keeps each organisation's tools
//! (`org_tools`, migration 18); agents see a tool as an MCP tool of
//! Agency's server when their handler holds `tool:NAME` (Read), and the
//! daemon runs it. This module decides which tools exist and who may call
//! them; running them is the daemon's.
//!
//! Tool names are unique across every organisation (a name is all a
//! `tool:NAME` capability says), and never one of Agency's own MCP tool
//! names (the agent would see two tools of one name).

use std::collections::BTreeSet;

use agency_core::{Level, Principal, Resource, ResourceKind};
use agency_org::{Tool, ToolImplementation};
use agency_store::OrgToolRow;

use crate::Result;
use crate::error::ServiceError;
use crate::service::{Caller, Op, Service, authenticate};

/// Agency's own MCP tools (`agency-mcp`'s `TOOL_NAMES` is this list): an
/// organisation's tool may not take one of these names.
pub const AGENCY_MCP_TOOL_NAMES: &[&str] = &[
    "kb_list",
    "kb_browse",
    "kb_read",
    "kb_read_version",
    "kb_history",
    "kb_create",
    "kb_write",
    "outcome_view",
    "outcome_ancestors",
    "outcome_subtree",
    "outcome_history",
    "outcome_create",
    "outcome_update",
    "outcome_complete",
    "outcome_close",
    "outcome_request_completion",
    "outcome_reopen",
    "mail_send",
    "mail_send_deferred",
    "mail_inbox",
    "mail_ack",
    "permissions_list",
    "permissions_grant",
    "delegate",
    "force_stop",
    "state_read",
    "state_write",
    "audit_read",
    "audit_submit",
    "repo_clone",
    "mail_status",
    "kb_audit",
    "outcome_list",
    "run_list",
    "run_view",
    "events_read",
    "repo_push",
    "memory_store",
    "memory_search",
    "memory_forget",
    "memory_condense",
    "mail_wait",
    "agent_call",
    "agent_reply",
];

/// The longest a tool may run (ms): a call holds an agent's MCP request.
pub const MAX_TOOL_TIMEOUT_MS: u64 = 600_000;
/// Most tools one organisation may define.
const MAX_TOOLS: usize = 1000;
/// Largest definition accepted, as JSON bytes.
const MAX_DEF_BYTES: usize = 256 * 1024;

impl Service {
    /// The user installs organisation `org`'s tools, replacing the ones it
    /// had (see `org_tools_replace`). `agency up` does the same inside
    /// its own transaction.
    pub fn org_tools_install(&self, who: Principal, org: &str, tools: &[Tool]) -> Result<()> {
        if !who.is_user() {
            return Err(ServiceError::denied(format!(
                "failed to install the tools of organisation {org}: only the user applies organisations"
            )));
        }
        self.write(|op| org_tools_replace(op, org, tools).map(drop))
    }

    /// The tools the caller may call: for an agent, those whose `tool:NAME`
    /// its handler holds live with Read or more (a capability on a tool no
    /// organisation defines shows nothing); for the user, every tool.
    /// Ordered by name.
    pub fn org_tools_for(&self, who: Principal) -> Result<Vec<Tool>> {
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            let rows = match &caller {
                Caller::User => tx.org_tools(None)?,
                Caller::Handler { row, .. } => {
                    let held: BTreeSet<String> = tx
                        .capabilities_of_kind(row.id, ResourceKind::Tool)?
                        .into_iter()
                        .filter(|c| c.level >= Level::Read)
                        .filter_map(|c| match c.resource {
                            Resource::Tool(n) => Some(n),
                            _ => None,
                        })
                        .collect();
                    let mut rows = Vec::with_capacity(held.len());
                    for name in &held {
                        if let Some(r) = tx.org_tool(name)? {
                            rows.push(r);
                        }
                    }
                    rows
                }
            };
            rows.iter().map(parse_row).collect()
        })
    }

    /// May the caller call tool `name` now: its handler holds `tool:NAME`
    /// live with Read or more. Returns the tool's definition. Checked on
    /// every call, so a revocation stops the next one.
    pub fn org_tool_check(&self, who: Principal, name: &str) -> Result<Tool> {
        check_tool_name(name)?;
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            if let Caller::Handler { row, .. } = &caller {
                let held = tx.capabilities_on(row.id, &Resource::Tool(name.to_owned()))?;
                // Refused before looking the tool up: an agent without the
                // capability learns nothing about which tools exist.
                if !held.iter().any(|c| c.level >= Level::Read) {
                    return Err(ServiceError::denied(format!(
                        "failed to call tool {name}: your handler holds no capability on it; ask your boss to grant read on tool {name}"
                    )));
                }
            }
            let row = tx.org_tool(name)?.ok_or_else(|| {
                ServiceError::invalid(format!(
                    "failed to call tool {name}: no applied organisation defines it (it may have been removed); ask the user to apply the organisation that defines it"
                ))
            })?;
            parse_row(&row)
        })
    }
}

/// Replace organisation `org`'s tools with `tools`, inside the caller's
/// write transaction: each is checked ([`check_tool`]), a name another
/// organisation already defines is refused naming both, tools of `org` not
/// in `tools` are removed, and unchanged definitions are left as they are.
pub(crate) fn org_tools_replace(op: &mut Op<'_>, org: &str, tools: &[Tool]) -> Result<bool> {
    agency_core::validate::check_name("organisation", org)?;
    if tools.len() > MAX_TOOLS {
        return Err(ServiceError::invalid(format!(
            "failed to install the tools of organisation {org}: {} tools, at most {MAX_TOOLS}",
            tools.len()
        )));
    }
    let mut names = BTreeSet::new();
    let mut rows = Vec::with_capacity(tools.len());
    for t in tools {
        check_tool(t)?;
        if !names.insert(t.name.clone()) {
            return Err(ServiceError::invalid(format!(
                "failed to install the tools of organisation {org}: tool {} is defined twice",
                t.name
            )));
        }
        let def_json = serde_json::to_string(t)
            .map_err(|e| ServiceError::invalid(format!("failed to store tool {}: {e}", t.name)))?;
        if def_json.len() > MAX_DEF_BYTES {
            return Err(ServiceError::invalid(format!(
                "failed to install tool {}: its definition is over {MAX_DEF_BYTES} bytes",
                t.name
            )));
        }
        let def_hash = blake3::hash(def_json.as_bytes()).to_hex().to_string();
        rows.push(OrgToolRow {
            name: t.name.clone(),
            org: org.to_owned(),
            def_json,
            def_hash,
            updated_at: op.now,
        });
    }
    let mut changed = false;
    for r in &rows {
        match check_tool_owner(op.tx, org, &r.name)? {
            Some(old) if old.org == r.org && old.def_hash == r.def_hash => {}
            _ => {
                op.tx.put_org_tool(r)?;
                changed = true;
            }
        }
    }
    for old in op.tx.org_tools(Some(org))? {
        if !names.contains(&old.name) {
            op.tx.delete_org_tool(&old.name)?;
            changed = true;
        }
    }
    Ok(changed)
}

/// Refuse tool `name` for organisation `org` when another organisation
/// that is up defines it (a name is all a `tool:NAME` capability says).
/// An organisation that is down holds no names: its row, if any (kept by
/// a daemon older than the release on `agency down`), is the one returned
/// and may be taken over. Returns the current row. Shared by `agency up`
/// and `agency up --plan`, so that the plan refuses what the apply does.
pub(crate) fn check_tool_owner(
    tx: &mut dyn agency_store::Tx,
    org: &str,
    name: &str,
) -> Result<Option<OrgToolRow>> {
    let Some(old) = tx.org_tool(name)? else {
        return Ok(None);
    };
    // Tools installed without an organisation row (`org_tools_install`)
    // hold their names as an organisation that is up does.
    let released = tx.org(&old.org)?.is_some_and(|o| o.retired_at.is_some());
    if old.org != org && !released {
        return Err(ServiceError::invalid(format!(
            "failed to install tool {name} of organisation {org}: organisation {} already defines a tool of that name; rename one of them (tool names are unique across organisations), or take {} down with `agency down {}`",
            old.org, old.org, old.org
        )));
    }
    Ok(Some(old))
}

/// Release the tool names of organisation `org` (`agency down`): another
/// organisation may take them; `agency up` of `org` installs its tools
/// again.
pub(crate) fn org_tools_release(op: &mut Op<'_>, org: &str) -> Result<()> {
    for t in op.tx.org_tools(Some(org))? {
        op.tx.delete_org_tool(&t.name)?;
    }
    Ok(())
}

/// A tool name: what `tool:NAME` accepts, without `.` (Claude Code's tool
/// names, `mcp__agency__NAME`, allow letters, digits, `_` and `-` only),
/// and none of Agency's own tools.
fn check_tool_name(name: &str) -> Result<()> {
    agency_core::validate::check_name("tool", name)?;
    if name.contains('.') {
        return Err(ServiceError::invalid(format!(
            "failed to accept tool name {name:?}: use ASCII letters, digits, '_' or '-' (an MCP client may refuse other characters)"
        )));
    }
    Ok(())
}

/// Check one definition: what the daemon needs to run it is there and
/// well-formed. The schemas are compiled by the daemon at each call.
pub(crate) fn check_tool(t: &Tool) -> Result<()> {
    check_tool_name(&t.name)?;
    let bad =
        |why: String| ServiceError::invalid(format!("failed to install tool {}: {why}", t.name));
    if AGENCY_MCP_TOOL_NAMES.contains(&t.name.as_str()) {
        return Err(bad(
            "that is the name of one of Agency's own MCP tools; rename it".to_owned(),
        ));
    }
    for (what, s) in [
        ("interface.inputSchema", &t.interface.input_schema),
        ("interface.outputSchema", &t.interface.output_schema),
    ] {
        if !s.is_object() {
            return Err(bad(format!("{what} must be a JSON Schema object")));
        }
    }
    if t.interface
        .input_schema
        .get("type")
        .and_then(|v| v.as_str())
        != Some("object")
    {
        return Err(bad(
            "interface.inputSchema must have \"type\": \"object\" (MCP tool arguments are an object)"
                .to_owned(),
        ));
    }
    for e in &t.egress {
        agency_core::egress::EgressPattern::parse(e)
            .map_err(|err| bad(format!("egress {e:?}: {}", err.0)))?;
    }
    for (what, name, value) in secret_bearing(t) {
        let name_ok = !name.is_empty()
            && name.len() <= 128
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !name_ok {
            return Err(bad(format!(
                "{what} name {name:?} must be ASCII letters, digits, '_' or '-'"
            )));
        }
        let reserved = agency_org::tool::RESERVED_HEADERS
            .iter()
            .chain(agency_org::tool::RESERVED_ENV)
            .any(|r| r.eq_ignore_ascii_case(name))
            || name.starts_with("AGENCY_");
        if reserved {
            return Err(bad(format!(
                "{what} {name} is set by the daemon and cannot be given"
            )));
        }
        if value.chars().any(char::is_control) || value.len() > 8192 {
            return Err(bad(format!(
                "{what} {name}'s value must be one line of at most 8192 bytes"
            )));
        }
        agency_org::tool::secret_references(value)
            .map_err(|e| bad(format!("{what} {name}: {e}")))?;
    }
    match &t.implementation {
        ToolImplementation::Http(h) => {
            let scheme_ok = h.base_url.starts_with("http://") || h.base_url.starts_with("https://");
            if !scheme_ok
                || h.base_url
                    .chars()
                    .any(|c| c.is_whitespace() || c.is_control())
            {
                return Err(bad(format!(
                    "baseUrl {:?} must be an http:// or https:// URL",
                    h.base_url
                )));
            }
            if !h.endpoint.starts_with('/') || h.endpoint.chars().any(char::is_control) {
                return Err(bad(format!(
                    "endpoint {:?} must start with '/'",
                    h.endpoint
                )));
            }
            if !matches!(h.method.as_str(), "GET" | "POST") {
                return Err(bad(format!("method {:?} must be GET or POST", h.method)));
            }
            if h.method == "GET" && !h.body.is_empty() {
                return Err(bad("a GET call has no body fields".to_owned()));
            }
            for f in h.query.iter().chain(&h.body) {
                if !t.interface.input_format.contains_key(f) {
                    return Err(bad(format!(
                        "field {f} is sent but not in interface.inputFormat"
                    )));
                }
            }
            for (field, pointer) in &h.output {
                if !(pointer.is_empty() || pointer.starts_with('/')) {
                    return Err(bad(format!(
                        "output.{field}: {pointer:?} is not a JSON pointer (it starts with '/')"
                    )));
                }
            }
            check_timeout(t, h.timeout_ms)?;
        }
        ToolImplementation::Command(c) => {
            if c.command.is_empty() || c.command[0].is_empty() {
                return Err(bad("command must name a program".to_owned()));
            }
            if c.command.iter().any(|a| a.contains('\0')) {
                return Err(bad("command arguments may not contain NUL".to_owned()));
            }
            check_timeout(t, c.timeout_ms)?;
        }
        ToolImplementation::Mcp(m) => {
            if m.command.is_some() == m.url.is_some() {
                return Err(bad(
                    "an MCP tool has exactly one of command and url".to_owned()
                ));
            }
            if let Some(c) = &m.command {
                if c.is_empty() || c[0].is_empty() {
                    return Err(bad("command must name a program".to_owned()));
                }
                if c.iter().any(|a| a.contains('\0')) {
                    return Err(bad("command arguments may not contain NUL".to_owned()));
                }
            }
            if let Some(u) = &m.url {
                let scheme_ok = u.starts_with("http://") || u.starts_with("https://");
                if !scheme_ok || u.chars().any(|c| c.is_whitespace() || c.is_control()) {
                    return Err(bad(format!("url {u:?} must be an http:// or https:// URL")));
                }
            }
            if let Some(name) = &m.tool {
                // The name goes into a JSON-RPC request, not a shell or a
                // path; bounded and printable so errors can name it.
                if name.is_empty() || name.len() > 128 || name.chars().any(char::is_control) {
                    return Err(bad(format!(
                        "tool {name:?} must be 1 to 128 printable characters"
                    )));
                }
            }
            check_timeout(t, m.timeout_ms)?;
        }
    }
    Ok(())
}

/// The headers (HTTP) or environment variables (command) of a tool, as
/// `(what, name, value)`: the values that may reference secrets.
fn secret_bearing(t: &Tool) -> Vec<(&'static str, &str, &str)> {
    match &t.implementation {
        ToolImplementation::Http(h) => h
            .headers
            .iter()
            .map(|(k, v)| ("header", k.as_str(), v.as_str()))
            .collect(),
        ToolImplementation::Command(c) => c
            .env
            .iter()
            .map(|(k, v)| ("environment variable", k.as_str(), v.as_str()))
            .collect(),
        ToolImplementation::Mcp(_) => Vec::new(),
    }
}

/// Every secret tool `t` references is one of `declared` (`[secrets]`).
pub(crate) fn check_secrets_declared(
    t: &Tool,
    declared: &BTreeSet<String>,
) -> std::result::Result<(), String> {
    for (what, name, value) in secret_bearing(t) {
        for s in agency_org::tool::secret_references(value).unwrap_or_default() {
            if !declared.contains(s) {
                return Err(format!(
                    "tool {}'s {what} {name} references secret {s:?}, which agency.toml does not declare; add it under [secrets] (e.g. {s} = {{ file = \"secrets/{s}\" }}) and restart the daemon",
                    t.name
                ));
            }
        }
    }
    Ok(())
}

fn check_timeout(t: &Tool, ms: u64) -> Result<()> {
    if ms == 0 || ms > MAX_TOOL_TIMEOUT_MS {
        return Err(ServiceError::invalid(format!(
            "failed to install tool {}: timeoutMs must be 1 to {MAX_TOOL_TIMEOUT_MS}",
            t.name
        )));
    }
    Ok(())
}

fn parse_row(r: &OrgToolRow) -> Result<Tool> {
    serde_json::from_str(&r.def_json).map_err(|e| {
        ServiceError::invalid(format!(
            "failed to read tool {} of organisation {}: its stored definition does not parse ({e}); apply the organisation again",
            r.name, r.org
        ))
    })
}
