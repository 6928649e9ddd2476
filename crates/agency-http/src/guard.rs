//! Request guards: loopback-only `Host`/`Origin` (against DNS rebinding and
//! cross-site requests from a browser), the admin token for `/v1`, and
//! per-agent bearer tokens for `/mcp`, the gateway and the launchers. Only
//! identity is established here; permissions are the service layer's.

use std::sync::Arc;

use agency_mcp::AgentIdentity;
use agency_service::{System, TokenIdentity};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use crate::Activity;
use crate::answer::error;

/// The port of the loopback listener a [`loopback_only`] guard protects.
#[derive(Debug, Clone, Copy)]
pub struct ListenerPort(pub u16);

/// Refuse requests whose `Host` or `Origin` is not this loopback listener.
pub async fn loopback_only(
    State(ListenerPort(port)): State<ListenerPort>,
    req: Request,
    next: Next,
) -> Response {
    let host_ok = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .is_some_and(|h| is_loopback_authority(h, port));
    let origin_ok = match req.headers().get(header::ORIGIN) {
        None => true,
        Some(o) => o
            .to_str()
            .ok()
            .and_then(|o| o.strip_prefix("http://"))
            .is_some_and(|a| is_loopback_authority(a, port)),
    };
    if !host_ok || !origin_ok {
        return error(
            StatusCode::FORBIDDEN,
            "forbidden",
            "failed to accept request: Host and Origin must name this loopback listener",
        );
    }
    next.run(req).await
}

fn is_loopback_authority(authority: &str, port: u16) -> bool {
    let (host, p) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => (h, Some(p)),
        _ => (authority, None),
    };
    let host_ok = matches!(host, "127.0.0.1" | "localhost" | "[::1]");
    let port_ok = p.is_none_or(|p| p.parse::<u16>().ok() == Some(port));
    host_ok && port_ok
}

/// The token of an `Authorization: Bearer …` header, if there is one.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(str::trim)
}

/// The admin token's hash, the state of an [`admin_only`] guard.
#[derive(Debug, Clone, Copy)]
pub struct AdminHash(pub blake3::Hash);

/// `/v1`: the admin token, compared by hash so the comparison time says
/// nothing about the token.
pub async fn admin_only(
    State(AdminHash(hash)): State<AdminHash>,
    req: Request,
    next: Next,
) -> Response {
    let ok = bearer(req.headers()).is_some_and(|t| blake3::hash(t.as_bytes()) == hash);
    if !ok {
        return error(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "failed to authenticate: send the admin token from the Agency home as `Authorization: Bearer …`",
        );
    }
    next.run(req).await
}

/// What an [`agent_only`] guard needs: the system handle that resolves tokens,
/// and the clock each authenticated call touches.
#[derive(Debug, Clone)]
pub struct AgentGuard {
    pub svc: Arc<System>,
    pub activity: Arc<Activity>,
}

/// An agent token; the identity goes into the request extensions where the
/// MCP tools, the gateway and the launchers read it. No `WWW-Authenticate`
/// header: MCP clients would start OAuth discovery instead of using their
/// static header.
pub async fn agent_only(State(st): State<AgentGuard>, req: Request, next: Next) -> Response {
    agent_only_with(&st, req, next, |svc, token| {
        svc.token_authenticate(token).map(|id| (id, ()))
    })
    .await
}

/// [`agent_only`] whose token check `check` also reads what the route
/// needs of the agent in the same transaction (`System::token_model`);
/// that goes into the request extensions beside the identity. Any failure
/// of `check` refuses the request as unauthenticated.
pub async fn agent_only_with<T: Clone + Send + Sync + 'static>(
    st: &AgentGuard,
    mut req: Request,
    next: Next,
    check: impl FnOnce(&System, &str) -> agency_service::Result<(TokenIdentity, T)>,
) -> Response {
    let Some(token) = bearer(req.headers()) else {
        return error(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "failed to authenticate: send the agent's token as `Authorization: Bearer …`",
        );
    };
    // Inline on the async worker: one indexed SQLite read of
    // the token's hash, tens of microseconds, which a hop to the blocking
    // pool and back would cost several times over. It runs under the
    // request's span (the token itself is never logged).
    match check(&st.svc, token) {
        Ok((id, more)) => {
            st.activity.touch(id.agent);
            req.extensions_mut().insert(AgentIdentity {
                handler: id.handler,
                agent: id.agent,
                workspace: id.workspace,
            });
            req.extensions_mut().insert(more);
            next.run(req).await
        }
        Err(e) => error(StatusCode::UNAUTHORIZED, "unauthorized", &e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::is_loopback_authority;

    #[test]
    fn loopback_authorities() {
        for (a, ok) in [
            ("127.0.0.1:8080", true),
            ("localhost:8080", true),
            ("[::1]:8080", true),
            ("127.0.0.1", true),
            ("127.0.0.1:9999", false),
            ("evil.example:8080", false),
            ("127.0.0.1.evil.example:8080", false),
            ("", false),
        ] {
            assert_eq!(is_loopback_authority(a, 8080), ok, "{a}");
        }
    }
}
