//! The REST API under `/v1`: everything the user can do, as JSON, with the
//! admin token, served on the home's Unix socket only. Each route is one
//! service call as `Principal::User`; the CLI uses nothing else. Errors are
//! `{"error": {"kind", "message"}}` with a status that matches the kind,
//! including the ones axum's extractors produce (a body too large, JSON
//! that does not parse).

pub mod agency;
pub(crate) mod follow;
pub(crate) mod kb;
pub(crate) mod keep_warm;
pub(crate) mod lessons;
pub(crate) mod memory;
pub(crate) mod models;
pub(crate) mod orgs;
pub(crate) mod pipelines;
pub(crate) mod records;

use std::path::PathBuf;
use std::sync::Arc;

use agency_core::{AgentId, FileId, HandlerId, MailTarget, MessageId, OutcomeId, Principal};
use agency_service::{MailBody, ServiceError};
use agency_store::IdKind;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use serde::Deserialize;

use crate::server::AppState;
use agency_api::{AgentsView, StatusView};
use agency_http::{Answer, BadRequest, call, error, parse};
use agency_service::wire;
use agency_tools::Tools;

pub(crate) const USER: Principal = Principal::User;

/// The routes; request bodies are bounded like MCP's (room for the largest
/// file `limits.max_file_bytes` allows, JSON-escaped), so a message the
/// service would accept is never refused by the transport.
pub(crate) fn routes(max_file_bytes: usize, tools: &Arc<Tools>) -> Router<Arc<AppState>> {
    let max_body = agency_mcp::max_request_bytes(max_file_bytes);
    Router::new()
        .route("/v1/shutdown", post(shutdown))
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
        .route("/v1/outcomes/{id}/reopen", post(reopen_outcome))
        .route("/v1/agents", get(agents))
        .route("/v1/kb", get(kb_list).post(kb::create))
        .route("/v1/kb/{id}", get(kb_cat).post(kb::write))
        .route("/v1/kb/{id}/history", get(kb_history))
        .route("/v1/fsck", post(fsck))
        .route("/v1/gc", post(gc))
        .route("/v1/events", get(events_page))
        .route("/v1/events/stream", get(events_stream))
        .route("/v1/problems", get(problems))
        .route("/v1/tokens", post(mint))
        .route("/v1/tokens/{agent}", delete(revoke))
        .route("/v1/resolve/{kind}/{prefix}", get(resolve))
        .route("/v1/runs/{agent}/log", get(run_log))
        .merge(records::routes())
        .merge(follow::routes())
        .merge(models::routes())
        .merge(memory::routes())
        .merge(keep_warm::routes())
        .merge(crate::reload::routes())
        .merge(orgs::routes())
        .merge(pipelines::routes())
        .merge(lessons::routes())
        .merge(agency::key_routes())
        .merge(agency_tools::admin_routes(tools.clone()))
        .layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                plain_errors_as_json(req, next, max_body, max_file_bytes)
            },
        ))
        .layer(axum::extract::DefaultBodyLimit::max(max_body))
}

/// axum's extractors answer bad bodies with plain text ("Failed to buffer
/// the request body: length limit exceeded"); give them Agency's error
/// JSON and wording instead.
async fn plain_errors_as_json(
    req: axum::extract::Request,
    next: axum::middleware::Next,
    max_body: usize,
    max_file_bytes: usize,
) -> Response {
    let resp = next.run(req).await;
    let status = resp.status();
    let plain = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/plain"));
    if !plain || !status.is_client_error() {
        return resp;
    }
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        return error(
            status,
            "invalid_input",
            &format!(
                "failed to read the request: its body is larger than {max_body} bytes, the limit that follows from limits.max_file_bytes = {max_file_bytes} in agency.toml; send less, or raise that limit"
            ),
        );
    }
    let text = axum::body::to_bytes(resp.into_body(), 64 * 1024)
        .await
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    error(
        status,
        "invalid_input",
        &format!("failed to read the request: {}", text.trim()),
    )
}

/// `POST /v1/shutdown`: stop the daemon gracefully (agents get the
/// supervisor's grace, in-flight requests finish). The answer comes first.
async fn shutdown(State(st): State<Arc<AppState>>) -> Response {
    st.shutdown_requested.notify_one();
    axum::Json(agency_api::ShuttingDown {
        shutting_down: true,
        pid: std::process::id(),
    })
    .into_response()
}

async fn status(State(st): State<Arc<AppState>>) -> Response {
    let (home, addr) = (st.home.display().to_string(), st.addr.to_string());
    let runtime = st.runtime.clone();
    let sandbox = st.sandbox.clone();
    let limits = st.limits.clone();
    let lease_owner = st.lease.as_ref().map(|l| l.owner.clone());
    call(&st.svc, move |svc| {
        let daemons = match lease_owner {
            Some(_) => svc.lease_owners()?,
            None => Vec::new(),
        };
        Ok(StatusView {
            lease_owner,
            daemons,
            runtime,
            sandbox,
            limits,
            version: env!("CARGO_PKG_VERSION").to_owned(),
            home,
            addr,
            pid: std::process::id(),
            root_handler: svc.root_handler()?,
            counts: wire::counts(&svc.counts()?),
            paused: svc.budget_pauses()?,
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

async fn send(State(st): State<Arc<AppState>>, axum::Json(req): axum::Json<SendReq>) -> Answer {
    let to: Option<HandlerId> = if req.to == "root" {
        None
    } else {
        Some(parse("handler", &req.to)?)
    };
    Ok(call(&st.svc, move |svc| {
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
        Ok(agency_api::Sent {
            message: svc.mail_send(USER, MailTarget::Handler(to), &body)?,
            to,
        })
    })
    .await)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct InboxQuery {
    /// Every message delivered to the user, acknowledged ones too, newest
    /// first (`agency inbox --all`).
    #[serde(default)]
    all: bool,
    limit: Option<usize>,
}

async fn inbox(State(st): State<Arc<AppState>>, Query(q): Query<InboxQuery>) -> Response {
    call(&st.svc, move |svc| {
        if q.all {
            svc.mail_received(USER, q.limit)
        } else {
            svc.mail_inbox(USER, q.limit)
        }
    })
    .await
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
    call(&st.svc, move |svc| {
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
        Ok(agency_api::Acked { acked })
    })
    .await
}

async fn handlers(State(st): State<Arc<AppState>>) -> Response {
    call(&st.svc, |svc| {
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
    Ok(call(&st.svc, move |svc| svc.handler_view(USER, id)).await)
}

async fn stop(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Answer {
    let id: HandlerId = parse("handler", &id)?;
    Ok(call(&st.svc, move |svc| svc.force_stop(USER, id)).await)
}

async fn capabilities(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Answer {
    let id: HandlerId = parse("handler", &id)?;
    Ok(call(&st.svc, move |svc| svc.permissions_list(USER, Some(id))).await)
}

/// The user grants a capability: `{"kind": "mcp_server", "key": "github",
/// "level": "read", "delegatable": false, "outcome": "<uuid>"}` (`outcome`
/// optional).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantBody {
    kind: String,
    key: String,
    level: String,
    #[serde(default)]
    delegatable: bool,
    /// The outcome the grant is for; the grantee's root
    /// outcome when absent.
    #[serde(default)]
    outcome: Option<String>,
    /// `"each_use"`: every call using the capability asks the user.
    #[serde(default)]
    approval: Option<String>,
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
    let outcome: Option<OutcomeId> = body
        .outcome
        .as_deref()
        .map(|o| parse("outcome", o))
        .transpose()?;
    Ok(call(&st.svc, move |svc| {
        svc.grant_with_approval(USER, id, &req, outcome, body.approval.as_deref())
            .map(|capability| agency_api::CapabilityGranted { capability })
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
    Ok(call(&st.svc, move |svc| {
        svc.revoke(USER, id)
            .map(|revoked| agency_api::CapabilitiesRevoked { revoked })
    })
    .await)
}

async fn audit(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Answer {
    let id: HandlerId = parse("handler", &id)?;
    Ok(call(&st.svc, move |svc| svc.audit_read(USER, Some(id))).await)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TreeQuery {
    root: Option<String>,
    limit: Option<usize>,
}

async fn outcomes(State(st): State<Arc<AppState>>, Query(q): Query<TreeQuery>) -> Answer {
    let root: Option<OutcomeId> = q.root.as_deref().map(|r| parse("outcome", r)).transpose()?;
    Ok(call(&st.svc, move |svc| {
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
    Ok(call(&st.svc, move |svc| svc.outcome_view(USER, id)).await)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitQuery {
    limit: Option<usize>,
}

async fn agents(State(st): State<Arc<AppState>>, Query(q): Query<LimitQuery>) -> Response {
    call(&st.svc, move |svc| {
        Ok(AgentsView {
            live: svc.agents_live(USER)?.iter().map(wire::agent).collect(),
            recent: svc
                .agents_recent(USER, Some(q.limit.unwrap_or(20)))?
                .iter()
                .map(wire::agent)
                .collect(),
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
    Ok(call(&st.svc, move |svc| svc.kb_list(USER, after, q.limit)).await)
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
    Ok(call(&st.svc, move |svc| {
        let c = match q.version {
            Some(v) => svc.kb_read_version(USER, id, v)?,
            None => svc.kb_read(USER, id)?,
        };
        Ok(wire::file_text(&c))
    })
    .await)
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HistoryQuery {
    /// Versions after this one (a version number from an earlier page).
    after: Option<i64>,
    limit: Option<usize>,
}

/// A file's versions, oldest first, one page at a time: without `limit`, as
/// many as the daemon gives in one page (`limits.max_list`), so a client
/// pages with `after` until an empty page.
async fn kb_history(
    State(st): State<Arc<AppState>>,
    Path(id): Path<String>,
    Query(q): Query<HistoryQuery>,
) -> Answer {
    let id: FileId = parse("KB file", &id)?;
    let limit = Some(q.limit.unwrap_or(usize::MAX));
    Ok(call(&st.svc, move |svc| {
        Ok(svc.kb_history_page(USER, id, q.after, limit)?.items)
    })
    .await)
}

async fn fsck(State(st): State<Arc<AppState>>) -> Response {
    call(&st.svc, |svc| svc.fsck()).await
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct GcReq {
    #[serde(default)]
    dry_run: bool,
}

/// A page of the event log (`agency watch --no-follow`, scripts).
async fn events_page(
    State(st): State<Arc<AppState>>,
    Query(p): Query<agency_http::events::EventParams>,
) -> Answer {
    let q = p.query(None)?;
    Ok(agency_http::events::page(st.svc.service(), USER, q).await)
}

/// The event log, live (`agency watch`): from `after`, `since` or
/// `Last-Event-ID`, else from now on.
async fn events_stream(
    State(st): State<Arc<AppState>>,
    headers: http::HeaderMap,
    Query(p): Query<agency_http::events::EventParams>,
) -> Answer {
    if p.limit.is_some() {
        return Err(BadRequest(
            "failed to follow events: `limit` applies to pages (GET /v1/events), not to the stream"
                .into(),
        ));
    }
    let resume = agency_http::events::last_event_id(&headers)?;
    let from_end = resume.is_none() && p.after.is_none() && p.since.is_none();
    let q = p.query(resume)?;
    Ok(agency_http::events::stream(st.svc.service().clone(), USER, q, from_end).await)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProblemsQuery {
    #[serde(default)]
    all: bool,
}

/// The open problems, or with `all=true` the latest episodes
/// (`agency problems`).
async fn problems(State(st): State<Arc<AppState>>, Query(q): Query<ProblemsQuery>) -> Response {
    call(&st.svc, move |svc| svc.problems(USER, q.all)).await
}

/// Apply the retention policy now (`agency gc`).
async fn gc(State(st): State<Arc<AppState>>, axum::Json(req): axum::Json<GcReq>) -> Response {
    call(&st.svc, move |svc| svc.gc(USER, req.dry_run)).await
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
    // On a shared store the client's agent is this daemon's: the handler's
    // lease is claimed for it, as for an agent this daemon spawns.
    let lease = st.lease.clone();
    Ok(call(&st.svc, move |svc| {
        svc.token_mint_as(USER, h, req.workspace.as_deref(), lease.as_ref())
    })
    .await)
}

/// An agent run's captured stdout/stderr (`agency logs`).
async fn run_log(State(st): State<Arc<AppState>>, Path(agent): Path<String>) -> Answer {
    let a: AgentId = parse("agent", &agent)?;
    Ok(call(&st.svc, move |svc| svc.agent_run_log(USER, a)).await)
}

async fn revoke(State(st): State<Arc<AppState>>, Path(agent): Path<String>) -> Answer {
    let a: AgentId = parse("agent", &agent)?;
    Ok(call(&st.svc, move |svc| {
        Ok(agency_api::TokenRevoked {
            revoked: svc.token_revoke(USER, a)?,
        })
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
        "agency_message" => IdKind::OrgMessage,
        "key" => IdKind::OrgKey,
        "memory" => IdKind::Memory,
        "compaction" => IdKind::MemoryCompaction,
        "lesson" => IdKind::Lesson,
        other => {
            return Err(BadRequest(format!(
                "failed to resolve: unknown id kind {other:?}"
            )));
        }
    };
    Ok(call(&st.svc, move |svc| {
        Ok(agency_api::Resolved {
            id: svc.resolve_prefix(USER, kind, &prefix)?.to_string(),
        })
    })
    .await)
}

/// The user reopens a completed or closed outcome: `{"rationale": "…"}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReopenBody {
    rationale: String,
}

async fn reopen_outcome(
    State(st): State<Arc<AppState>>,
    Path(id): Path<String>,
    axum::Json(body): axum::Json<ReopenBody>,
) -> Answer {
    let id: OutcomeId = parse("outcome", &id)?;
    Ok(call(&st.svc, move |svc| {
        svc.outcome_reopen(USER, id, &body.rationale)
    })
    .await)
}
