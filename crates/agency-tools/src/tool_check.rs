//! Approval gates on the daemon's listeners.
//!
//! - `POST /agent/tool-check` (agents' listener, agent token): the built-in
//!   runtime asks before every tool it runs, Claude Code's `PreToolUse`
//!   hook (`agency hook pre-tool-use`) before each of Claude Code's own
//!   tools. The body is a [`ToolCallRequest`]; the answer
//!   `{"decision": "allow"|"pending"|"deny", "approval": ID|null,
//!   "reason": "…", "message": "text for the agent"}`. The caller's
//!   identity and workspace come from its token only.
//! - `POST /agent/tool-done` (agent token): the same runtimes report how
//!   the call ended ([`agency_api::ToolDone`]), logged as `tool.ended`.
//! - `/v1/approvals` (admin socket): the user lists, approves and denies.
//! - [`load_policy`]: `policy.toml` in the home, read once at start; a bad
//!   file stops the start naming `file:line`.

use std::path::Path as FsPath;
use std::sync::Arc;

use agency_core::Principal;
use agency_core::policy::{ApprovalId, Policy, ToolNames};
use agency_mcp::AgentIdentity;
use agency_service::{Admission, ToolCallRequest};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use serde::Deserialize;

use crate::Tools;
use agency_config::ConfigError;
use agency_http::error;
use agency_http::{call, service_error};

/// The policy file's name in the home.
pub const POLICY_FILE: &str = "policy.toml";

/// Read `policy.toml` from the home: absent → the documented defaults; a
/// file that does not parse, or a rule naming a tool the daemon never asks
/// about (`names`: see [`policy_tool_names`]) → an error naming
/// `path:line`.
pub fn load_policy(home: &FsPath, names: &ToolNames) -> Result<Policy, ConfigError> {
    let path = home.join(POLICY_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Policy::default()),
        Err(e) => return Err(ConfigError::io("read", &path, e)),
    };
    Policy::from_toml(&text)
        .and_then(|p| p.check_tool_names(names).map(|()| p))
        .map_err(|e| ConfigError::Invalid {
            path: format!("{}:{}", path.display(), e.line).into(),
            message: format!(
                "{}; fix that line (the format is in docs/budgets-and-approvals.md, \"policy.toml\")",
                e.message
            ),
        })
}

/// The tool names a policy rule may name with this configuration: the
/// built-in runtime's workspace tools, Claude Code's tools (`claude:…`),
/// `repo_push`, and the declared extra MCP servers (`mcp:SERVER/…`).
pub fn policy_tool_names(cfg: &agency_config::Config) -> ToolNames {
    let mut exact: Vec<String> = agency_config::BuiltinConfig::TOOLS
        .iter()
        .map(|t| (*t).to_owned())
        .collect();
    exact.push("repo_push".to_owned());
    // The configured tools too: a newer Claude Code's tool named there
    // (only warned about at start) is one a rule may name.
    let claude = agency_config::claude_tools::KNOWN_TOOLS
        .iter()
        .map(|t| (*t).to_owned())
        .chain(cfg.agents.claude_code.tools.iter().cloned());
    exact.extend(claude.map(|t| format!("claude:{t}")));
    ToolNames {
        exact,
        mcp_servers: cfg.mcp_servers.keys().cloned().collect(),
    }
}

/// The agents' route (goes behind the agent-token guard).
pub(crate) fn agent_routes() -> Router<Arc<Tools>> {
    Router::new()
        .route("/agent/tool-check", post(tool_check))
        .route("/agent/tool-done", post(tool_done))
}

/// The user's routes (go behind the admin-token guard).
pub(crate) fn rest_routes() -> Router<Arc<Tools>> {
    Router::new()
        .route("/v1/approvals", get(list))
        .route("/v1/approvals/{id}", get(show))
        .route("/v1/approvals/{id}/approve", post(approve))
        .route("/v1/approvals/{id}/deny", post(deny))
}

/// The JSON answer of `/agent/tool-check`.
pub fn admission_answer(a: &Admission) -> agency_api::ToolCheck {
    use agency_api::ToolDecision;
    let (decision, approval, reason) = match a {
        Admission::Allow { approval } => (ToolDecision::Allow, *approval, String::new()),
        Admission::Pending { approval, reason } => {
            (ToolDecision::Pending, Some(*approval), reason.clone())
        }
        Admission::Denied { reason } => (ToolDecision::Deny, None, reason.clone()),
    };
    agency_api::ToolCheck {
        decision,
        approval,
        reason,
        message: a.message(),
    }
}

/// The 400 answer to a body that is not the route's JSON.
fn bad_body(what: &str, e: &axum::extract::rejection::JsonRejection, shape: &str) -> Response {
    error(
        StatusCode::BAD_REQUEST,
        "invalid_input",
        &format!("failed to read {what}: {e}; send {shape}"),
    )
}

async fn tool_check(
    State(st): State<Arc<Tools>>,
    Extension(id): Extension<AgentIdentity>,
    body: Result<axum::Json<ToolCallRequest>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let axum::Json(req) = match body {
        Ok(b) => b,
        Err(e) => return bad_body("the tool call", &e, r#"{"tool": NAME, "args": {…}}"#),
    };
    let who = Principal::agent(id.handler, id.agent);
    let svc = st.svc.clone();
    let workspace = id.workspace.clone();
    let span = tracing::Span::current();
    // A runtime's own tool is seen only here: log it with its admission.
    let (tool, digest) = (req.tool.clone(), agency_service::args_digest(&req.args));
    match tokio::task::spawn_blocking(move || {
        span.in_scope(|| {
            let a = svc.tool_call_admit_in(who, req, workspace.as_deref())?;
            let (error_kind, error) = match &a {
                Admission::Allow { .. } => (None, None),
                Admission::Pending { reason, .. } => {
                    (Some("pending_approval".to_owned()), Some(reason.clone()))
                }
                Admission::Denied { reason } => (Some("denied".to_owned()), Some(reason.clone())),
            };
            let step = agency_service::ToolStep {
                tool,
                args_digest: digest,
                error_kind,
                error,
                duration_ms: 0,
                call_id: None,
                at_admission: true,
            };
            if let Err(e) = svc.record_tool_call(who, step) {
                tracing::debug!(error = %e, "failed to log a tool call");
            }
            Ok(a)
        })
    })
    .await
    {
        Ok(Ok(a)) => axum::Json(admission_answer(&a)).into_response(),
        Ok(Err(e)) => service_error(&e),
        Err(_) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "failed to check the tool call: the worker panicked",
        ),
    }
}

/// How a runtime's own tool call ended (see [`agency_api::ToolDone`]):
/// logged, never refused for what it says, only for a malformed body.
async fn tool_done(
    State(st): State<Arc<Tools>>,
    Extension(id): Extension<AgentIdentity>,
    body: Result<axum::Json<agency_api::ToolDone>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let axum::Json(done) = match body {
        Ok(b) => b,
        Err(e) => {
            return bad_body(
                "the tool call's end",
                &e,
                r#"{"tool": NAME, "args": {…}, "ok": true|false}"#,
            );
        }
    };
    let who = Principal::agent(id.handler, id.agent);
    match st.svc.tool_call_reported(who, &done) {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => service_error(&e),
    }
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    #[serde(default)]
    all: bool,
}

/// An approval id from the path, or the 400 answer (boxed: a `Response`
/// is large).
fn parse_id(id: &str) -> Result<ApprovalId, Box<Response>> {
    id.parse().map_err(|_| {
        Box::new(error(
            StatusCode::BAD_REQUEST,
            "invalid_input",
            &format!("failed to read approval id {id:?}: give the number `agency approvals` shows"),
        ))
    })
}

async fn list(State(st): State<Arc<Tools>>, Query(q): Query<ListQuery>) -> Response {
    call(&st.svc, move |svc| {
        svc.approvals_list(Principal::User, q.all)
    })
    .await
}

async fn show(State(st): State<Arc<Tools>>, Path(id): Path<String>) -> Response {
    let id = match parse_id(&id) {
        Ok(i) => i,
        Err(r) => return *r,
    };
    call(&st.svc, move |svc| svc.approval_get(Principal::User, id)).await
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ApproveBody {
    #[serde(default)]
    always: bool,
}

async fn approve(
    State(st): State<Arc<Tools>>,
    Path(id): Path<String>,
    body: Option<axum::Json<ApproveBody>>,
) -> Response {
    let id = match parse_id(&id) {
        Ok(i) => i,
        Err(r) => return *r,
    };
    let always = body.map(|b| b.0.always).unwrap_or(false);
    call(&st.svc, move |svc| svc.approve(Principal::User, id, always)).await
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DenyBody {
    reason: String,
}

async fn deny(
    State(st): State<Arc<Tools>>,
    Path(id): Path<String>,
    axum::Json(body): axum::Json<DenyBody>,
) -> Response {
    let id = match parse_id(&id) {
        Ok(i) => i,
        Err(r) => return *r,
    };
    call(&st.svc, move |svc| {
        svc.deny(Principal::User, id, &body.reason)
    })
    .await
}
