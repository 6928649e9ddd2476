//! The model gateway: `/model/{upstream}/v1/…` on the
//! agents' listener (127.0.0.1, never the admin socket). Agents reach
//! their model only here, with their own token as the credential
//! (`Authorization: Bearer` or `x-api-key`, as the two APIs' clients send
//! it); the daemon forwards to the `[models.NAME]` upstream with the
//! provider key, which therefore exists in the daemon's memory alone.
//!
//! Routes: the Anthropic Messages API (`v1/messages`, streamed or not, and
//! `v1/messages/count_tokens`) and the OpenAI chat completions
//! (`v1/chat/completions`). Request and answer bodies pass unchanged, byte
//! for byte, with two exceptions: a streamed chat completion that did not
//! ask for usage gets `stream_options.include_usage = true`, since that is
//! the only way its usage is told, and an upstream that names its `model`
//! gets that model whatever the agent asked for. An agent may use only its
//! handler's upstream (`agency model set`, inherited) or, without one, the
//! runtime's. Every metered call is reserved with the
//! service before it is forwarded and settled with the usage read from the
//! answer as it streams by (`usage.rs`) when the answer ends or
//! the client goes away (the budget seam: `Service::model_call_reserve`);
//! a call whose final usage was never read is charged at its reservation
//! (`meter.rs`); reservations and settlements of concurrent calls are
//! committed together (`metering.rs`). Request bodies are read within a deadline and a
//! per-agent in-flight cap (`body.rs`); `count_tokens`, which the
//! provider does not bill, is still refused while the subtree is paused.

//!
//! Invariant: no model call leaves without a reservation, and every
//! reservation is settled or charged in full.

pub mod body;
mod head;
mod json;
mod meter;
mod metering;
mod relay;
mod usage;

use std::sync::Arc;

use agency_mcp::AgentIdentity;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{Next, from_fn, from_fn_with_state};
use axum::response::Response;
use axum::routing::post;
use axum::{Extension, Router};
use futures_util::StreamExt;

use agency_config::live::Live;
use agency_config::models::Api;
use agency_config::secrets::ExposeSecret;
use agency_config::upstreams::Models;
use agency_http::{AgentGuard, error};
use agency_service::System;
use meter::{Meter, Phase};
pub use metering::Metering;
use usage::UsageTap;

/// Request headers never forwarded: the agent's credential, what names
/// the connection to the gateway rather than to the upstream, and
/// `accept-encoding` (the answer must arrive uncompressed to be metered;
/// it is passed on exactly as received).
const DROPPED_REQUEST: &[&str] = &[
    "authorization",
    "x-api-key",
    "host",
    "content-length",
    "connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "cookie",
    "accept-encoding",
];

/// Response headers not passed back (hop-by-hop; the body is re-framed).
const DROPPED_RESPONSE: &[&str] = &[
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "set-cookie",
    "trailer",
    "upgrade",
];

/// The gateway's state: the system handle (calls are reserved and charged
/// for the calling agent's handler), the upstreams with their keys and the
/// price table (replaced by `agency reload`), and the request bytes each
/// agent has in flight.
#[derive(Debug)]
pub struct Gateway {
    pub svc: Arc<System>,
    pub models: Arc<Live<Models>>,
    pub bodies: Arc<body::InFlight>,
    /// Forwards to the upstreams: no redirects (a redirect would carry the
    /// provider key elsewhere), a connect timeout, no overall timeout.
    pub client: reqwest::Client,
    /// Commits the calls' reservations and settlements in batches
    /// (`metering.rs`).
    pub metering: Arc<Metering>,
}

/// `/model/{upstream}/{*path}`, behind the agent token guard.
pub fn routes(state: Arc<Gateway>, guard: AgentGuard) -> Router {
    Router::new()
        .route("/model/{upstream}/{*path}", post(forward))
        .layer(from_fn_with_state(guard, agent_and_model))
        // Outermost: Anthropic clients send their key as `x-api-key`.
        .layer(from_fn(api_key_as_bearer))
        .with_state(state)
}

/// The agent's token check, with its handler's model upstream read in the
/// same transaction (every call needs both).
async fn agent_and_model(State(guard): State<AgentGuard>, req: Request, next: Next) -> Response {
    agency_http::agent_only_with(&guard, req, next, |svc, token| {
        svc.token_model(token)
            .map(|(id, chosen)| (id, Chosen(chosen)))
    })
    .await
}

/// The upstream the calling agent's handler uses (`None`: the runtime's),
/// as read with its token.
#[derive(Debug, Clone)]
struct Chosen(Option<String>);

/// The Anthropic SDKs (Claude Code with `ANTHROPIC_API_KEY`, the built-in
/// loop) send the key as `x-api-key`: the agent's token then arrives
/// there, and the token guard reads `Authorization`.
async fn api_key_as_bearer(mut req: Request, next: Next) -> Response {
    if !req.headers().contains_key(header::AUTHORIZATION)
        && let Some(v) = req.headers().get("x-api-key")
        && let Ok(v) = HeaderValue::from_bytes(&[b"Bearer ", v.as_bytes()].concat())
    {
        req.headers_mut().insert(header::AUTHORIZATION, v);
    }
    next.run(req).await
}

/// Whether `path` (after `/model/NAME/`) is served for `api`, and whether
/// calls to it are metered (`count_tokens` is not billed; it is still
/// admitted, so a paused subtree reaches no provider).
fn route_of(api: Api, path: &str) -> Option<bool> {
    match (api, path) {
        (Api::Anthropic, "v1/messages") | (Api::OpenAi, "v1/chat/completions") => Some(true),
        (Api::Anthropic, "v1/messages/count_tokens") => Some(false),
        _ => None,
    }
}

async fn forward(
    State(st): State<Arc<Gateway>>,
    Extension(id): Extension<AgentIdentity>,
    Extension(Chosen(chosen)): Extension<Chosen>,
    Path((name, path)): Path<(String, String)>,
    req: Request,
) -> Response {
    // One snapshot for the whole call: `agency reload` may replace the
    // upstreams and prices meanwhile; this call is priced by what it began with.
    let models = st.models.load();
    let Some(upstream) = models.get(&name).cloned() else {
        return error(
            StatusCode::NOT_FOUND,
            "not_found",
            &format!(
                "failed to reach model upstream {name}: agency.toml declares no [models.{name}]"
            ),
        );
    };
    // An agent uses its handler's upstream (`agency model set`, inherited)
    // or the runtime's, and no other: it cannot pick a dearer model than
    // the one the user gave it. `chosen` was read with its token.
    if let Some(own) = models.allowed_for(chosen.as_deref())
        && own != name
    {
        return error(
            StatusCode::FORBIDDEN,
            "denied",
            &format!(
                "failed to reach model upstream {name}: your handler's model upstream is {own}; use /model/{own} (only the user changes it, with `agency model set`)"
            ),
        );
    }
    let Some(metered) = route_of(upstream.api, &path) else {
        return error(
            StatusCode::NOT_FOUND,
            "not_found",
            &format!(
                "failed to route /model/{name}/{path}: upstream {name} speaks the {} API, served at {}",
                upstream.api.as_str(),
                match upstream.api {
                    Api::Anthropic => "v1/messages and v1/messages/count_tokens",
                    Api::OpenAi => "v1/chat/completions",
                }
            ),
        );
    };
    let query = req.uri().query().map(str::to_owned);
    let mut headers = HeaderMap::new();
    for (k, v) in req.headers() {
        if !DROPPED_REQUEST.contains(&k.as_str()) && !k.as_str().starts_with("proxy-") {
            headers.append(k.clone(), v.clone());
        }
    }
    let (parts, req_body) = req.into_parts();
    // Held (counted against the agent's in-flight bytes) until the
    // upstream has the request.
    let (mut body, held) = match body::read(
        &st.bodies,
        id.agent,
        &name,
        &upstream,
        &parts.headers,
        req_body,
    )
    .await
    {
        Ok(b) => b,
        Err(refusal) => return refusal,
    };
    let who = agency_core::Principal::agent(id.handler, id.agent);
    let mut meter = None;
    if metered {
        // Only a handful of top-level fields matter here; a conversation
        // runs to hundreds of kilobytes, which are skipped, not read as
        // JSON (`gateway/head.rs`).
        let Some(head) = head::head(&body) else {
            return not_an_object(&name);
        };
        let mut json = serde_json::Value::Object(head);
        let stream = json["stream"].as_bool().unwrap_or(false);
        let pin_model = upstream
            .model
            .as_ref()
            .filter(|m| json["model"].as_str() != Some(m.as_str()));
        let add_usage = upstream.api == Api::OpenAi
            && stream
            && json["stream_options"]["include_usage"].as_bool() != Some(true);
        if pin_model.is_some() || add_usage {
            // Rare (an upstream that names its model, an OpenAI stream
            // without usage): the whole body is parsed and written again.
            let Ok(mut full) = serde_json::from_slice::<serde_json::Value>(&body) else {
                return not_an_object(&name);
            };
            // The upstream's own model, when it names one, whatever the
            // agent asked for (a handler given a cheap model stays on it).
            if let Some(m) = pin_model
                && let Some(obj) = full.as_object_mut()
            {
                obj.insert("model".into(), m.clone().into());
            }
            if add_usage && let Some(obj) = full.as_object_mut() {
                let opts = obj
                    .entry("stream_options")
                    .or_insert_with(|| serde_json::json!({}));
                if let Some(o) = opts.as_object_mut() {
                    o.insert("include_usage".into(), true.into());
                }
            }
            body = serde_json::to_vec(&full).unwrap_or_default().into();
            if let Some(m) = pin_model {
                json["model"] = m.clone().into();
            }
        }
        let (request, price) = match meter::plan(&models, &name, &upstream, &json, body.len()) {
            Ok(p) => p,
            Err(e) => return error(StatusCode::BAD_REQUEST, "invalid", &e),
        };
        match st.metering.reserve(who, request).await {
            Ok(r) => meter = Some(Meter::new(st.metering.clone(), price, r)),
            Err(e) => return refusal(&e),
        }
    } else {
        // Not billed (`count_tokens`), yet it reaches the provider: a
        // paused subtree reaches none.
        let svc = st.svc.clone();
        if let Err(refusal) = admission(move || svc.model_call_admit_unbilled(who)).await {
            return refusal;
        }
    }
    // The provider's key, read here only; marked sensitive, so that the
    // HTTP client keeps it out of its logs and header compression.
    match upstream.api {
        Api::Anthropic => {
            if let Some(k) = &upstream.key
                && let Ok(mut v) = HeaderValue::from_str(k.expose_secret())
            {
                v.set_sensitive(true);
                headers.insert("x-api-key", v);
            }
        }
        Api::OpenAi => {
            if let Some(k) = &upstream.key
                && let Ok(mut v) = HeaderValue::from_str(&format!("Bearer {}", k.expose_secret()))
            {
                v.set_sensitive(true);
                headers.insert(header::AUTHORIZATION, v);
            }
        }
    }
    let mut url = format!("{}/{path}", upstream.root);
    if let Some(q) = query {
        url.push('?');
        url.push_str(&q);
    }
    // From here the provider may bill the call whatever becomes of this
    // handler (the agent gone mid-request drops it): a meter dropped now
    // charges the reservation.
    if let Some(m) = meter.as_mut() {
        m.phase = Phase::Sending;
    }
    let sent = st
        .client
        .post(&url)
        .headers(headers)
        .body(body)
        .send()
        .await;
    drop(held);
    let answer = match sent {
        Ok(r) => r,
        Err(e) => {
            // Refused before a byte was sent: nothing was billed.
            if e.is_connect()
                && let Some(m) = meter.as_mut()
            {
                m.phase = Phase::NotSent;
            }
            drop(meter);
            // The URL is the configured one; no key is in it (validated).
            return error(
                StatusCode::BAD_GATEWAY,
                "unavailable",
                &format!("failed to reach model upstream {name}: {}", e.without_url()),
            );
        }
    };
    let status = answer.status();
    let sse = answer
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
    let mut out = Response::builder().status(status);
    for (k, v) in answer.headers() {
        if !DROPPED_RESPONSE.contains(&k.as_str()) {
            out = out.header(k, v);
        }
    }
    let stream = relay::Coalesce::new(answer.bytes_stream());
    let mut stream = match meter {
        None => stream.boxed(),
        Some(mut m) => {
            m.phase = Phase::Answered(i64::from(status.as_u16()));
            m.tap = Some(UsageTap::new(upstream.api, sse));
            // The meter lives in the closure: it settles when the body is
            // dropped, after its last byte or when the agent goes away.
            stream
                .map(move |chunk| {
                    if let (Ok(bytes), Some(tap)) = (&chunk, m.tap.as_mut()) {
                        tap.feed(bytes);
                    }
                    chunk
                })
                .boxed()
        }
    };
    // The answer's first bytes go out with its head, in one write (the
    // head is sent as soon as it is returned, the body polled after). A
    // failure is not put first: the head would be dropped unsent with it.
    let body = match stream.next().await {
        Some(Ok(first)) => Body::from_stream(futures_util::stream::iter([Ok(first)]).chain(stream)),
        Some(Err(e)) => Body::from_stream(futures_util::stream::once(async move {
            tokio::task::yield_now().await;
            Err::<axum::body::Bytes, _>(e)
        })),
        None => Body::empty(),
    };
    out.body(body).unwrap_or_else(|e| {
        error(
            StatusCode::BAD_GATEWAY,
            "unavailable",
            &format!("failed to relay the answer of model upstream {name}: {e}"),
        )
    })
}

fn not_an_object(name: &str) -> Response {
    error(
        StatusCode::BAD_REQUEST,
        "invalid",
        &format!(
            "failed to forward to model upstream {name}: the request body is not a JSON object"
        ),
    )
}

/// A refused admission as the answer to send back: a budget reached is a
/// 429 the agent can act on (stop and ask for more); anything else is a
/// refusal.
fn refusal(e: &agency_service::ServiceError) -> Response {
    match e {
        agency_service::ServiceError::Quota(_) => {
            error(StatusCode::TOO_MANY_REQUESTS, "budget", &e.to_string())
        }
        _ => error(StatusCode::FORBIDDEN, "denied", &e.to_string()),
    }
}

/// Run one of the service's admissions off the async threads (a store
/// write); its refusal as the answer to send back ([`refusal`]).
async fn admission<T: Send + 'static>(
    f: impl FnOnce() -> agency_service::Result<T> + Send + 'static,
) -> Result<T, Response> {
    let span = tracing::Span::current();
    match tokio::task::spawn_blocking(move || span.in_scope(f)).await {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(e)) => Err(refusal(&e)),
        Err(_) => Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "failed to admit the model call: the check was cancelled",
        )),
    }
}
