//! REST routes for lessons pipelines learned: `GET /v1/lessons`
//! (`?pipeline=P&state=S[,S…]&limit=N`), `GET /v1/lessons/export`
//! (`?pipeline=P`), `GET /v1/lessons/{id}` (with history and versions),
//! and `POST /v1/lessons/{id}/approve|reject|retire|rollback`. One
//! service call as the user each; the service checks every change.

use std::sync::Arc;

use agency_core::LessonId;
use agency_core::status::LessonState;
use agency_http::{Answer, BadRequest, call, parse};
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::routing::{get, post};
use serde::Deserialize;

use crate::rest::USER;
use crate::server::AppState;

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/v1/lessons", get(list))
        .route("/v1/lessons/export", get(export))
        .route("/v1/lessons/{id}", get(show))
        .route("/v1/lessons/{id}/approve", post(approve))
        .route("/v1/lessons/{id}/reject", post(reject))
        .route("/v1/lessons/{id}/retire", post(retire))
        .route("/v1/lessons/{id}/rollback", post(rollback))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    pipeline: Option<String>,
    /// Comma-separated states.
    state: Option<String>,
    limit: Option<usize>,
}

async fn list(State(st): State<Arc<AppState>>, Query(q): Query<ListQuery>) -> Answer {
    let mut states = Vec::new();
    for s in q
        .state
        .iter()
        .flat_map(|s| s.split(','))
        .filter(|s| !s.is_empty())
    {
        let Some(state) = LessonState::parse(s) else {
            return Err(BadRequest(format!(
                "failed to list lessons: unknown state {s:?} (one of {})",
                LessonState::ALL.map(|s| s.as_str()).join(", ")
            )));
        };
        states.push(state);
    }
    Ok(call(&st.svc, move |svc| {
        svc.lessons(USER, q.pipeline.as_deref(), &states, q.limit)
    })
    .await)
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExportQuery {
    pipeline: Option<String>,
}

async fn export(State(st): State<Arc<AppState>>, Query(q): Query<ExportQuery>) -> Answer {
    Ok(call(&st.svc, move |svc| {
        svc.lessons_export(USER, q.pipeline.as_deref())
    })
    .await)
}

async fn show(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Answer {
    let id: LessonId = parse("lesson", &id)?;
    Ok(call(&st.svc, move |svc| svc.lesson_show(USER, id)).await)
}

async fn approve(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Answer {
    let id: LessonId = parse("lesson", &id)?;
    Ok(call(&st.svc, move |svc| svc.lesson_approve(USER, id)).await)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReasonBody {
    reason: String,
}

async fn reject(
    State(st): State<Arc<AppState>>,
    Path(id): Path<String>,
    axum::Json(b): axum::Json<ReasonBody>,
) -> Answer {
    let id: LessonId = parse("lesson", &id)?;
    Ok(call(&st.svc, move |svc| svc.lesson_reject(USER, id, &b.reason)).await)
}

async fn retire(
    State(st): State<Arc<AppState>>,
    Path(id): Path<String>,
    axum::Json(b): axum::Json<ReasonBody>,
) -> Answer {
    let id: LessonId = parse("lesson", &id)?;
    Ok(call(&st.svc, move |svc| svc.lesson_retire(USER, id, &b.reason)).await)
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RollbackBody {
    /// The version to restore; the one before the latest when absent.
    to: Option<i64>,
}

async fn rollback(
    State(st): State<Arc<AppState>>,
    Path(id): Path<String>,
    axum::Json(b): axum::Json<RollbackBody>,
) -> Answer {
    let id: LessonId = parse("lesson", &id)?;
    Ok(call(&st.svc, move |svc| svc.lesson_rollback(USER, id, b.to)).await)
}
