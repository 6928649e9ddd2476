//! REST routes for pipeline runs: `POST /v1/pipelines/runs`
//! with the compiled Pipeline Model, the input and the run's level starts a
//! run; `POST /v1/pipelines/{name}/runs` does the same for a pipeline the
//! daemon knows by name (`<home>/pipelines/NAME.pipeline`, else a built-in:
//! `agencycore`); `GET /v1/pipelines/runs` lists runs
//! (`?unfinished=true`, `?limit=N`); `GET /v1/pipelines/runs/{id}` shows
//! one with its stages; `POST /v1/pipelines/runs/{id}/stop` stops one.
//! One service call as the user each; the service re-checks the model and
//! validates the input, and the daemon's engine drives the run.

use std::sync::Arc;

use agency_core::HandlerId;
use agency_org::pipeline::PipelineModel;
use agency_service::ServiceError;
use agency_service::pipelines::PipelineStart;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::routing::{get, post};
use serde::Deserialize;

use crate::rest::USER;
use crate::server::AppState;
use agency_http::{Answer, call, parse};

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/v1/pipelines/runs", get(runs).post(start))
        .route("/v1/pipelines/runs/{id}", get(show))
        .route("/v1/pipelines/runs/{id}/stop", post(stop))
        .route("/v1/pipelines/{name}/runs", post(start_named))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NamedBody {
    input: serde_json::Value,
    #[serde(default)]
    level: i64,
    #[serde(default)]
    live_tools: bool,
}

async fn start_named(
    State(st): State<Arc<AppState>>,
    Path(name): Path<String>,
    axum::Json(b): axum::Json<NamedBody>,
) -> Answer {
    let home = st.home.clone();
    Ok(call(&st.svc, move |svc| {
        let model = named(&home, &name)?;
        svc.pipeline_start(
            USER,
            PipelineStart {
                model,
                input: b.input,
                level: b.level,
                live_tools: b.live_tools,
            },
        )
    })
    .await)
}

/// The pipeline named `name`: the home's `pipelines/NAME.pipeline`
/// compiled now, else a built-in one. The name is a plain word, so it
/// cannot lead out of the home's `pipelines/` folder.
fn named(home: &std::path::Path, name: &str) -> Result<PipelineModel, ServiceError> {
    let plain = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if !plain {
        return Err(ServiceError::invalid(format!(
            "failed to find pipeline {name:?}: a pipeline name is 1-64 letters, digits, '-' or '_'"
        )));
    }
    let file = home.join("pipelines").join(format!("{name}.pipeline"));
    if file.is_file() {
        return agency_org::pipeline::compile_pipeline(&file).map_err(|e| {
            ServiceError::invalid(format!(
                "failed to compile pipeline {name} ({}): {}",
                file.display(),
                e.diagnostics
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ")
            ))
        });
    }
    if name == "agencycore" {
        return agency_org::pipeline::agencycore().map_err(|e| {
            ServiceError::invalid(format!("failed to compile the built-in AgencyCore: {e}"))
        });
    }
    Err(ServiceError::not_found(
        "pipeline",
        format!("{name} (neither built in nor {})", file.display()),
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StartBody {
    model: PipelineModel,
    input: serde_json::Value,
    #[serde(default)]
    level: i64,
    #[serde(default)]
    live_tools: bool,
}

async fn start(State(st): State<Arc<AppState>>, axum::Json(b): axum::Json<StartBody>) -> Answer {
    Ok(call(&st.svc, move |svc| {
        svc.pipeline_start(
            USER,
            PipelineStart {
                model: b.model,
                input: b.input,
                level: b.level,
                live_tools: b.live_tools,
            },
        )
    })
    .await)
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunsQuery {
    #[serde(default)]
    unfinished: bool,
    limit: Option<usize>,
}

async fn runs(State(st): State<Arc<AppState>>, Query(q): Query<RunsQuery>) -> Answer {
    Ok(call(&st.svc, move |svc| {
        svc.pipeline_runs(USER, q.unfinished, q.limit)
    })
    .await)
}

async fn stop(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Answer {
    let id: HandlerId = parse("pipeline run", &id)?;
    Ok(call(&st.svc, move |svc| svc.pipeline_stop(USER, id)).await)
}

async fn show(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Answer {
    let id: HandlerId = parse("pipeline run", &id)?;
    Ok(call(&st.svc, move |svc| svc.pipeline_show(USER, id)).await)
}
