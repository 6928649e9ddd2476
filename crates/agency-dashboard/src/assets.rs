//! The page and its assets, compiled into the binary: hand-written HTML,
//! CSS and JavaScript, no build step, nothing fetched from elsewhere. The
//! page holds no data; it reads the JSON views after it loads.

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("../assets/index.html");
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "app.css",
        "text/css; charset=utf-8",
        include_str!("../assets/app.css"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("../assets/app.js"),
    ),
    (
        "pages.js",
        "text/javascript; charset=utf-8",
        include_str!("../assets/pages.js"),
    ),
    (
        "lessons.js",
        "text/javascript; charset=utf-8",
        include_str!("../assets/lessons.js"),
    ),
];

/// `GET /dashboard/`: the page.
pub async fn index() -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], INDEX).into_response()
}

/// `GET /dashboard/assets/NAME`.
pub async fn asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|(n, _, _)| *n == name) {
        Some((_, ty, body)) => ([(header::CONTENT_TYPE, *ty)], *body).into_response(),
        None => agency_http::error(
            StatusCode::NOT_FOUND,
            "not_found",
            &format!("failed to find dashboard asset {name:?}"),
        ),
    }
}
