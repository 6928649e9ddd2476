//! The web dashboard: pages served under `/dashboard` on the daemon's
//! loopback TCP listener, for the user, live from the event log.
//!
//! `agency dashboard` asks the daemon (admin socket, admin token) for a
//! one-time login URL ([`login_routes`]); visiting it opens a session held
//! in a cookie. Every other route needs that session ([`auth`]); a POST
//! also needs the session's CSRF token, and `Host`/`Origin` must name this
//! listener. An agent's bearer token opens nothing: the dashboard never
//! reads `Authorization`. The JSON views ([`views`]), actions
//! ([`actions`]) and the Lessons page's reads and actions ([`lessons`])
//! call the service as [`Principal::User`], the only identity a session
//! carries; the page's assets are compiled in ([`assets`]).
//!
//! Invariant: identity is the session's (the user's); every read and every
//! action is one service call, which checks it. Nothing here spawns a
//! process or shells out, and no text an agent wrote reaches the page as
//! markup (the page sets it with `textContent`).

pub mod actions;
pub mod assets;
pub mod auth;
pub mod lessons;
pub mod views;

use std::sync::Arc;

use agency_core::Principal;
use agency_service::System;
use axum::Router;
use axum::extract::State;
use axum::middleware::{from_fn, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

pub use auth::Auth;

/// The only identity the dashboard acts as.
pub(crate) const USER: Principal = Principal::User;

/// What the dashboard's routes share: the service and the sessions.
#[derive(Debug)]
pub struct Dashboard {
    pub(crate) svc: Arc<System>,
    pub(crate) auth: Auth,
}

impl Dashboard {
    /// The dashboard of the listener on 127.0.0.1:`port`.
    pub fn new(svc: Arc<System>, port: u16) -> Arc<Dashboard> {
        Arc::new(Dashboard {
            svc,
            auth: Auth::new(port),
        })
    }
}

/// The dashboard's routes, all under `/dashboard`, each behind the
/// session guard (the login URL excepted) and with the security headers.
pub fn routes<S: Clone + Send + Sync + 'static>(dash: Arc<Dashboard>) -> Router<S> {
    Router::new()
        .route("/dashboard/login", get(auth::login))
        .route("/dashboard", get(assets::index))
        .route("/dashboard/", get(assets::index))
        .route("/dashboard/assets/{name}", get(assets::asset))
        .route("/dashboard/api/session", get(auth::session))
        .route("/dashboard/api/logout", post(auth::logout))
        .merge(views::routes())
        .merge(actions::routes())
        .merge(lessons::routes())
        // No fallback: the daemon's own answers an unknown path (axum
        // refuses to merge two routers that both have one).
        .layer(from_fn_with_state(dash.clone(), auth::guard))
        .layer(from_fn(auth::headers))
        .with_state(dash)
}

/// `POST /v1/dashboard/login` (goes behind the admin token): a one-time
/// login URL.
pub fn login_routes<S: Clone + Send + Sync + 'static>(dash: Arc<Dashboard>) -> Router<S> {
    Router::new()
        .route("/v1/dashboard/login", post(mint_login))
        .with_state(dash)
}

async fn mint_login(State(d): State<Arc<Dashboard>>) -> Response {
    axum::Json(d.auth.mint_login()).into_response()
}
