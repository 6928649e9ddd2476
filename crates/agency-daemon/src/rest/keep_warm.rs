//! REST routes for a handler's keep-warm time (`agency
//! keep-warm`): `GET /v1/handlers/{id}/keep-warm` (the user's and the
//! organisation's settings, the one that holds and where it comes from),
//! `POST` with `{"keep_warm": "5m" | "off" | "default"}`, and `DELETE`
//! (the same as `default`). One service call as the user each.

use std::sync::Arc;

use agency_core::HandlerId;
use agency_service::KeepWarmSetting;
use axum::Router;
use axum::extract::{Path, State};
use axum::routing::get;
use serde::Deserialize;

use crate::rest::USER;
use crate::server::AppState;
use agency_http::{Answer, BadRequest, call, parse};

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new().route(
        "/v1/handlers/{id}/keep-warm",
        get(show).post(set).delete(clear),
    )
}

async fn show(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Answer {
    let id: HandlerId = parse("handler", &id)?;
    let d = *st.keep_warm.load();
    Ok(call(&st.svc, move |svc| svc.keep_warm_show(USER, id, d)).await)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    /// A duration (`90s`, `5m`, `1h30m`), `off` or `default`.
    keep_warm: String,
}

async fn set(
    State(st): State<Arc<AppState>>,
    Path(id): Path<String>,
    axum::Json(b): axum::Json<Body>,
) -> Answer {
    let id: HandlerId = parse("handler", &id)?;
    let setting = KeepWarmSetting::parse(&b.keep_warm).map_err(|e| BadRequest(e.to_string()))?;
    let d = *st.keep_warm.load();
    Ok(call(&st.svc, move |svc| svc.keep_warm_set(USER, id, setting, d)).await)
}

async fn clear(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Answer {
    let id: HandlerId = parse("handler", &id)?;
    let d = *st.keep_warm.load();
    Ok(call(&st.svc, move |svc| {
        svc.keep_warm_set(USER, id, KeepWarmSetting::Default, d)
    })
    .await)
}
