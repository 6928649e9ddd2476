//! How every listener answers: one JSON error body (`{"error": {"kind",
//! "message"}}`), one map from a [`ServiceError`] to its status, and
//! [`call`], which runs a blocking service operation off the async runtime
//! and answers with its JSON or its error.

use std::sync::Arc;

use agency_service::ServiceError;
use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// An error answer: `status` with `{"error": {"kind", "message"}}`.
pub fn error(status: StatusCode, kind: &str, message: &str) -> Response {
    let body = serde_json::json!({ "error": { "kind": kind, "message": message } });
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from(body.to_string()),
    )
        .into_response()
}

/// 429: a limit on outside callers refused the request; `Retry-After`
/// and the body say when to try again.
pub fn limited(message: &str, limit: &str, value: u64, retry_after_secs: u64) -> Response {
    let body = serde_json::json!({ "error": {
        "kind": "rate_limited",
        "message": message,
        "limit": limit,
        "value": value,
        "retry_after_secs": retry_after_secs,
    }});
    (
        StatusCode::TOO_MANY_REQUESTS,
        [
            (header::CONTENT_TYPE, "application/json".to_owned()),
            (header::RETRY_AFTER, retry_after_secs.to_string()),
        ],
        Body::from(body.to_string()),
    )
        .into_response()
}

/// The answer to a service operation's error: its kind and message, under
/// the status that tells a client whether repeating can help.
pub fn service_error(e: &ServiceError) -> Response {
    if let ServiceError::Limited {
        message,
        limit,
        value,
        retry_after_secs,
    } = e
    {
        return limited(message, limit, *value, *retry_after_secs);
    }
    let status = match e {
        ServiceError::NotFound { .. } => StatusCode::NOT_FOUND,
        ServiceError::PermissionDenied(_) => StatusCode::FORBIDDEN,
        ServiceError::Conflict { .. }
        | ServiceError::AgentLive { .. }
        | ServiceError::LeaseLost { .. }
        | ServiceError::ReservationReleased { .. } => StatusCode::CONFLICT,
        // 403 as for a denied permission (and as Kubernetes answers an
        // exceeded quota): the request is valid but refused by policy, and
        // repeating it will not help until something changes. Not 429,
        // which invites clients to retry after a delay.
        ServiceError::Quota(_) => StatusCode::FORBIDDEN,
        ServiceError::Limited { .. } => StatusCode::TOO_MANY_REQUESTS,
        ServiceError::InvalidInput(_) => StatusCode::BAD_REQUEST,
        ServiceError::SchemaViolation { .. } => StatusCode::UNPROCESSABLE_ENTITY,
        ServiceError::Store(_) => StatusCode::INTERNAL_SERVER_ERROR,
    };
    error(status, e.kind(), &e.to_string())
}

/// Run a blocking service call off the async runtime and answer with its
/// JSON or its error. `S` is whichever handle the caller holds (the
/// caller-checked `Service`, or the daemon's `System`).
pub async fn call<S, T, F>(svc: &Arc<S>, f: F) -> Response
where
    S: Send + Sync + 'static + ?Sized,
    T: Serialize + Send + 'static,
    F: FnOnce(&S) -> Result<T, ServiceError> + Send + 'static,
{
    let svc = svc.clone();
    // The request's span follows the call onto the blocking thread, so the
    // service operation's span nests under it in the log.
    let span = tracing::Span::current();
    match tokio::task::spawn_blocking(move || span.in_scope(|| f(&svc))).await {
        Ok(Ok(v)) => axum::Json(v).into_response(),
        Ok(Err(e)) => service_error(&e),
        Err(_) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "failed to run the request: the worker panicked",
        ),
    }
}

/// A request refused before any service call (an id that is not a UUID,
/// an unknown kind): 400 with the reason.
#[derive(Debug)]
pub struct BadRequest(pub String);

impl IntoResponse for BadRequest {
    fn into_response(self) -> Response {
        error(StatusCode::BAD_REQUEST, "invalid_input", &self.0)
    }
}

/// A handler's answer when it parses its input itself.
pub type Answer = Result<Response, BadRequest>;

/// Parse the id `s` of a `what`, or say how to give one.
pub fn parse<T: std::str::FromStr>(what: &str, s: &str) -> Result<T, BadRequest> {
    s.parse().map_err(|_| {
        BadRequest(format!(
            "failed to parse {what} id {s:?}: give a full UUID (the CLI resolves prefixes)"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issue9_item11_an_exceeded_quota_is_403_with_kind_quota() {
        let r = service_error(&ServiceError::Quota("failed to create outcome: …".into()));
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
    }
}
