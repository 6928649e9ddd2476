//! REST routes for applied organisations (issue 12 item 5, `agency up`,
//! `agency down`, `agency orgs`): `POST /v1/orgs` with the Agency Model
//! as the body (`?plan=true`: only say what would change), `GET /v1/orgs`,
//! `DELETE /v1/orgs/{name}`. One service call as the user each; the
//! service checks the model.

use std::sync::Arc;

use agency_org::AgencyModel;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::routing::{delete, get};
use serde::Deserialize;

use crate::rest::{Answer, USER, call};
use crate::server::AppState;

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/v1/orgs", get(orgs).post(apply))
        .route("/v1/orgs/{name}", delete(down))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ApplyQuery {
    #[serde(default)]
    plan: bool,
}

async fn apply(
    State(st): State<Arc<AppState>>,
    Query(q): Query<ApplyQuery>,
    axum::Json(model): axum::Json<AgencyModel>,
) -> Answer {
    Ok(call(&st, move |svc| svc.org_apply(USER, &model, q.plan)).await)
}

async fn orgs(State(st): State<Arc<AppState>>) -> Answer {
    Ok(call(&st, move |svc| svc.orgs(USER)).await)
}

async fn down(State(st): State<Arc<AppState>>, Path(name): Path<String>) -> Answer {
    Ok(call(&st, move |svc| svc.org_down(USER, &name)).await)
}
