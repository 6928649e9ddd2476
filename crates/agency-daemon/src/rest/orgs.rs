//! REST routes for applied organisations (`agency up`,
//! `agency down`, `agency orgs`): `POST /v1/orgs` with the Agency Model
//! as the body (`?plan=true`: only say what would change), `GET /v1/orgs`,
//! `DELETE /v1/orgs/{name}`. One service call as the user each; the
//! service checks the model.

use std::sync::Arc;

use agency_org::{AgencyModel, McpTool, ToolImplementation};
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::routing::{delete, get};
use serde::Deserialize;

use crate::rest::USER;
use crate::server::AppState;
use agency_http::{Answer, call};
use agency_supervisor::confine::Confiner;

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/v1/orgs", get(orgs).post(apply))
        .route("/v1/orgs/{name}", delete(down))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ApplyQuery {
    #[serde(default)]
    plan: bool,
}

async fn apply(
    State(st): State<Arc<AppState>>,
    Query(q): Query<ApplyQuery>,
    axum::Json(model): axum::Json<AgencyModel>,
) -> Answer {
    let confiner = st.confiner.clone();
    Ok(call(&st.svc, move |svc| {
        let mut plan = svc.org_apply(USER, &model, q.plan)?;
        plan.warnings.extend(toolchain_warnings(&confiner, &model));
        Ok(plan)
    })
    .await)
}

/// A warning for each command tool (or stdio MCP tool) whose program is a
/// shim of a version manager the sandbox does not let it read: every call
/// would fail with "Permission denied" (the fix is the daemon's
/// configuration, which the service does not know).
fn toolchain_warnings(confiner: &Confiner, model: &AgencyModel) -> Vec<String> {
    let mut out = Vec::new();
    for t in model.all_tools() {
        let (command, dir) = match &t.implementation {
            ToolImplementation::Command(c) => (&c.command, c.dir.as_deref()),
            ToolImplementation::Mcp(McpTool {
                command: Some(c), ..
            }) => (c, None),
            _ => continue,
        };
        if let Some(m) = confiner.missing_toolchain(command, dir.map(std::path::Path::new)) {
            out.push(format!(
                "tool {} will fail in the sandbox: {}",
                t.name,
                m.advice()
            ));
        }
    }
    out
}

async fn orgs(State(st): State<Arc<AppState>>) -> Answer {
    Ok(call(&st.svc, move |svc| svc.orgs(USER)).await)
}

async fn down(State(st): State<Arc<AppState>>, Path(name): Path<String>) -> Answer {
    Ok(call(&st.svc, move |svc| svc.org_down(USER, &name)).await)
}
