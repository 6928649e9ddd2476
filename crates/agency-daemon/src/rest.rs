//! The REST API under `/v1`: everything the user can do, as JSON, with the
//! admin token. Each route is one service call as `Principal::User`; the
//! CLI uses nothing else. Errors are `{"error": {"kind", "message"}}` with
//! a status that matches the kind.

use std::path::PathBuf;
use std::sync::Arc;

use agency_core::{AgentId, FileId, HandlerId, MailTarget, MessageId, OutcomeId, Principal};
use agency_service::{MailBody, Service, ServiceError};
use agency_store::IdKind;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use serde::{Deserialize, Serialize};

use crate::api::{AgentsView, FileText, StatusView};
use crate::http_auth::error;
use crate::server::AppState;

pub(crate) const USER: Principal = Principal::User;

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/v1/status", get(status))
        .route("/v1/mail", post(send))
        .route("/v1/inbox", get(inbox))
        .route("/v1/inbox/ack", post(ack))
        .route("/v1/handlers", get(handlers))
        .route("/v1/handlers/{id}", get(handler))
        .route("/v1/handlers/{id}/stop", post(stop))
        .route("/v1/handlers/{id}/audit", get(audit))
        .route(
            "/v1/handlers/{id}/capabilities",
            get(capabilities).post(grant),
        )
        .route("/v1/capabilities/{id}", delete(revoke_capability))
        .route("/v1/outcomes", get(outcomes))
        .route("/v1/outcomes/{id}", get(outcome))
        .route("/v1/agents", get(agents))
        .route("/v1/kb", get(kb_list))
        .route("/v1/kb/{id}", get(kb_cat))
        .route("/v1/kb/{id}/history", get(kb_history))
        .route("/v1/fsck", post(fsck))
        .route("/v1/tokens", post(mint))
        .route("/v1/tokens/{agent}", delete(revoke))
        .route("/v1/resolve/{kind}/{prefix}", get(resolve))
        .merge(crate::rest_records::routes())
}

/// Run a blocking service call off the async runtime and answer with its
/// JSON or its error.
pub(crate) async fn call<T, F>(st: &Arc<AppState>, f: F) -> Response
where
    T: Serialize + Send + 'static,
    F: FnOnce(&Service) -> Result<T, ServiceError> + Send + 'static,
{
    let svc = st.svc.clone();
    match tokio::task::spawn_blocking(move || f(&svc)).await {
        Ok(Ok(v)) => axum::Json(v).into_response(),
        Ok(Err(e)) => service_error(&e),
        Err(_) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "failed to run the request: the worker panicked",
        ),
    }
}

pub(crate) fn service_error(e: &ServiceError) -> Response {
    let status = match e {
        ServiceError::NotFound { .. } => StatusCode::NOT_FOUND,
        ServiceError::PermissionDenied(_) => StatusCode::FORBIDDEN,
        ServiceError::Conflict { .. } | ServiceError::AgentLive { .. } => StatusCode::CONFLICT,
        ServiceError::InvalidInput(_) => StatusCode::BAD_REQUEST,
        ServiceError::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
    };
    error(status, e.kind(), &e.to_string())
}

/// A request the REST layer itself refuses (an id that is not a UUID, an
/// unknown kind) before any service call.
pub(crate) struct BadRequest(String);

impl IntoResponse for BadRequest {
    fn into_response(self) -> Response {
        error(StatusCode::BAD_REQUEST, "invalid_input", &self.0)
    }
}

pub(crate) type Answer = Result<Response, BadRequest>;

pub(crate) fn parse<T: std::str::FromStr>(what: &str, s: &str) -> Result<T, BadRequest> {
    s.parse().map_err(|_| {
        BadRequest(format!(
            "failed to parse {what} id {s:?}: give a full UUID (the CLI resolves prefixes)"
        ))
    })
}

async fn status(State(st): State<Arc<AppState>>) -> Response {
    let (home, addr) = (st.home.display().to_string(), st.addr.to_string());
    call(&st, move |svc| {
        Ok(StatusView {
            version: env!("CARGO_PKG_VERSION").to_owned(),
            home,
            addr,
            pid: std::process::id(),
            root_handler: svc.root_handler()?,
            counts: svc.counts()?,
        })
    })
    .await
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SendReq {
    /// "root" or a handler id.
    to: String,
    text: String,
    subject: Option<String>,
}

#[derive(Debug, Serialize)]
struct Sent {
    message: MessageId,
    to: HandlerId,
}

async fn send(State(st): State<Arc<AppState>>, axum::Json(req): axum::Json<SendReq>) -> Answer {
    let to: Option<HandlerId> = if req.to == "root" {
        None
    } else {
        Some(parse("handler", &req.to)?)
    };
    Ok(call(&st, move |svc| {
        let to = match to {
            Some(h) => h,
            None => svc.root_handler()?.ok_or_else(|| {
                ServiceError::invalid(
                    "failed to send: the home has no root handler; run `agency init`",
                )
            })?,
        };
        let body = MailBody::Text {
            subject: req.subject,
            text: req.text,
        };
        Ok(Sent {
            message: svc.mail_send(USER, MailTarget::Handler(to), &body)?,
            to,
        })
    })
    .await)
}

async fn inbox(State(st): State<Arc<AppState>>) -> Response {
    call(&st, |svc| svc.mail_inbox(USER, None)).await
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AckReq {
    #[serde(default)]
    messages: Vec<MessageId>,
    #[serde(default)]
    all: bool,
}

async fn ack(State(st): State<Arc<AppState>>, axum::Json(req): axum::Json<AckReq>) -> Response {
    call(&st, move |svc| {
        let ids = if req.all {
            svc.mail_inbox(USER, None)?
                .into_iter()
                .map(|m| m.id)
                .collect()
        } else {
            req.messages
        };
        let acked = if ids.is_empty() {
            0
        } else {
            svc.mail_ack(USER, &ids)?
        };
        Ok(serde_json::json!({ "acked": acked }))
    })
    .await
}

async fn handlers(State(st): State<Arc<AppState>>) -> Response {
    call(&st, |svc| {
        let mut all = Vec::new();
        let mut after = None;
        loop {
            let page = svc.handlers(USER, after, None)?;
            let Some(last) = page.last() else { break };
            after = Some(last.id);
            all.extend(page);
        }
        Ok(all)
    })
    .await
}

async fn handler(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Answer {
    let id: HandlerId = parse("handler", &id)?;
    Ok(call(&st, move |svc| svc.handler_view(USER, id)).await)
}

async fn stop(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Answer {
    let id: HandlerId = parse("handler", &id)?;
    Ok(call(&st, move |svc| svc.force_stop(USER, id)).await)
}

async fn capabilities(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Answer {
    let id: HandlerId = parse("handler", &id)?;
    Ok(call(&st, move |svc| svc.permissions_list(USER, Some(id))).await)
}

/// The user grants a capability: `{"kind": "mcp_server", "key": "github",
/// "level": "read", "delegatable": false}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantBody {
    kind: String,
    key: String,
    level: String,
    #[serde(default)]
    delegatable: bool,
}

async fn grant(
    State(st): State<Arc<AppState>>,
    Path(id): Path<String>,
    axum::Json(body): axum::Json<GrantBody>,
) -> Answer {
    let id: HandlerId = parse("handler", &id)?;
    let resource = agency_core::Resource::from_parts(&body.kind, &body.key)
        .map_err(|e| BadRequest(format!("failed to grant: {e}")))?;
    let level: agency_core::Level = body
        .level
        .parse()
        .map_err(|e| BadRequest(format!("failed to grant: {e}")))?;
    let req = agency_service::GrantRequest {
        resource,
        level,
        delegatable: body.delegatable,
    };
    Ok(call(&st, move |svc| {
        svc.grant(USER, id, &req)
            .map(|capability| serde_json::json!({ "capability": capability }))
    })
    .await)
}

async fn revoke_capability(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Answer {
    let id = id
        .strip_prefix("cap-")
        .unwrap_or(&id)
        .parse::<i64>()
        .map(agency_core::CapabilityId)
        .map_err(|_| {
            BadRequest(format!(
                "failed to parse capability id {id:?}: give its number (as `agency caps` shows it)"
            ))
        })?;
    Ok(call(&st, move |svc| {
        svc.revoke(USER, id)
            .map(|revoked| serde_json::json!({ "revoked": revoked }))
    })
    .await)
}

async fn audit(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Answer {
    let id: HandlerId = parse("handler", &id)?;
    Ok(call(&st, move |svc| svc.audit_read(USER, Some(id))).await)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TreeQuery {
    root: Option<String>,
    limit: Option<usize>,
}

async fn outcomes(State(st): State<Arc<AppState>>, Query(q): Query<TreeQuery>) -> Answer {
    let root: Option<OutcomeId> = q.root.as_deref().map(|r| parse("outcome", r)).transpose()?;
    Ok(call(&st, move |svc| {
        let root = match root {
            Some(r) => r,
            None => svc
                .root_handler()?
                .map(|h| h.root())
                .ok_or_else(|| ServiceError::invalid("failed to list outcomes: no root handler"))?,
        };
        svc.outcome_subtree(USER, root, Some(q.limit.unwrap_or(10_000)))
    })
    .await)
}

async fn outcome(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Answer {
    let id: OutcomeId = parse("outcome", &id)?;
    Ok(call(&st, move |svc| svc.outcome_view(USER, id)).await)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitQuery {
    limit: Option<usize>,
}

async fn agents(State(st): State<Arc<AppState>>, Query(q): Query<LimitQuery>) -> Response {
    call(&st, move |svc| {
        Ok(AgentsView {
            live: svc.agents_live(USER)?,
            recent: svc.agents_recent(USER, Some(q.limit.unwrap_or(20)))?,
        })
    })
    .await
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PageQuery {
    after: Option<String>,
    limit: Option<usize>,
}

async fn kb_list(State(st): State<Arc<AppState>>, Query(q): Query<PageQuery>) -> Answer {
    let after: Option<FileId> = q
        .after
        .as_deref()
        .map(|a| parse("KB file", a))
        .transpose()?;
    Ok(call(&st, move |svc| svc.kb_list(USER, after, q.limit)).await)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct VersionQuery {
    version: Option<i64>,
}

async fn kb_cat(
    State(st): State<Arc<AppState>>,
    Path(id): Path<String>,
    Query(q): Query<VersionQuery>,
) -> Answer {
    let id: FileId = parse("KB file", &id)?;
    Ok(call(&st, move |svc| {
        let c = match q.version {
            Some(v) => svc.kb_read_version(USER, id, v)?,
            None => svc.kb_read(USER, id)?,
        };
        Ok(FileText::new(c))
    })
    .await)
}

async fn kb_history(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Answer {
    let id: FileId = parse("KB file", &id)?;
    Ok(call(&st, move |svc| svc.kb_history(USER, id)).await)
}

async fn fsck(State(st): State<Arc<AppState>>) -> Response {
    call(&st, |svc| svc.fsck()).await
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MintReq {
    handler: String,
    /// Absolute directory where the client's `path` arguments resolve.
    workspace: Option<PathBuf>,
}

async fn mint(State(st): State<Arc<AppState>>, axum::Json(req): axum::Json<MintReq>) -> Answer {
    let h: HandlerId = parse("handler", &req.handler)?;
    Ok(call(&st, move |svc| {
        svc.token_mint(USER, h, req.workspace.as_deref())
    })
    .await)
}

async fn revoke(State(st): State<Arc<AppState>>, Path(agent): Path<String>) -> Answer {
    let a: AgentId = parse("agent", &agent)?;
    Ok(call(&st, move |svc| {
        Ok(serde_json::json!({ "revoked": svc.token_revoke(USER, a)? }))
    })
    .await)
}

async fn resolve(
    State(st): State<Arc<AppState>>,
    Path((kind, prefix)): Path<(String, String)>,
) -> Answer {
    let kind = match kind.as_str() {
        "handler" => IdKind::Handler,
        "outcome" => IdKind::Outcome,
        "file" => IdKind::File,
        "agent" => IdKind::Agent,
        "message" => IdKind::Message,
        other => {
            return Err(BadRequest(format!(
                "failed to resolve: unknown id kind {other:?}"
            )));
        }
    };
    Ok(call(&st, move |svc| {
        Ok(serde_json::json!({ "id": svc.resolve_prefix(USER, kind, &prefix)? }))
    })
    .await)
}
