//! The event log over HTTP, for every listener that serves it (the REST
//! API, the dashboard): the query parameters of a read, a page as JSON,
//! and the live stream as Server-Sent Events.
//!
//! The stream is a reader of the log like any other: it reads a page after
//! its cursor, sends it, and when it has caught up waits until the service
//! says events were committed, then reads again. It never relies on being
//! woken once per event, so a slow consumer loses nothing (it falls behind
//! and catches up from the store), and a reconnecting client resumes from
//! `Last-Event-ID` exactly where it left off.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use agency_core::{HandlerId, Principal, Timestamp};
use agency_service::{EventQuery, Service};
use axum::http::HeaderMap;
use axum::response::sse::{self, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::answer::{BadRequest, service_error};

/// How often an idle stream sends a comment, so proxies and clients see
/// it alive (and a gone client is noticed).
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// Events read per page while the stream catches up.
const PAGE: usize = 500;

/// The query of `GET …/events` and `…/events/stream`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventParams {
    /// Only events numbered above this. A stream without it (and without
    /// `since` or `Last-Event-ID`) starts at the log's end: live only.
    pub after: Option<i64>,
    pub handler: Option<String>,
    #[serde(default)]
    pub subtree: bool,
    /// Kinds or families, comma-separated (`mail,agent.ended`).
    pub kind: Option<String>,
    /// Only events at or after this time (milliseconds since the epoch).
    pub since: Option<i64>,
    pub limit: Option<usize>,
}

impl EventParams {
    /// The service's query; `last_event_id` (a stream's resumption point)
    /// wins over `after`.
    pub fn query(&self, last_event_id: Option<i64>) -> Result<EventQuery, BadRequest> {
        let handler = match &self.handler {
            None => None,
            Some(h) => Some(crate::parse::<HandlerId>("handler", h)?),
        };
        if self.subtree && handler.is_none() {
            return Err(BadRequest(
                "failed to read events: `subtree` needs a `handler` to start from".into(),
            ));
        }
        let kinds = self
            .kind
            .as_deref()
            .map(|k| {
                k.split(',')
                    .map(str::trim)
                    .filter(|k| !k.is_empty())
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default();
        Ok(EventQuery {
            after: last_event_id.or(self.after).unwrap_or(0),
            handler,
            subtree: self.subtree,
            kinds,
            since: self.since.map(Timestamp),
            limit: self.limit,
        })
    }
}

/// The `Last-Event-ID` header of a reconnecting `EventSource`, if any.
pub fn last_event_id(headers: &HeaderMap) -> Result<Option<i64>, BadRequest> {
    let Some(v) = headers.get("last-event-id") else {
        return Ok(None);
    };
    v.to_str()
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .filter(|n| *n >= 0)
        .map(Some)
        .ok_or_else(|| {
            BadRequest(
                "failed to resume the event stream: Last-Event-ID is not an event number".into(),
            )
        })
}

/// A page of events for `who`, as JSON.
pub async fn page(svc: &Arc<Service>, who: Principal, q: EventQuery) -> Response {
    crate::call(svc, move |s| s.events_read(who, &q)).await
}

/// The live stream for `who`: every event matching `q` after its cursor
/// (after the log's end when `from_end`), then each one as it is
/// committed, until the client goes. Each SSE event carries the event's
/// number as its `id` and the event (as in a page) as its data. A refusal
/// (a scope the caller may not read, an unknown kind) is a plain error
/// before the stream starts; a refusal later (the caller's token revoked)
/// ends the stream with one `error` event.
pub async fn stream(
    svc: Arc<Service>,
    who: Principal,
    mut q: EventQuery,
    from_end: bool,
) -> Response {
    // Subscribe before the first read: a commit between a read and the
    // wait that follows it still wakes the stream.
    let committed = svc.events_committed();
    let start = {
        let svc = svc.clone();
        let probe = EventQuery {
            limit: Some(1),
            ..q.clone()
        };
        tokio::task::spawn_blocking(move || {
            // The same checks as every later read, made now so that a
            // refusal is a plain error rather than a stream.
            svc.events_read(who, &probe)?;
            svc.events_end(who)
        })
        .await
    };
    match start {
        Ok(Ok(end)) if from_end => q.after = end,
        Ok(Ok(_)) => {}
        Ok(Err(e)) => return service_error(&e),
        Err(_) => {
            return crate::error(
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "failed to start the event stream: the worker panicked",
            );
        }
    }
    q.limit = Some(PAGE);
    let state = Follow {
        svc,
        who,
        q,
        committed,
        ready: Vec::new(),
        done: false,
    };
    let stream = futures_util::stream::unfold(state, |mut f| async move {
        let e = f.next().await?;
        Some((Ok::<_, Infallible>(e), f))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

/// One stream's reader: its cursor, the page it is sending, and its
/// subscription to commits.
struct Follow {
    svc: Arc<Service>,
    who: Principal,
    q: EventQuery,
    committed: tokio::sync::watch::Receiver<i64>,
    /// The page being sent, newest first (popped from the end).
    ready: Vec<sse::Event>,
    done: bool,
}

impl Follow {
    async fn next(&mut self) -> Option<sse::Event> {
        loop {
            if let Some(e) = self.ready.pop() {
                return Some(e);
            }
            if self.done {
                return None;
            }
            // Marked seen before the read: a commit from now on wakes the
            // wait below, also one the read already saw (a spare read).
            self.committed.mark_unchanged();
            let read = {
                let (svc, who, q) = (self.svc.clone(), self.who, self.q.clone());
                tokio::task::spawn_blocking(move || svc.events_read(who, &q)).await
            };
            match read {
                Ok(Ok(page)) => {
                    let caught_up = page.events.len() < PAGE;
                    self.q.after = page.next;
                    self.ready = page
                        .events
                        .iter()
                        .rev()
                        .map(|e| {
                            sse::Event::default()
                                .id(e.seq.to_string())
                                .data(serde_json::to_string(e).unwrap_or_default())
                        })
                        .collect();
                    // Caught up: wait for the next commit (or the client
                    // to go, which drops this future).
                    if self.ready.is_empty() && caught_up && self.committed.changed().await.is_err()
                    {
                        return None;
                    }
                }
                Ok(Err(e)) => {
                    self.done = true;
                    let body = serde_json::json!({
                        "error": { "kind": e.kind(), "message": e.to_string() }
                    });
                    return Some(sse::Event::default().event("error").data(body.to_string()));
                }
                Err(_) => return None,
            }
        }
    }
}
