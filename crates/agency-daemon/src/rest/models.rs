//! REST routes for the model upstream per handler (`agency model`):
//! `GET /v1/models/{handler}` (its own, the effective one and where that
//! was set) and `POST /v1/models/{handler}` with `{"upstream": "NAME"}` or
//! `{"upstream": null}` to clear it. One service call as the user each.

use std::sync::Arc;

use agency_core::HandlerId;
use axum::Router;
use axum::extract::{Path, State};
use axum::routing::get;
use serde::Deserialize;

use crate::rest::USER;
use crate::server::AppState;
use agency_http::{Answer, call, parse};

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new().route("/v1/models/{id}", get(model_show).post(model_set))
}

async fn model_show(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Answer {
    let id: HandlerId = parse("handler", &id)?;
    Ok(call(&st.svc, move |svc| svc.model_show(USER, id)).await)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelBody {
    /// A `[models.NAME]`; `null` clears the handler's own.
    upstream: Option<String>,
}

async fn model_set(
    State(st): State<Arc<AppState>>,
    Path(id): Path<String>,
    axum::Json(b): axum::Json<ModelBody>,
) -> Answer {
    let id: HandlerId = parse("handler", &id)?;
    Ok(call(&st.svc, move |svc| {
        svc.model_set(USER, id, b.upstream.as_deref())
    })
    .await)
}
