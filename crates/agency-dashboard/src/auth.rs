//! Who may use the dashboard: one-time login URLs, sessions held in a
//! cookie, CSRF tokens, and the `Host`/`Origin` check; and the security
//! headers of every answer.
//!
//! Secrets (login tokens, session ids) are kept only as BLAKE3 hashes, in
//! memory: a daemon restart logs every session out. A CSRF token is
//! compared by hash too (`blake3::Hash` equality is constant-time).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agency_api::{DashboardLogin, DashboardSession};
use agency_core::Timestamp;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;

use crate::Dashboard;

/// How long a login URL works.
const LOGIN_TTL: Duration = Duration::from_secs(120);
/// A session unused this long is over.
const SESSION_IDLE: Duration = Duration::from_secs(12 * 3600);
/// Bounds on what is kept in memory (the oldest go first).
const MAX_LOGINS: usize = 64;
const MAX_SESSIONS: usize = 256;
/// The session cookie.
const COOKIE: &str = "agency_dashboard";
/// The header the page sends its CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// Login tokens and sessions of one listener.
#[derive(Debug)]
pub struct Auth {
    port: u16,
    /// Hash of a login token → when it expires.
    logins: Mutex<HashMap<blake3::Hash, Instant>>,
    /// Hash of a session id → the session.
    sessions: Mutex<HashMap<blake3::Hash, Session>>,
}

#[derive(Debug, Clone)]
struct Session {
    csrf: String,
    last_used: Instant,
}

/// A session the guard let through (in the request's extensions).
#[derive(Debug, Clone)]
pub struct SessionId(pub(crate) blake3::Hash);

impl Auth {
    pub(crate) fn new(port: u16) -> Auth {
        Auth {
            port,
            logins: Mutex::default(),
            sessions: Mutex::default(),
        }
    }

    /// A new one-time login URL.
    pub fn mint_login(&self) -> DashboardLogin {
        let token = random_hex();
        let now = Instant::now();
        {
            let mut logins = lock(&self.logins);
            logins.retain(|_, exp| *exp > now);
            if logins.len() >= MAX_LOGINS
                && let Some(oldest) = logins.iter().min_by_key(|(_, e)| **e).map(|(h, _)| *h)
            {
                logins.remove(&oldest);
            }
            logins.insert(blake3::hash(token.as_bytes()), now + LOGIN_TTL);
        }
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        DashboardLogin {
            url: format!("http://127.0.0.1:{}/dashboard/login?t={token}", self.port),
            expires_at: Timestamp(ms + LOGIN_TTL.as_millis() as i64),
        }
    }

    /// Use a login token (once): the new session's id.
    fn redeem(&self, token: &str) -> Option<String> {
        self.redeem_at(token, Instant::now())
    }

    fn redeem_at(&self, token: &str, now: Instant) -> Option<String> {
        let exp = lock(&self.logins).remove(&blake3::hash(token.as_bytes()))?;
        if exp <= now {
            return None;
        }
        let id = random_hex();
        let mut sessions = lock(&self.sessions);
        sessions.retain(|_, s| now.duration_since(s.last_used) < SESSION_IDLE);
        if sessions.len() >= MAX_SESSIONS
            && let Some(oldest) = sessions
                .iter()
                .min_by_key(|(_, s)| s.last_used)
                .map(|(h, _)| *h)
        {
            sessions.remove(&oldest);
        }
        sessions.insert(
            blake3::hash(id.as_bytes()),
            Session {
                csrf: random_hex(),
                last_used: now,
            },
        );
        Some(id)
    }

    /// The live session the request's cookie names, touched.
    fn session(&self, headers: &HeaderMap) -> Option<(blake3::Hash, Session)> {
        self.session_at(headers, Instant::now())
    }

    fn session_at(&self, headers: &HeaderMap, now: Instant) -> Option<(blake3::Hash, Session)> {
        let id = cookie(headers)?;
        let key = blake3::hash(id.as_bytes());
        let mut sessions = lock(&self.sessions);
        let s = sessions.get_mut(&key)?;
        if now.duration_since(s.last_used) >= SESSION_IDLE {
            sessions.remove(&key);
            return None;
        }
        s.last_used = now;
        Some((key, s.clone()))
    }

    /// Whether a session is still open (not logged out, not idle too
    /// long), without counting this as a use.
    pub(crate) fn alive(&self, key: &blake3::Hash) -> bool {
        lock(&self.sessions)
            .get(key)
            .is_some_and(|s| s.last_used.elapsed() < SESSION_IDLE)
    }

    /// `Host` is this listener by a loopback name, and `Origin`, when the
    /// browser sends one, is this page's.
    fn same_site(&self, headers: &HeaderMap) -> bool {
        let ours = |v: &str| {
            v == format!("127.0.0.1:{}", self.port) || v == format!("localhost:{}", self.port)
        };
        let host_ok = headers
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .is_some_and(ours);
        let origin_ok = match headers.get(header::ORIGIN) {
            None => true,
            Some(o) => o
                .to_str()
                .ok()
                .and_then(|o| o.strip_prefix("http://"))
                .is_some_and(ours),
        };
        host_ok && origin_ok
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain maps, still consistent.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// 256 random bits, as hex.
fn random_hex() -> String {
    let mut b = [0u8; 32];
    // The OS's generator failing is not something to limp on from.
    #[allow(clippy::expect_used)]
    getrandom::fill(&mut b).expect("failed to read random bytes from the OS");
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The session cookie's value.
fn cookie(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v)
}

/// The guard of every dashboard route: `Host`/`Origin`, then the session
/// (except for the login URL itself), then the CSRF token of a POST.
/// `Authorization` is never read.
pub async fn guard(State(d): State<Arc<Dashboard>>, mut req: Request, next: Next) -> Response {
    if !d.auth.same_site(req.headers()) {
        return refuse(
            StatusCode::FORBIDDEN,
            "forbidden",
            "failed to accept request: Host and Origin must name this dashboard (127.0.0.1 or localhost, this port)",
        );
    }
    if req.uri().path() == "/dashboard/login" {
        return next.run(req).await;
    }
    let Some((key, session)) = d.auth.session(req.headers()) else {
        if req.uri().path().starts_with("/dashboard/api/") {
            return refuse(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "failed to authenticate: no dashboard session; run `agency dashboard` for a login URL",
            );
        }
        return page(
            StatusCode::UNAUTHORIZED,
            "Not logged in",
            "Run `agency dashboard` in a terminal and open the URL it prints.",
        );
    };
    let safe = matches!(*req.method(), Method::GET | Method::HEAD);
    if !safe {
        let sent = req
            .headers()
            .get(CSRF_HEADER)
            .map(|v| blake3::hash(v.as_bytes()));
        if sent != Some(blake3::hash(session.csrf.as_bytes())) {
            return refuse(
                StatusCode::FORBIDDEN,
                "forbidden",
                "failed to accept the action: missing or wrong CSRF token (reload the page)",
            );
        }
    }
    req.extensions_mut().insert(SessionId(key));
    next.run(req).await
}

fn refuse(status: StatusCode, kind: &str, message: &str) -> Response {
    agency_http::error(status, kind, message)
}

/// A small HTML page (no script, no style) saying what happened and what
/// to do.
fn page(status: StatusCode, title: &str, text: &str) -> Response {
    let esc = |s: &str| {
        s.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let body = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Agency — {t}</title></head><body><h1>{t}</h1><p>{x}</p></body></html>",
        t = esc(title),
        x = esc(text)
    );
    (status, Html(body)).into_response()
}

/// The security headers of every dashboard answer.
pub async fn headers(req: Request, next: Next) -> Response {
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

#[derive(Debug, Deserialize)]
pub struct LoginQuery {
    t: Option<String>,
}

/// `GET /dashboard/login?t=…`: a valid, unused, unexpired token opens a
/// session and leads to the landing page; anything else is refused.
pub async fn login(State(d): State<Arc<Dashboard>>, Query(q): Query<LoginQuery>) -> Response {
    let Some(id) = q.t.as_deref().and_then(|t| d.auth.redeem(t)) else {
        return page(
            StatusCode::FORBIDDEN,
            "Login link used or expired",
            "A dashboard login link works once, for two minutes. Run `agency dashboard` for a new one.",
        );
    };
    let cookie = format!("{COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/dashboard");
    let mut resp = (StatusCode::SEE_OTHER, [(header::LOCATION, "/dashboard/")]).into_response();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        resp.headers_mut().insert(header::SET_COOKIE, v);
    }
    resp
}

/// `GET /dashboard/api/session`: the session's CSRF token, for the page.
pub async fn session(State(d): State<Arc<Dashboard>>, headers: HeaderMap) -> Response {
    match d.auth.session(&headers) {
        Some((_, s)) => axum::Json(DashboardSession { csrf: s.csrf }).into_response(),
        None => refuse(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "failed to authenticate: no dashboard session",
        ),
    }
}

/// `POST /dashboard/api/logout`: end the session.
pub async fn logout(
    State(d): State<Arc<Dashboard>>,
    axum::Extension(SessionId(key)): axum::Extension<SessionId>,
) -> Response {
    lock(&d.auth.sessions).remove(&key);
    let mut resp = axum::Json(serde_json::json!({ "logged_out": true })).into_response();
    resp.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static(
            "agency_dashboard=; HttpOnly; SameSite=Strict; Path=/dashboard; Max-Age=0",
        ),
    );
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(url: &str) -> &str {
        url.split("?t=").nth(1).unwrap_or_default()
    }

    fn with_cookie(id: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        let v = format!("theme=dark; {COOKIE}={id}; other=1");
        h.insert(
            header::COOKIE,
            HeaderValue::from_str(&v).unwrap_or(HeaderValue::from_static("")),
        );
        h
    }

    #[test]
    fn a_login_token_works_once_and_only_before_it_expires() {
        let a = Auth::new(8080);
        let first = a.mint_login();
        assert!(
            first
                .url
                .starts_with("http://127.0.0.1:8080/dashboard/login?t=")
        );
        assert_eq!(token(&first.url).len(), 64);
        let now = Instant::now();
        assert!(a.redeem_at(token(&first.url), now).is_some());
        assert!(a.redeem_at(token(&first.url), now).is_none(), "used once");
        let late = a.mint_login();
        assert!(
            a.redeem_at(token(&late.url), now + LOGIN_TTL + Duration::from_secs(1))
                .is_none(),
            "expired"
        );
        assert!(
            a.redeem_at(token(&late.url), now).is_none(),
            "an expired try used it up"
        );
        assert!(a.redeem_at("", now).is_none());
    }

    #[test]
    fn a_session_ends_when_idle_and_each_has_its_own_csrf_token() {
        let a = Auth::new(8080);
        let now = Instant::now();
        let one = a
            .redeem_at(token(&a.mint_login().url), now)
            .unwrap_or_default();
        let two = a
            .redeem_at(token(&a.mint_login().url), now)
            .unwrap_or_default();
        let s1 = a.session_at(&with_cookie(&one), now).map(|s| s.1.csrf);
        let s2 = a.session_at(&with_cookie(&two), now).map(|s| s.1.csrf);
        assert!(s1.is_some() && s2.is_some() && s1 != s2);
        assert!(a.session_at(&with_cookie("not-a-session"), now).is_none());
        assert!(a.session_at(&HeaderMap::new(), now).is_none());
        // Use keeps a session alive; idleness ends it for good.
        let later = now + SESSION_IDLE - Duration::from_secs(1);
        assert!(a.session_at(&with_cookie(&one), later).is_some());
        assert!(
            a.session_at(&with_cookie(&one), later + SESSION_IDLE)
                .is_none()
        );
        assert!(a.session_at(&with_cookie(&one), later).is_none(), "removed");
    }

    #[test]
    fn host_and_origin_must_name_this_listener() {
        let a = Auth::new(8080);
        let check = |host: &str, origin: Option<&str>| {
            let mut h = HeaderMap::new();
            h.insert(
                header::HOST,
                HeaderValue::from_str(host).unwrap_or(HeaderValue::from_static("")),
            );
            if let Some(o) = origin {
                h.insert(
                    header::ORIGIN,
                    HeaderValue::from_str(o).unwrap_or(HeaderValue::from_static("")),
                );
            }
            a.same_site(&h)
        };
        assert!(check("127.0.0.1:8080", None));
        assert!(check("localhost:8080", Some("http://localhost:8080")));
        assert!(check("127.0.0.1:8080", Some("http://127.0.0.1:8080")));
        for (host, origin) in [
            ("127.0.0.1", None),
            ("[::1]:8080", None),
            ("127.0.0.1:8081", None),
            ("evil.example:8080", None),
            ("127.0.0.1:8080", Some("http://evil.example")),
            ("127.0.0.1:8080", Some("https://127.0.0.1:8080")),
            ("127.0.0.1:8080", Some("null")),
        ] {
            assert!(!check(host, origin), "{host} {origin:?}");
        }
    }
}
