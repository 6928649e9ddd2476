//! The Lessons page's reads and actions: the lessons pipelines learned
//! with their utility, one lesson's history and versions, each
//! pipeline's score trend (its recent runs' Gatekeeper scorecards), and
//! the user's decisions on a lesson (approve, reject, retire, roll back).
//! One service call as the user each; the guard has checked the session
//! (and, for a POST, the CSRF token); the service checks the rest.

use std::sync::Arc;

use agency_core::LessonId;
use agency_core::status::LessonState;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::routing::{get, post};
use serde::Deserialize;

use crate::{Dashboard, USER};
use agency_http::{Answer, BadRequest, call, parse};

/// Lessons the page lists at most (the service's bound for a listing).
const MAX_LISTED: usize = 1000;
/// Lessons waiting for the user that "Needs you" lists at most.
pub(crate) const MAX_WAITING: usize = 200;

pub(crate) fn routes() -> Router<Arc<Dashboard>> {
    Router::new()
        .route("/dashboard/api/lessons", get(list))
        .route("/dashboard/api/lessons/{id}", get(show))
        .route("/dashboard/api/scores", get(scores))
        .route("/dashboard/api/lessons/{id}/approve", post(approve))
        .route("/dashboard/api/lessons/{id}/reject", post(reject))
        .route("/dashboard/api/lessons/{id}/retire", post(retire))
        .route("/dashboard/api/lessons/{id}/rollback", post(rollback))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    pipeline: Option<String>,
    /// One state (`awaiting_user`, `admitted`, …); every state if absent.
    state: Option<String>,
}

async fn list(State(d): State<Arc<Dashboard>>, Query(q): Query<ListQuery>) -> Answer {
    let states = match q.state.as_deref().filter(|s| !s.is_empty()) {
        None => Vec::new(),
        Some(s) => vec![LessonState::parse(s).ok_or_else(|| {
            BadRequest(format!(
                "failed to list lessons: unknown state {s:?} (one of {})",
                LessonState::ALL.map(|s| s.as_str()).join(", ")
            ))
        })?],
    };
    Ok(call(&d.svc, move |s| {
        s.lessons(USER, q.pipeline.as_deref(), &states, Some(MAX_LISTED))
    })
    .await)
}

async fn show(State(d): State<Arc<Dashboard>>, Path(id): Path<String>) -> Answer {
    let id: LessonId = parse("lesson", &id)?;
    Ok(call(&d.svc, move |s| s.lesson_show(USER, id)).await)
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScoresQuery {
    pipeline: Option<String>,
}

/// The newest scored runs (every pipeline's, or one's), newest first.
async fn scores(State(d): State<Arc<Dashboard>>, Query(q): Query<ScoresQuery>) -> Answer {
    Ok(call(&d.svc, move |s| {
        s.pipeline_scores(USER, q.pipeline.as_deref(), None)
    })
    .await)
}

async fn approve(State(d): State<Arc<Dashboard>>, Path(id): Path<String>) -> Answer {
    let id: LessonId = parse("lesson", &id)?;
    Ok(call(&d.svc, move |s| s.lesson_approve(USER, id)).await)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReasonBody {
    reason: String,
}

async fn reject(
    State(d): State<Arc<Dashboard>>,
    Path(id): Path<String>,
    axum::Json(b): axum::Json<ReasonBody>,
) -> Answer {
    let id: LessonId = parse("lesson", &id)?;
    Ok(call(&d.svc, move |s| s.lesson_reject(USER, id, &b.reason)).await)
}

async fn retire(
    State(d): State<Arc<Dashboard>>,
    Path(id): Path<String>,
    axum::Json(b): axum::Json<ReasonBody>,
) -> Answer {
    let id: LessonId = parse("lesson", &id)?;
    Ok(call(&d.svc, move |s| s.lesson_retire(USER, id, &b.reason)).await)
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RollbackBody {
    /// The version to restore; the one before the latest when absent.
    to: Option<i64>,
}

async fn rollback(
    State(d): State<Arc<Dashboard>>,
    Path(id): Path<String>,
    axum::Json(b): axum::Json<RollbackBody>,
) -> Answer {
    let id: LessonId = parse("lesson", &id)?;
    Ok(call(&d.svc, move |s| s.lesson_rollback(USER, id, b.to)).await)
}
