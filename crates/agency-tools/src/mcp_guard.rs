//! The guard between agents and extra MCP servers: every
//! decision about what an agent may see of a server and send to it is made
//! here, in the daemon, with the agent's own token. The proxy
//! (`mcp_proxy.rs`), through which every message to a server passes, calls
//! these functions:
//!
//! - `filter_tools` — a `tools/list` result: the service pins and
//!   compares every tool (`Service::mcp_tools_seen`); quarantined tools and
//!   tools the manifest does not offer are removed.
//! - `admit_call` — before a call is forwarded: offered by the manifest,
//!   pinned and not quarantined (`Service::mcp_tool_check`), arguments
//!   valid against the input schema, the tool-call policy
//!   (`admit_policy`), the rate limits. A refusal is a message for the
//!   agent, answered as a tool error.
//! - `check_result` — a call's result, checked against the output
//!   schema; a violating one is replaced by an error result.
//!
//! Whether a tool is read-only is the manifest's word, else the pinned
//! (approved) definition's `readOnlyHint`; a tool that does not say it is
//! read-only counts as not read-only (a destructive tool of a
//! server without a manifest ran without approval). Approving a
//! quarantined tool is the user's alone (REST on the admin socket,
//! `admin_routes`).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agency_core::{HandlerId, Principal};

const USER: Principal = Principal::User;
use agency_mcp::AgentIdentity;
use agency_service::PinVerdict;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::Tools;
use agency_config::mcp_manifest::{
    Compiled, ManifestError, RateLimit, violation_places, violations,
};
use agency_http::call as rest_call;
use agency_http::error;

const WINDOW: Duration = Duration::from_secs(60);

/// A tool error result: what MCP clients show the model as the call's
/// failure (rather than a protocol error, which some clients hide).
pub fn refusal_result(message: &str) -> Value {
    json!({ "content": [{ "type": "text", "text": message }], "isError": true })
}

/// The rate-limit windows, in daemon memory (a restart starts them afresh;
/// a minute's worth of calls is all they hold).
#[derive(Debug, Default)]
pub struct Guard {
    windows: Mutex<HashMap<RateKey, VecDeque<Instant>>>,
}

/// (server, tool or all tools, calling handler or all handlers).
type RateKey = (String, Option<String>, Option<HandlerId>);

impl Guard {
    /// Admit one call against every limit that applies, and count it only
    /// if all of them have room.
    fn admit_rate(
        &self,
        server: &str,
        tool: &str,
        handler: HandlerId,
        manifest: &Compiled,
    ) -> Result<(), String> {
        let mut limits: Vec<(RateKey, u32, String)> = Vec::new();
        let mut add = |r: Option<&RateLimit>, t: Option<&str>| {
            let Some(r) = r else { return };
            let scope = match t {
                Some(_) => "for this tool",
                None => "over all the server's tools",
            };
            if let Some(n) = r.per_handler {
                let key = (server.to_owned(), t.map(str::to_owned), Some(handler));
                limits.push((key, n, format!("{n} calls per minute per handler {scope}")));
            }
            if let Some(n) = r.per_server {
                let key = (server.to_owned(), t.map(str::to_owned), None);
                limits.push((
                    key,
                    n,
                    format!("{n} calls per minute by all agents {scope}"),
                ));
            }
        };
        add(manifest.manifest.rate_limit.as_ref(), None);
        add(
            manifest
                .manifest
                .tools
                .get(tool)
                .and_then(|t| t.rate_limit.as_ref()),
            Some(tool),
        );
        if limits.is_empty() {
            return Ok(());
        }
        let now = Instant::now();
        let mut windows = self
            .windows
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (key, n, what) in &limits {
            let w = windows.entry(key.clone()).or_default();
            while w.front().is_some_and(|t| now.duration_since(*t) >= WINDOW) {
                w.pop_front();
            }
            if w.len() >= *n as usize {
                return Err(format!(
                    "failed to call tool {tool} of MCP server {server}: its rate limit is reached ({what}, in the server's manifest); wait a minute before calling it again, or do without it"
                ));
            }
        }
        for (key, _, _) in limits {
            windows.entry(key).or_default().push_back(now);
        }
        Ok(())
    }
}

/// The tool-call policy, asked before a call is
/// forwarded: `Service::tool_call_admit` with tool `mcp:SERVER/TOOL`, the
/// arguments, and `read_only` (an `each_use`
/// capability, a `policy.toml` rule or the defaults may ask the user).
/// `Pending`/`Denied` become `Err` with the message for the agent, which
/// it reads as the call's tool error; the tool-call budget is charged
/// there too.
async fn admit_policy(
    st: &Tools,
    who: Principal,
    server: &str,
    tool: &str,
    args: &Value,
    read_only: Option<bool>,
) -> Result<(), String> {
    let req = agency_service::ToolCallRequest {
        tool: format!("mcp:{server}/{tool}"),
        args: args.clone(),
        read_only,
    };
    let svc = st.svc.clone();
    let span = tracing::Span::current();
    match tokio::task::spawn_blocking(move || span.in_scope(|| svc.tool_call_admit(who, req))).await
    {
        Ok(Ok(agency_service::Admission::Allow { .. })) => Ok(()),
        Ok(Ok(a)) => Err(a.message()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!(
            "failed to check the call of {tool} on MCP server {server}: the worker panicked"
        )),
    }
}

/// The user's routes (admin socket, admin token): the pins and changes,
/// and deciding a change.
pub(crate) fn admin_routes() -> Router<Arc<Tools>> {
    Router::new()
        .route("/v1/mcp/pins", get(pins))
        .route("/v1/mcp/changes/{id}", get(change))
        .route("/v1/mcp/changes/{id}/approve", post(approve))
        .route("/v1/mcp/changes/{id}/reject", post(reject))
        .route("/v1/mcp/pins/{server}/{tool}/change", get(change_of_tool))
}

async fn pins(State(st): State<Arc<Tools>>) -> Response {
    rest_call(&st.svc, |svc| svc.mcp_pins(USER)).await
}

async fn change(State(st): State<Arc<Tools>>, Path(id): Path<String>) -> Response {
    rest_call(&st.svc, move |svc| svc.mcp_pin_change(USER, &id)).await
}

async fn change_of_tool(
    State(st): State<Arc<Tools>>,
    Path((server, tool)): Path<(String, String)>,
) -> Response {
    rest_call(&st.svc, move |svc| {
        svc.mcp_pin_change_of_tool(USER, &server, &tool)
    })
    .await
}

async fn approve(State(st): State<Arc<Tools>>, Path(id): Path<String>) -> Response {
    rest_call(&st.svc, move |svc| svc.mcp_pin_approve(USER, &id)).await
}

async fn reject(State(st): State<Arc<Tools>>, Path(id): Path<String>) -> Response {
    rest_call(&st.svc, move |svc| svc.mcp_pin_reject(USER, &id)).await
}

/// Why a call is not forwarded.
pub(crate) enum Refusal {
    /// A decision, told to the agent as the call's error result.
    Agent(String),
    /// The guard itself failed (already an HTTP answer).
    Http(Response),
}

/// Run a blocking service call as the agent.
async fn blocking<T: Send + 'static>(
    st: &Tools,
    f: impl FnOnce(&agency_service::System) -> agency_service::Result<T> + Send + 'static,
) -> Result<agency_service::Result<T>, Response> {
    let svc = st.svc.clone();
    tokio::task::spawn_blocking(move || f(&svc))
        .await
        .map_err(|_| {
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "failed to run the guard's check: the worker panicked",
            )
        })
}

/// Pin and filter one `tools/list` result.
pub(crate) async fn filter_tools(
    st: &Tools,
    id: &AgentIdentity,
    name: &str,
    mut result: Value,
) -> Result<Value, Response> {
    let tools = match result.get_mut("tools").map(Value::take) {
        Some(Value::Array(t)) => t,
        // Not a listing: nothing in it may reach the agent.
        _ => Vec::new(),
    };
    let complete = result.get("nextCursor").is_none_or(Value::is_null);
    let who = Principal::agent(id.handler, id.agent);
    let (n, list) = (name.to_owned(), tools.clone());
    let verdicts =
        match blocking(st, move |svc| svc.mcp_tools_seen(who, &n, &list, complete)).await? {
            Ok(v) => v,
            Err(e) => return Err(agency_http::service_error(&e)),
        };
    let held = st.servers.manifest(name);
    let manifest = held.as_deref();
    let mut kept = Vec::new();
    for (tool, verdict) in tools.into_iter().zip(verdicts) {
        let tname = tool
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let not_offered = match manifest {
            None => None,
            Some(Ok(m)) if m.offers(&tname) => None,
            Some(Ok(_)) => Some(format!(
                "tool {tname} of MCP server {name} is not in the server's manifest (allow_unlisted is off)"
            )),
            Some(Err(e)) => Some(format!("the manifest of MCP server {name} is broken: {e}")),
        };
        match (verdict, not_offered) {
            (PinVerdict::Allowed, None) => kept.push(with_manifest_hints(tool, manifest, &tname)),
            (PinVerdict::Allowed, Some(reason)) => {
                tracing::debug!(server = name, tool = %tname, %reason, "withheld an MCP tool from a listing");
            }
            (PinVerdict::Quarantined { new, change, .. }, _) => {
                if new {
                    tracing::warn!(
                        server = name,
                        tool = %tname,
                        change = change.as_deref().unwrap_or(""),
                        "quarantined an MCP tool whose definition differs from the pinned one; `agency mcp pins` shows it"
                    );
                }
            }
        }
    }
    if let Value::Object(m) = &mut result {
        m.insert("tools".to_owned(), Value::Array(kept));
    } else {
        result = json!({ "tools": kept });
    }
    Ok(result)
}

/// The tool as agents see it: the manifest's `read_only`/`destructive`
/// (the user's word) replace the server's `readOnlyHint`/`destructiveHint`.
/// The pin is of the server's own definition, taken before this.
fn with_manifest_hints(
    mut tool: Value,
    manifest: Option<&Result<Compiled, ManifestError>>,
    name: &str,
) -> Value {
    let Some(Ok(m)) = manifest else { return tool };
    let Some(t) = m.manifest.tools.get(name) else {
        return tool;
    };
    let hints = [
        ("readOnlyHint", t.read_only),
        ("destructiveHint", t.destructive),
    ];
    if hints.iter().all(|(_, v)| v.is_none()) {
        return tool;
    }
    if let Value::Object(obj) = &mut tool {
        let ann = obj.entry("annotations").or_insert_with(|| json!({}));
        if !ann.is_object() {
            *ann = json!({});
        }
        for (key, v) in hints {
            if let (Some(v), Value::Object(a)) = (v, &mut *ann) {
                a.insert(key.to_owned(), Value::Bool(v));
            }
        }
    }
    tool
}

/// Every check before a call is forwarded, in order: the manifest offers
/// the tool, the pin, the input schema, the tool-call policy, the rate
/// limits (last, so that refused calls do not count).
pub(crate) async fn admit_call(
    st: &Tools,
    id: &AgentIdentity,
    name: &str,
    tool: &str,
    args: &Value,
) -> Result<(), Refusal> {
    // One reading of the manifests for the whole admission.
    let held = st.servers.manifest(name);
    let manifest = match held.as_deref() {
        None => None,
        Some(Ok(m)) => Some(m),
        Some(Err(e)) => {
            return Err(Refusal::Agent(format!(
                "failed to call tool {tool} of MCP server {name}: the server's manifest is broken ({e}); tell the user"
            )));
        }
    };
    if let Some(m) = manifest
        && !m.offers(tool)
    {
        return Err(Refusal::Agent(format!(
            "failed to call tool {tool} of MCP server {name}: the server's manifest does not offer it; use the tools tools/list shows"
        )));
    }
    let who = Principal::agent(id.handler, id.agent);
    let (n, t) = (name.to_owned(), tool.to_owned());
    let pinned = match blocking(st, move |svc| svc.mcp_tool_check(who, &n, &t))
        .await
        .map_err(Refusal::Http)?
    {
        Ok(pinned) => pinned,
        Err(e @ agency_service::ServiceError::PermissionDenied(_)) => {
            return Err(Refusal::Agent(e.to_string()));
        }
        Err(e) => return Err(Refusal::Http(agency_http::service_error(&e))),
    };
    if let Some(input) = manifest
        .and_then(|m| m.tools.get(tool))
        .and_then(|t| t.input.as_ref())
        && let Some(why) = violations(input, args)
    {
        return Err(Refusal::Agent(format!(
            "failed to call tool {tool} of MCP server {name}: its arguments do not match the input schema of the server's manifest ({why}); the call was not sent: fix the arguments and call again"
        )));
    }
    // The manifest's word, else the approved definition's: a tool that
    // does not say it only reads counts as one that may change things.
    let read_only = manifest
        .and_then(|m| m.manifest.tools.get(tool))
        .and_then(|t| t.read_only)
        .unwrap_or(pinned.read_only);
    admit_policy(st, who, name, tool, args, Some(read_only))
        .await
        .map_err(Refusal::Agent)?;
    if let Some(m) = manifest {
        st.guard
            .admit_rate(name, tool, id.handler, m)
            .map_err(Refusal::Agent)?;
    }
    Ok(())
}

/// A call's result as the agent may see it: unchanged, or an error in its
/// place when it breaks the manifest's output schema.
pub(crate) fn check_result(st: &Tools, name: &str, tool: &str, result: Value) -> Value {
    let held = st.servers.manifest(name);
    let output = match held.as_deref() {
        Some(Ok(m)) => m.tools.get(tool).and_then(|t| t.output.as_ref()),
        Some(Err(e)) => {
            return withheld(&format!(
                "failed to get the result of tool {tool} of MCP server {name}: the server's manifest is broken ({e}); tell the user"
            ));
        }
        None => None,
    };
    let Some(output) = output else {
        return result;
    };
    // A tool's own error carries no output to check.
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        return result;
    }
    let why = match structured(&result) {
        // The server's text stays out of the message (it may be the very
        // injection being withheld).
        Some(v) => violation_places(output, &v),
        None => Some("it carries no structured content (structuredContent, or one text block of JSON) to check".to_owned()),
    };
    match why {
        None => result,
        Some(why) => {
            tracing::warn!(server = name, tool, %why, "withheld an MCP tool result that breaks the manifest's output schema");
            withheld(&format!(
                "failed to get the result of tool {tool} of MCP server {name}: Agency withheld it, as it does not match the output schema of the server's manifest ({why}); tell the user, the server may have changed"
            ))
        }
    }
}

fn withheld(message: &str) -> Value {
    refusal_result(message)
}

/// The structured output of a result: `structuredContent`, or the JSON of
/// its only text block (servers that predate structured output).
fn structured(result: &Value) -> Option<Value> {
    if let Some(s) = result.get("structuredContent") {
        return Some(s.clone());
    }
    match result
        .get("content")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
    {
        Some([one]) if one.get("type").and_then(Value::as_str) == Some("text") => {
            serde_json::from_str(one.get("text")?.as_str()?).ok()
        }
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn compiled(v: Value) -> Compiled {
        Compiled::new(agency_config::mcp_manifest::parse(&v, "m").unwrap()).unwrap()
    }

    #[test]
    fn the_rate_limit_refuses_the_call_past_the_limit_and_counts_admitted_calls_only() {
        let g = Guard::default();
        let m = compiled(json!({
            "rate_limit": {"per_server": 5},
            "tools": {"a": {"rate_limit": {"per_handler": 2}}, "b": {}}
        }));
        let (h1, h2) = (
            HandlerId(uuid::Uuid::new_v4()),
            HandlerId(uuid::Uuid::new_v4()),
        );
        g.admit_rate("s", "a", h1, &m).unwrap();
        g.admit_rate("s", "a", h1, &m).unwrap();
        let e = g.admit_rate("s", "a", h1, &m).unwrap_err();
        assert!(
            e.contains("2 calls per minute per handler for this tool"),
            "{e}"
        );
        // Another handler has its own per-handler window.
        g.admit_rate("s", "a", h2, &m).unwrap();
        // The server-wide limit counts every tool and handler: 3 so far.
        g.admit_rate("s", "b", h1, &m).unwrap();
        g.admit_rate("s", "b", h2, &m).unwrap();
        let e = g.admit_rate("s", "b", h1, &m).unwrap_err();
        assert!(
            e.contains("5 calls per minute by all agents over all"),
            "{e}"
        );
        // Another server is another window.
        g.admit_rate("t", "b", h1, &m).unwrap();
    }

    #[test]
    fn structured_output_is_found_in_either_place() {
        assert_eq!(
            structured(&json!({"structuredContent": {"a": 1}, "content": []})),
            Some(json!({"a": 1}))
        );
        assert_eq!(
            structured(&json!({"content": [{"type": "text", "text": "{\"b\":2}"}]})),
            Some(json!({"b": 2}))
        );
        assert_eq!(
            structured(&json!({"content": [{"type": "text", "text": "plain"}]})),
            None
        );
        assert_eq!(structured(&json!({"content": []})), None);
    }
}
