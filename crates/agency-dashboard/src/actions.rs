//! The dashboard's actions (`POST /dashboard/api/…`), each one service
//! call as the user. The guard has already checked the session and the
//! CSRF token; the service checks the rest, as for the CLI.

use std::sync::Arc;

use agency_core::policy::ApprovalId;
use agency_core::usage::BudgetLimits;
use agency_core::{HandlerId, MailTarget};
use agency_service::{MailBody, wire};
use axum::Router;
use axum::extract::{Path, State};
use axum::routing::post;
use serde::Deserialize;

use crate::{Dashboard, USER};
use agency_http::{Answer, BadRequest, call, parse};

pub(crate) fn routes() -> Router<Arc<Dashboard>> {
    Router::new()
        .route("/dashboard/api/approvals/{id}/approve", post(approve))
        .route("/dashboard/api/approvals/{id}/deny", post(deny))
        .route("/dashboard/api/handlers/{id}/stop", post(stop))
        .route("/dashboard/api/handlers/{id}/pause", post(pause))
        .route("/dashboard/api/handlers/{id}/resume", post(resume))
        .route("/dashboard/api/handlers/{id}/budget", post(budget))
        .route("/dashboard/api/handlers/{id}/mail", post(guidance))
        .route("/dashboard/api/mcp/changes/{id}/approve", post(mcp_approve))
        .route("/dashboard/api/mcp/changes/{id}/reject", post(mcp_reject))
}

fn approval_id(id: &str) -> Result<ApprovalId, BadRequest> {
    id.parse().map_err(|_| {
        BadRequest(format!(
            "failed to read approval id {id:?}: give the number `agency approvals` shows"
        ))
    })
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ApproveBody {
    #[serde(default)]
    always: bool,
}

async fn approve(
    State(d): State<Arc<Dashboard>>,
    Path(id): Path<String>,
    body: Option<axum::Json<ApproveBody>>,
) -> Answer {
    let id = approval_id(&id)?;
    let always = body.is_some_and(|b| b.0.always);
    Ok(call(&d.svc, move |s| s.approve(USER, id, always)).await)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DenyBody {
    reason: String,
}

async fn deny(
    State(d): State<Arc<Dashboard>>,
    Path(id): Path<String>,
    axum::Json(b): axum::Json<DenyBody>,
) -> Answer {
    let id = approval_id(&id)?;
    Ok(call(&d.svc, move |s| s.deny(USER, id, &b.reason)).await)
}

async fn stop(State(d): State<Arc<Dashboard>>, Path(id): Path<String>) -> Answer {
    let h: HandlerId = parse("handler", &id)?;
    Ok(call(&d.svc, move |s| s.force_stop(USER, h)).await)
}

async fn pause(State(d): State<Arc<Dashboard>>, Path(id): Path<String>) -> Answer {
    let h: HandlerId = parse("handler", &id)?;
    Ok(call(&d.svc, move |s| {
        s.budget_pause(USER, h, Some("from the dashboard"))
    })
    .await)
}

async fn resume(State(d): State<Arc<Dashboard>>, Path(id): Path<String>) -> Answer {
    let h: HandlerId = parse("handler", &id)?;
    Ok(call(&d.svc, move |s| s.budget_resume(USER, h)).await)
}

/// New limits for a handler's subtree (raising a reached limit lifts its
/// pause); a limit left out is no limit, as for `agency budget set`.
async fn budget(
    State(d): State<Arc<Dashboard>>,
    Path(id): Path<String>,
    axum::Json(limits): axum::Json<BudgetLimits>,
) -> Answer {
    let h: HandlerId = parse("handler", &id)?;
    Ok(call(&d.svc, move |s| {
        s.budget_set(USER, h, limits).map(|b| wire::budget(&b))
    })
    .await)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MailReq {
    text: String,
    subject: Option<String>,
}

/// Guidance to a handler: mail from the user (which also clears a stall).
async fn guidance(
    State(d): State<Arc<Dashboard>>,
    Path(id): Path<String>,
    axum::Json(m): axum::Json<MailReq>,
) -> Answer {
    let h: HandlerId = parse("handler", &id)?;
    Ok(call(&d.svc, move |s| {
        let body = MailBody::Text {
            subject: m.subject,
            text: m.text,
        };
        Ok(agency_api::Sent {
            message: s.mail_send(USER, MailTarget::Handler(h), &body)?,
            to: h,
        })
    })
    .await)
}

async fn mcp_approve(State(d): State<Arc<Dashboard>>, Path(id): Path<String>) -> Answer {
    Ok(call(&d.svc, move |s| s.mcp_pin_approve(USER, &id)).await)
}

async fn mcp_reject(State(d): State<Arc<Dashboard>>, Path(id): Path<String>) -> Answer {
    Ok(call(&d.svc, move |s| s.mcp_pin_reject(USER, &id)).await)
}
