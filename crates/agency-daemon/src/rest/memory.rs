//! REST routes for handlers' memory (`agency memory`):
//! `GET /v1/memory/{handler}/search?q=…&limit=&kind=&tag=&all=`,
//! `GET`/`DELETE /v1/memory/{handler}/{id}` (read one, in any state; forget
//! one), `GET /v1/memory/{handler}/status`,
//! `GET /v1/memory/{handler}/compactions` and
//! `POST /v1/memory/{handler}/compactions/{id}/undo`. One service call as
//! the user each.

use std::sync::Arc;

use agency_core::{HandlerId, MemoryCompactionId, MemoryId};
use agency_service::MemorySearch;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::routing::{get, post};
use serde::Deserialize;

use crate::rest::USER;
use crate::server::AppState;
use agency_http::{Answer, call, parse};

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/v1/memory/{handler}/search", get(search))
        .route("/v1/memory/{handler}/status", get(status))
        .route("/v1/memory/{handler}/compactions", get(compactions))
        .route("/v1/memory/{handler}/compactions/{id}/undo", post(undo))
        .route("/v1/memory/{handler}/{id}", get(show).delete(forget))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SearchQuery {
    q: String,
    limit: Option<usize>,
    kind: Option<String>,
    /// One tag; the memory must carry it.
    tag: Option<String>,
    /// Forgotten and condensed memories too.
    #[serde(default)]
    all: bool,
}

async fn search(
    State(st): State<Arc<AppState>>,
    Path(handler): Path<String>,
    Query(q): Query<SearchQuery>,
) -> Answer {
    let h: HandlerId = parse("handler", &handler)?;
    let s = MemorySearch {
        query: q.q,
        tags: q.tag.into_iter().collect(),
        kind: q.kind,
        since: None,
        until: None,
        limit: q.limit,
        all_states: q.all,
    };
    Ok(call(&st.svc, move |svc| svc.memory_search(USER, Some(h), &s)).await)
}

async fn show(State(st): State<Arc<AppState>>, Path((h, id)): Path<(String, String)>) -> Answer {
    let h: HandlerId = parse("handler", &h)?;
    let id: MemoryId = parse("memory", &id)?;
    Ok(call(&st.svc, move |svc| svc.memory_show(USER, Some(h), id)).await)
}

async fn forget(State(st): State<Arc<AppState>>, Path((h, id)): Path<(String, String)>) -> Answer {
    let h: HandlerId = parse("handler", &h)?;
    let id: MemoryId = parse("memory", &id)?;
    Ok(call(&st.svc, move |svc| svc.memory_forget(USER, Some(h), id)).await)
}

async fn status(State(st): State<Arc<AppState>>, Path(h): Path<String>) -> Answer {
    let h: HandlerId = parse("handler", &h)?;
    Ok(call(&st.svc, move |svc| svc.memory_status(USER, Some(h))).await)
}

async fn compactions(State(st): State<Arc<AppState>>, Path(h): Path<String>) -> Answer {
    let h: HandlerId = parse("handler", &h)?;
    Ok(call(&st.svc, move |svc| svc.memory_compactions(USER, Some(h))).await)
}

async fn undo(State(st): State<Arc<AppState>>, Path((h, id)): Path<(String, String)>) -> Answer {
    let h: HandlerId = parse("handler", &h)?;
    let id: MemoryCompactionId = parse("memory compaction", &id)?;
    Ok(call(&st.svc, move |svc| svc.memory_undo(USER, h, id)).await)
}
