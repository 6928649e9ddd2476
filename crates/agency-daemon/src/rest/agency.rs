//! Talking to an agency from outside (seed 002 §7):
//! `POST /v1/agency/messages` (`{"agency", "message", "conversation"?,
//! "wait_ms"?}`), `GET /v1/agency/messages/{id}` and
//! `GET /v1/agency/messages/{id}/events` (server-sent events). These are
//! the only `/v1` routes on the TCP listener as well as on the home's
//! socket, behind their own guard (`org_only`): an agency API key
//! (`agk_…`, its own agency's messages only; the service checks it in
//! each operation) or, on the socket only, the admin token. The admin
//! token is refused over TCP like every other `/v1` route there (a
//! client must never send it to a port a stranger may hold).
//!
//! An outside caller is bounded per key: how often it may post
//! (`[agency_api] messages_per_minute` and `burst`, checked here before
//! anything else) and how many of its messages may wait for an answer
//! (`max_pending_per_key`, counted by the service in the store's
//! transaction). Each refusal is 429 with `Retry-After` and a JSON error
//! naming the limit, its value and the seconds to wait. The user is bound
//! by neither.
//!
//! The user's key management (`/v1/agency/keys`) and view of the
//! conversations (`/v1/agency/conversations`) are in `key_routes`,
//! behind the admin token on the socket with the rest of `/v1`.
//!
//! A waiting request (`wait_ms`, the event stream) subscribes to the
//! service's events before it looks, reads the row once, and again only
//! when an `OrgMessageAnswered` for it (or a lag) arrives: the store is
//! never polled in a loop.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use agency_core::{ConversationId, OrgKeyId, OrgMessageId};
use agency_service::{Event, OrgCaller, OrgMessageStatus, OrgMessageView, ServiceError};
use axum::body::Body;
use axum::extract::{Path, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::sse::{self, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Extension, Router};
use serde::Deserialize;
use tokio::sync::broadcast;
use tokio::time::Instant;

use crate::rest::USER;
use crate::server::AppState;
use agency_http::{Answer, BadRequest, bearer, call, error, limited, parse, service_error};

/// The longest a `POST` may wait for the reply.
pub const MAX_WAIT_MS: u64 = 120_000;
/// How long an event stream stays open without a reply; it then ends
/// with a `pending` event and the client reconnects.
pub const EVENTS_MAX: Duration = Duration::from_secs(300);
/// A comment line this often keeps idle proxies from closing a stream.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// Room for the largest message, JSON-escaped, and the other fields.
const MAX_BODY: usize = 8 * agency_service::MAX_ORG_MESSAGE_BYTES;

/// The guard's state: the daemon's, and whether this listener takes the
/// admin token (the socket) or only keys (TCP).
#[derive(Clone)]
struct Guard {
    st: Arc<AppState>,
    admin_ok: bool,
}

/// The message routes behind the agency guard; `admin_ok` on the socket.
pub(crate) fn routes(st: Arc<AppState>, admin_ok: bool) -> Router {
    let guard = Guard {
        st: st.clone(),
        admin_ok,
    };
    Router::new()
        .route("/v1/agency/messages", post(post_message))
        .route("/v1/agency/messages/{id}", get(get_message))
        .route("/v1/agency/messages/{id}/events", get(events))
        .layer(from_fn_with_state(guard, org_only))
        .with_state(st)
}

/// The user's key management, merged into the admin-token `/v1` routes.
pub(crate) fn key_routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/v1/agency/keys", post(key_mint).get(key_list))
        .route("/v1/agency/keys/{id}", delete(key_revoke))
        .route("/v1/agency/conversations", get(conversations))
}

/// Who is calling, from the bearer token alone: the admin token (where
/// `admin_ok`) is the user; a live agency key is that key, and the
/// service keeps it to its agency. Anything else: 401.
async fn org_only(State(g): State<Guard>, mut req: Request, next: Next) -> Response {
    let Some(token) = bearer(req.headers()).map(str::to_owned) else {
        return unauthorized(
            "failed to authenticate: send an agency API key (from `agency key mint --agency NAME`) as `Authorization: Bearer …`",
        );
    };
    if blake3::hash(token.as_bytes()) == g.st.admin_hash {
        if !g.admin_ok {
            return unauthorized(
                "failed to authenticate: the admin token is accepted only on the home's socket (daemon.sock); over TCP send an agency API key (`agency key mint --agency NAME`)",
            );
        }
        req.extensions_mut().insert(OrgCaller::User);
        return next.run(req).await;
    }
    let svc = g.st.svc.clone();
    let key = token.clone();
    let span = tracing::Span::current();
    match tokio::task::spawn_blocking(move || span.in_scope(|| svc.org_key_verify(&key))).await {
        Ok(Ok(_agency)) => {
            req.extensions_mut().insert(OrgCaller::Key(token));
            next.run(req).await
        }
        Ok(Err(e)) => unauthorized(&e.to_string()),
        Err(_) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "failed to authenticate: the check was cancelled",
        ),
    }
}

fn unauthorized(message: &str) -> Response {
    error(StatusCode::UNAUTHORIZED, "unauthorized", message)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PostReq {
    agency: String,
    message: String,
    conversation: Option<String>,
    wait_ms: Option<u64>,
}

/// `POST /v1/agency/messages`: deliver, then wait up to `wait_ms` for the
/// reply: 200 with it, else 202 with the id to poll (`Location`) or
/// follow (`…/events`); at once 202 with `"paused": true` when the
/// agency is paused by its budget.
async fn post_message(
    State(st): State<Arc<AppState>>,
    Extension(caller): Extension<OrgCaller>,
    body: Body,
) -> Answer {
    if let OrgCaller::Key(secret) = &caller
        && let Err(r) = st.agency_rate.take(secret, std::time::Instant::now())
    {
        return Ok(limited(
            &format!(
                "failed to send a message: this API key posted faster than agency_api.messages_per_minute = {} allows (agency_api.burst = {} at once); retry after {} s",
                r.per_minute, r.burst, r.retry_after_secs
            ),
            "agency_api.messages_per_minute",
            u64::from(r.per_minute),
            r.retry_after_secs,
        ));
    }
    let bytes = axum::body::to_bytes(body, MAX_BODY).await.map_err(|_| {
        BadRequest(format!(
            "failed to read the request: its body is larger than {MAX_BODY} bytes; a message may be at most {} bytes",
            agency_service::MAX_ORG_MESSAGE_BYTES
        ))
    })?;
    let req: PostReq = serde_json::from_slice(&bytes).map_err(|e| {
        BadRequest(format!(
            "failed to parse the request body: {e}; send JSON {{\"agency\": NAME, \"message\": TEXT, \"conversation\"?: ID, \"wait_ms\"?: MS}}"
        ))
    })?;
    let conversation: Option<ConversationId> = req
        .conversation
        .as_deref()
        .map(|c| parse("conversation", c))
        .transpose()?;
    let wait = req.wait_ms.unwrap_or(0);
    if wait > MAX_WAIT_MS {
        return Err(BadRequest(format!(
            "failed to accept wait_ms {wait}: wait at most {MAX_WAIT_MS} ms; for longer, follow GET /v1/agency/messages/ID/events"
        )));
    }
    // Subscribed before the message exists: a reply that comes at once is
    // not missed.
    let events = st.svc.subscribe();
    let deadline = Instant::now() + Duration::from_millis(wait);
    let svc = st.svc.clone();
    let c = caller.clone();
    let posted =
        blocking(move || svc.org_message_post(&c, &req.agency, &req.message, conversation)).await;
    let v = match posted {
        Ok(v) => v,
        Err(r) => return Ok(r),
    };
    let v = if wait == 0 {
        v
    } else {
        match wait_for_reply(&st, &caller, v.id, events, deadline, true).await {
            Ok(v) => v,
            Err(r) => return Ok(r),
        }
    };
    Ok(answer(&v))
}

/// `GET /v1/agency/messages/{id}`: where it stands, 200 either way.
async fn get_message(
    State(st): State<Arc<AppState>>,
    Extension(caller): Extension<OrgCaller>,
    Path(id): Path<String>,
) -> Answer {
    let id: OrgMessageId = parse("agency message", &id)?;
    Ok(call(&st.svc, move |svc| svc.org_message_get(&caller, id)).await)
}

/// 200 with the reply, or 202 and where to look for it.
fn answer(v: &OrgMessageView) -> Response {
    let json = axum::Json(v);
    if v.status == OrgMessageStatus::Pending {
        let location = format!("/v1/agency/messages/{}", v.id);
        (StatusCode::ACCEPTED, [(header::LOCATION, location)], json).into_response()
    } else {
        json.into_response()
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ServiceError> + Send + 'static,
) -> Result<T, Response> {
    let span = tracing::Span::current();
    match tokio::task::spawn_blocking(move || span.in_scope(f)).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(service_error(&e)),
        Err(_) => Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "failed to run the request: the worker panicked",
        )),
    }
}

async fn read(
    st: &AppState,
    caller: &OrgCaller,
    id: OrgMessageId,
) -> Result<OrgMessageView, Response> {
    let (svc, caller) = (st.svc.clone(), caller.clone());
    blocking(move || svc.org_message_get(&caller, id)).await
}

/// The message once answered, or as it stands at `deadline` (or, with
/// `until_paused`, as soon as it is seen paused). Reads it now and after
/// each event that may concern it, not on a timer.
async fn wait_for_reply(
    st: &AppState,
    caller: &OrgCaller,
    id: OrgMessageId,
    mut events: broadcast::Receiver<Event>,
    deadline: Instant,
    until_paused: bool,
) -> Result<OrgMessageView, Response> {
    loop {
        let v = read(st, caller, id).await?;
        // A paused agency answers nothing until the user resumes it: a
        // POST says so now rather than at its deadline (an event stream
        // keeps waiting: ending it would only make its client reconnect).
        if v.status != OrgMessageStatus::Pending
            || (v.paused && until_paused)
            || Instant::now() >= deadline
        {
            return Ok(v);
        }
        if !next_relevant(&mut events, id, deadline).await {
            return read(st, caller, id).await;
        }
    }
}

/// Wait for an event that may have answered `id` (its own, or a lag that
/// may have hidden it): true; false at the deadline or when events end.
async fn next_relevant(
    events: &mut broadcast::Receiver<Event>,
    id: OrgMessageId,
    deadline: Instant,
) -> bool {
    loop {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Err(_) | Ok(Err(broadcast::error::RecvError::Closed)) => return false,
            Ok(Err(broadcast::error::RecvError::Lagged(_))) => return true,
            Ok(Ok(Event::OrgMessageAnswered { message, .. })) if message == id => return true,
            Ok(Ok(_)) => {}
        }
    }
}

/// `GET /v1/agency/messages/{id}/events`: one `reply` event with the
/// answered message, then the end; keep-alive comments meanwhile; after
/// [`EVENTS_MAX`] without a reply, one `pending` event and the end.
async fn events(
    State(st): State<Arc<AppState>>,
    Extension(caller): Extension<OrgCaller>,
    Path(id): Path<String>,
) -> Answer {
    let id: OrgMessageId = parse("agency message", &id)?;
    let rx = st.svc.subscribe();
    // Refusals (unknown id, another agency's) are plain errors, before
    // any stream starts.
    if let Err(r) = read(&st, &caller, id).await {
        return Ok(r);
    }
    let deadline = Instant::now() + EVENTS_MAX;
    let stream = futures_util::stream::unfold(Some((st, caller, rx)), move |state| async move {
        let (st, caller, rx) = state?;
        let event = match wait_for_reply(&st, &caller, id, rx, deadline, false).await {
            Ok(v) => {
                let name = if v.status == OrgMessageStatus::Pending {
                    "pending"
                } else {
                    "reply"
                };
                sse::Event::default()
                    .event(name)
                    .data(serde_json::to_string(&v).unwrap_or_default())
            }
            Err(_) => sse::Event::default()
                .event("error")
                .data(r#"{"error":{"kind":"unauthorized","message":"failed to read the message: the caller may no longer read it"}}"#),
        };
        Some((Ok::<_, Infallible>(event), None))
    });
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyMintReq {
    agency: String,
}

async fn key_mint(
    State(st): State<Arc<AppState>>,
    axum::Json(b): axum::Json<KeyMintReq>,
) -> Response {
    call(&st.svc, move |svc| svc.org_key_mint(USER, &b.agency)).await
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyListQuery {
    agency: Option<String>,
}

async fn key_list(State(st): State<Arc<AppState>>, Query(q): Query<KeyListQuery>) -> Response {
    call(&st.svc, move |svc| {
        svc.org_key_list(USER, q.agency.as_deref())
    })
    .await
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConversationsQuery {
    agency: Option<String>,
    limit: Option<usize>,
}

/// `GET /v1/agency/conversations`: the user's view of the messages from
/// outside and their replies, newest first.
async fn conversations(
    State(st): State<Arc<AppState>>,
    Query(q): Query<ConversationsQuery>,
) -> Response {
    call(&st.svc, move |svc| {
        svc.org_conversations(USER, q.agency.as_deref(), q.limit)
    })
    .await
}

async fn key_revoke(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Answer {
    let id: OrgKeyId = parse("API key", &id)?;
    Ok(call(&st.svc, move |svc| {
        svc.org_key_revoke(USER, id)
            .map(|revoked| agency_api::KeyRevoked { id, revoked })
    })
    .await)
}
