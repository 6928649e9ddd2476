//! Approval gates on the daemon's listeners.
//!
//! - `POST /agent/tool-check` (agents' listener, agent token): the built-in
//!   runtime asks before every tool it runs, Claude Code's `PreToolUse`
//!   hook (`agency hook pre-tool-use`) before each of Claude Code's own
//!   tools. The body is a [`ToolCallRequest`]; the answer
//!   `{"decision": "allow"|"pending"|"deny", "approval": ID|null,
//!   "reason": "…", "message": "text for the agent"}`. The caller's
//!   identity and workspace come from its token only.
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
    Router::new().route("/agent/tool-check", post(tool_check))
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

async fn tool_check(
    State(st): State<Arc<Tools>>,
    Extension(id): Extension<AgentIdentity>,
    body: Result<axum::Json<ToolCallRequest>, axum::extract::rejection::JsonRejection>,
) -> Response {
    let axum::Json(req) = match body {
        Ok(b) => b,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_input",
                &format!(
                    "failed to read the tool call: {e}; send {{\"tool\": NAME, \"args\": {{…}}}}"
                ),
            );
        }
    };
    let who = Principal::agent(id.handler, id.agent);
    let svc = st.svc.clone();
    let workspace = id.workspace.clone();
    let span = tracing::Span::current();
    match tokio::task::spawn_blocking(move || {
        span.in_scope(|| svc.tool_call_admit_in(who, req, workspace.as_deref()))
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
