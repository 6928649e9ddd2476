//! The egress proxy: an HTTP/1.1 forward proxy on
//! 127.0.0.1 through which agents reach the network, only where their
//! handler holds an `egress` capability (`agency_core::egress` says what a
//! pattern matches, the service's `egress_check` decides). Agents get it as
//! `HTTP(S)_PROXY` (`runtime::clean_env`); the sandbox leaves it as their
//! only way out.
//!
//! - `CONNECT host:port` opens a tunnel; TLS passes through untouched (no
//!   interception, so no certificate of ours to trust).
//! - An absolute-form `http://` request is forwarded on a connection of its
//!   own, bodies streamed both ways, hop-by-hop and `Proxy-*` headers
//!   removed; a redirect is passed back, never followed.
//! - The credential is the agent's own token, as the proxy password
//!   (`Proxy-Authorization: Basic base64(agent:TOKEN)`), checked like
//!   `/mcp`'s bearer token; missing or bad: 407.
//! - A refusal is 403 with a body (and reason phrase) naming the host and
//!   the way out. A granted host *name* is resolved here, once, and refused
//!   if any address is local (loopback, private, link-local…): DNS must not
//!   lead a grant for `db.example.com` to PostgreSQL on 127.0.0.1. The
//!   connection goes to the addresses checked, so a second answer cannot
//!   change them. An address granted as written is taken as written. A
//!   refused name is never resolved (a DNS query can carry data out).
//! - Every connection allowed or refused is one record in the handler's
//!   audit log (`Service::egress_record`), written before the connection
//!   is opened: if it cannot be written, nothing is opened.
//! - An extra stdio MCP server whose manifest declares `egress` comes with
//!   a credential of its own: user `mcp`, password the egress key the
//!   daemon gave it when it started it ([`EgressKeys`], bound to the agent
//!   and the server). Such a connection may reach only the
//!   manifest's hosts, while the agent's handler holds a capability on
//!   `mcp_server:NAME` (`Service::mcp_egress_check`); the handler's
//!   `egress` capabilities count for nothing there, and the manifest for
//!   nothing with the agent's token. Same resolution rules, same records
//!   (naming the server).

mod keys;

pub use keys::EgressKeys;

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use agency_core::egress::{EgressPattern, Host, is_local_address};
use agency_core::{EgressTarget, Principal};
use agency_service::{EgressDecision, ServiceError, System};
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::header::{self, HeaderMap, HeaderName, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::{JoinHandle, JoinSet};
use tokio_util::sync::CancellationToken;

use agency_config::mcp_servers::McpServers;
use agency_http::Activity;

/// Failed to open the proxy's listener.
#[derive(Debug, thiserror::Error)]
pub enum EgressError {
    #[error("failed to listen on {addr}: {cause}")]
    Listen {
        addr: String,
        /// In the message, not `#[source]`: printed once.
        cause: std::io::Error,
    },
}

/// The proxy user name of an MCP server's credential (the password is its
/// egress key); any other user name means the password is an agent token.
pub const MCP_PROXY_USER: &str = "mcp";
/// The proxy user name of an organisation command tool's credential (the
/// password is the key of its run, bound to the calling agent, whose
/// handler's `egress` capabilities decide, as for the agent itself).
pub const TOOL_PROXY_USER: &str = "tool";

/// Resolving a name, and opening each TCP connection, give up after this.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// A client that has not sent a whole request head by then is dropped.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Request and response heads are bounded (hyper refuses larger ones).
const MAX_HEADER_BYTES: usize = 64 * 1024;
const MAX_HEADERS: usize = 100;
/// Client connections and open tunnels at once, all agents together: each
/// holds file descriptors of the daemon's.
const MAX_CONNECTIONS: usize = 512;

type Body = BoxBody<Bytes, hyper::Error>;

/// The running proxy. Stopping it closes every connection and tunnel.
#[derive(Debug)]
pub struct EgressProxy {
    addr: SocketAddr,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

struct Proxy {
    svc: Arc<System>,
    activity: Arc<Activity>,
    keys: Arc<EgressKeys>,
    servers: Arc<McpServers>,
    slots: Arc<Semaphore>,
    stop: CancellationToken,
}

impl EgressProxy {
    /// Listen on 127.0.0.1 (any port) and serve until stopped.
    pub async fn start(
        svc: Arc<System>,
        activity: Arc<Activity>,
        keys: Arc<EgressKeys>,
        servers: Arc<McpServers>,
    ) -> Result<EgressProxy, EgressError> {
        let want = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let listen_err = |cause| EgressError::Listen {
            addr: format!("{want} (egress proxy)"),
            cause,
        };
        let listener = TcpListener::bind(want).await.map_err(listen_err)?;
        let addr = listener.local_addr().map_err(listen_err)?;
        let stop = CancellationToken::new();
        let proxy = Arc::new(Proxy {
            svc,
            activity,
            keys,
            servers,
            slots: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
            stop: stop.clone(),
        });
        let task = tokio::spawn(accept_loop(listener, proxy));
        tracing::info!(%addr, "egress proxy listening");
        Ok(EgressProxy { addr, stop, task })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The proxy's TCP port on 127.0.0.1: the sandbox lets agents connect
    /// to it (and to the MCP listener) and nowhere else.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    pub async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

async fn accept_loop(listener: TcpListener, proxy: Arc<Proxy>) {
    let mut conns = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            () = proxy.stop.cancelled() => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
            a = listener.accept() => a,
        };
        let tcp = match accepted {
            Ok((tcp, _)) => tcp,
            Err(e) => {
                // Out of file descriptors, most likely: wait for some to
                // be released rather than spin.
                tracing::warn!(error = %e, "egress proxy failed to accept a connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // Over the limit the connection is closed at once.
        let Ok(permit) = proxy.slots.clone().try_acquire_owned() else {
            continue;
        };
        conns.spawn(serve(tcp, proxy.clone(), permit));
    }
    conns.shutdown().await;
}

async fn serve(tcp: TcpStream, proxy: Arc<Proxy>, _permit: OwnedSemaphorePermit) {
    let _ = tcp.set_nodelay(true);
    let stop = proxy.stop.clone();
    let service = hyper::service::service_fn(move |req| {
        let p = proxy.clone();
        async move { Ok::<_, Infallible>(handle(p, req).await) }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .max_headers(MAX_HEADERS)
        .max_header_size(MAX_HEADER_BYTES)
        .serve_connection(TokioIo::new(tcp), service)
        .with_upgrades();
    tokio::select! {
        _ = conn => {}
        () = stop.cancelled() => {}
    }
}

async fn handle(p: Arc<Proxy>, req: Request<Incoming>) -> Response<Body> {
    let who = match authenticate(&p, req.headers()).await {
        Ok(who) => who,
        Err(fail) => return fail.into_response(),
    };
    let result = if req.method() == Method::CONNECT {
        tunnel(&p, who, req).await
    } else {
        forward(&p, who, req).await
    };
    result.unwrap_or_else(Fail::into_response)
}

/// Who a connection is for: the agent itself, or an MCP server Agency
/// launched for it (and the hosts its manifest declares).
#[derive(Clone)]
enum Via {
    Agent,
    Mcp {
        server: String,
        manifest: Arc<Vec<EgressPattern>>,
    },
}

/// The caller from `Proxy-Authorization`: user `mcp` with a live egress
/// key (an MCP server), else the agent's token (Basic: the password;
/// Bearer: the token), checked as `/mcp` checks it.
async fn authenticate(p: &Proxy, headers: &HeaderMap) -> Result<(Principal, Via), Fail> {
    let Some((user, token)) = proxy_credential(headers) else {
        return Err(auth_required(
            "failed to authenticate to Agency's egress proxy: send the agent's token as the proxy password (HTTPS_PROXY=http://agent:TOKEN@HOST:PORT, as Agency sets it)",
        ));
    };
    if user.as_deref() == Some(MCP_PROXY_USER) {
        return mcp_caller(p, &token);
    }
    if user.as_deref() == Some(TOOL_PROXY_USER) {
        return p.keys.tool_of(&token).map(|who| (who, Via::Agent)).ok_or_else(|| {
            auth_required(
                "failed to authenticate to Agency's egress proxy: this tool egress key is unknown or its run has ended",
            )
        });
    }
    let svc = p.svc.clone();
    let span = tracing::Span::current();
    let found =
        tokio::task::spawn_blocking(move || span.in_scope(|| svc.token_authenticate(&token))).await;
    match found {
        Ok(Ok(id)) => {
            p.activity.touch(id.agent);
            Ok((id.principal(), Via::Agent))
        }
        Ok(Err(e)) => Err(auth_required(&e.to_string())),
        Err(_) => Err(text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "failed to authenticate: the check was cancelled",
        )),
    }
}

/// An MCP server's egress key: the agent and server it was issued for,
/// and that server's manifest `egress` list (checked at start).
fn mcp_caller(p: &Proxy, key: &str) -> Result<(Principal, Via), Fail> {
    let unknown = || {
        auth_required(
            "failed to authenticate to Agency's egress proxy: this MCP server egress key is unknown or its agent has ended (only a server Agency launched gets one)",
        )
    };
    let (who, server) = p.keys.server_of(key).ok_or_else(unknown)?;
    let manifest = match p.servers.manifest(&server).as_deref() {
        Some(Ok(m)) => m
            .manifest
            .egress
            .iter()
            .filter_map(|h| EgressPattern::parse(h).ok())
            .collect(),
        _ => Vec::new(),
    };
    if let Principal::Agent { agent, .. } = who {
        p.activity.touch(agent);
    }
    Ok((
        who,
        Via::Mcp {
            server,
            manifest: Arc::new(manifest),
        },
    ))
}

/// The user name (Basic only) and password or token of
/// `Proxy-Authorization`.
fn proxy_credential(headers: &HeaderMap) -> Option<(Option<String>, String)> {
    let v = headers.get(header::PROXY_AUTHORIZATION)?.to_str().ok()?;
    let (scheme, rest) = v.trim().split_once(' ')?;
    let (user, token) = if scheme.eq_ignore_ascii_case("basic") {
        let raw = base64::engine::general_purpose::STANDARD
            .decode(rest.trim())
            .ok()?;
        let pair = String::from_utf8(raw).ok()?;
        let (user, pass) = pair.split_once(':')?;
        (Some(user.to_owned()), pass.to_owned())
    } else if scheme.eq_ignore_ascii_case("bearer") {
        (None, rest.trim().to_owned())
    } else {
        return None;
    };
    (!token.is_empty()).then_some((user, token))
}

/// `CONNECT host:port`: authorise, connect, answer 200, then copy bytes
/// both ways until either side closes.
async fn tunnel(
    p: &Proxy,
    (who, via): (Principal, Via),
    req: Request<Incoming>,
) -> Result<Response<Body>, Fail> {
    let authority = req.uri().authority().map(|a| a.as_str().to_owned());
    let target = authority
        .as_deref()
        .ok_or("failed to open a tunnel: CONNECT needs HOST:PORT".to_owned())
        .and_then(|a| {
            EgressTarget::parse_authority(a).map_err(|e| format!("failed to open a tunnel: {e}"))
        })
        .map_err(|m| text(StatusCode::BAD_REQUEST, &m))?;
    let permit = slot(p)?;
    let mut upstream = open(p, who, &via, &target).await?;
    let stop = p.stop.clone();
    tokio::spawn(async move {
        let _permit = permit;
        let Ok(upgraded) = hyper::upgrade::on(req).await else {
            return;
        };
        let mut client = TokioIo::new(upgraded);
        tokio::select! {
            _ = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {}
            () = stop.cancelled() => {}
        }
    });
    Ok(Response::new(empty()))
}

/// An absolute-form `http://` request: authorise, connect, send it on in
/// origin form without hop-by-hop headers, stream the answer back.
async fn forward(
    p: &Proxy,
    (who, via): (Principal, Via),
    req: Request<Incoming>,
) -> Result<Response<Body>, Fail> {
    let uri = req.uri().clone();
    let (Some("http"), Some(host)) = (uri.scheme_str(), uri.host()) else {
        return Err(text(
            StatusCode::BAD_REQUEST,
            "failed to forward: this is a proxy; send an absolute http:// URL, or CONNECT HOST:PORT for https",
        ));
    };
    let port = uri.port_u16().unwrap_or(80);
    let target = EgressTarget::new(host, port)
        .map_err(|e| text(StatusCode::BAD_REQUEST, &format!("failed to forward: {e}")))?;
    let permit = slot(p)?;
    let upstream = open(p, who, &via, &target).await?;
    let (mut parts, body) = req.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    let host_header = match port {
        80 => host.to_owned(),
        _ => format!("{host}:{port}"),
    };
    if let Ok(v) = HeaderValue::from_str(&host_header) {
        parts.headers.insert(header::HOST, v);
    }
    let origin_form = uri.path_and_query().map_or("/", |pq| pq.as_str());
    parts.uri = origin_form
        .parse()
        .map_err(|_| text(StatusCode::BAD_REQUEST, "failed to forward: bad path"))?;
    parts.version = hyper::Version::HTTP_11;
    let bad_gateway = |e: hyper::Error| {
        text(
            StatusCode::BAD_GATEWAY,
            &format!("failed to forward to {target}: {e}"),
        )
    };
    let (mut sender, conn) = hyper::client::conn::http1::Builder::new()
        .max_headers(MAX_HEADERS)
        .max_header_size(MAX_HEADER_BYTES)
        .handshake(TokioIo::new(upstream))
        .await
        .map_err(bad_gateway)?;
    let stop = p.stop.clone();
    tokio::spawn(async move {
        let _permit = permit;
        tokio::select! {
            _ = conn => {}
            () = stop.cancelled() => {}
        }
    });
    let resp = sender
        .send_request(Request::from_parts(parts, body))
        .await
        .map_err(bad_gateway)?;
    let (mut parts, body) = resp.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    Ok(Response::from_parts(parts, body.boxed()))
}

fn slot(p: &Proxy) -> Result<OwnedSemaphorePermit, Fail> {
    p.slots.clone().try_acquire_owned().map_err(|_| {
        text(
            StatusCode::SERVICE_UNAVAILABLE,
            "failed to connect: the egress proxy has too many open connections; try again later",
        )
    })
}

/// Check, resolve, record, connect: the one path to a socket.
async fn open(p: &Proxy, who: Principal, via: &Via, t: &EgressTarget) -> Result<TcpStream, Fail> {
    let addrs = authorize(&p.svc, who, via, t).await?;
    connect(&addrs).await.map_err(|e| {
        text(
            StatusCode::BAD_GATEWAY,
            &format!("failed to connect to {t}: {e}"),
        )
    })
}

/// The egress rule for a connection the daemon makes itself for agent
/// `who` (an organisation's HTTP tool, `org_tools/http.rs`): the same
/// check, resolution and record as the proxy's, so a tool reaches only
/// what the agent's handler may reach. The addresses to connect to, or
/// why not (the message names the host and the grant to ask for).
pub async fn authorize_agent(
    svc: &Arc<System>,
    who: Principal,
    t: &EgressTarget,
) -> Result<Vec<SocketAddr>, EgressRefused> {
    authorize(svc, who, &Via::Agent, t)
        .await
        .map_err(|f| EgressRefused {
            message: f.message,
            way_out: f
                .reason
                .map(|r| r.trim_start_matches("Forbidden: ").to_owned()),
        })
}

/// Why a connection the daemon would make for an agent is refused: the
/// host and the grant to ask for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct EgressRefused {
    pub message: String,
    /// What would allow it (`grant egress:HOST`, …), when something would.
    pub way_out: Option<String>,
}

impl std::fmt::Display for EgressRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.way_out {
            Some(w) => write!(f, "{}; {w}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

/// Check, resolve and record: the addresses a connection may go to.
async fn authorize(
    svc: &Arc<System>,
    who: Principal,
    via: &Via,
    t: &EgressTarget,
) -> Result<Vec<SocketAddr>, Fail> {
    let (host, port) = (t.host_str(), t.port);
    let decision = match via.clone() {
        Via::Agent => blocking(svc, move |svc| svc.egress_check(who, &host, port)).await?,
        Via::Mcp { server, manifest } => {
            blocking(svc, move |svc| {
                svc.mcp_egress_check(who, &server, &manifest, &host, port)
            })
            .await?
        }
    };
    if let EgressDecision::Refused { message } = &decision {
        tracing::info!(target = %t, "egress refused: not granted");
        // A server's refusal is recorded with its message (naming it).
        let why = matches!(via, Via::Mcp { .. }).then(|| message.clone());
        record(svc, who, t, &decision, why).await?;
        return Err(forbidden(t, via, message));
    }
    let addrs = match resolve(t, decision.check_resolved()).await {
        Err(Resolve::Local(ip)) => {
            let address = EgressPattern::exact(&EgressTarget {
                host: Host::Ip(ip),
                port: t.port,
            });
            let way_out = match via {
                Via::Agent => format!("grant the address itself, egress:{address}"),
                Via::Mcp { server, .. } => format!(
                    "declare the address itself, {address}, in the egress of MCP server {server}'s manifest"
                ),
            };
            let why = format!(
                "{} resolves to {ip}, a local address; a host name never reaches the machine or its network ({way_out}, if that is meant)",
                t.host_str(),
            );
            tracing::info!(target = %t, %ip, "egress refused: local address");
            record(svc, who, t, &decision, Some(why.clone())).await?;
            return Err(forbidden(
                t,
                via,
                &format!("failed to connect to {t}: {why}"),
            ));
        }
        other => other,
    };
    record(svc, who, t, &decision, None).await?;
    addrs.map_err(|e| {
        text(
            StatusCode::BAD_GATEWAY,
            &format!("failed to resolve {}: {e}", t.host_str()),
        )
    })
}

enum Resolve {
    Local(IpAddr),
    Failed(String),
}

impl std::fmt::Display for Resolve {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Resolve::Local(ip) => write!(f, "{ip} is a local address"),
            Resolve::Failed(e) => f.write_str(e),
        }
    }
}

/// The addresses to connect to: an address as written, a name resolved
/// once (and, when `check_local`, refused if any answer is local).
async fn resolve(t: &EgressTarget, check_local: bool) -> Result<Vec<SocketAddr>, Resolve> {
    let addrs: Vec<SocketAddr> = match &t.host {
        Host::Ip(ip) => vec![SocketAddr::new(*ip, t.port)],
        Host::Name(n) => tokio::time::timeout(
            CONNECT_TIMEOUT,
            tokio::net::lookup_host((n.as_str(), t.port)),
        )
        .await
        .map_err(|_| Resolve::Failed(format!("timed out after {CONNECT_TIMEOUT:?}")))?
        .map_err(|e| Resolve::Failed(e.to_string()))?
        .collect(),
    };
    if addrs.is_empty() {
        return Err(Resolve::Failed("no address".to_owned()));
    }
    if check_local && let Some(a) = addrs.iter().find(|a| is_local_address(a.ip())) {
        return Err(Resolve::Local(a.ip()));
    }
    Ok(addrs)
}

async fn connect(addrs: &[SocketAddr]) -> Result<TcpStream, String> {
    let mut last = String::from("no address");
    for a in addrs {
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(a)).await {
            Ok(Ok(s)) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Ok(Err(e)) => last = format!("{a}: {e}"),
            Err(_) => last = format!("{a}: timed out after {CONNECT_TIMEOUT:?}"),
        }
    }
    Err(last)
}

async fn record(
    svc: &Arc<System>,
    who: Principal,
    t: &EgressTarget,
    decision: &EgressDecision,
    refusal: Option<String>,
) -> Result<(), Fail> {
    let (host, port, decision) = (t.host_str(), t.port, decision.clone());
    blocking(svc, move |svc| {
        svc.egress_record(who, &host, port, &decision, refusal.as_deref())
    })
    .await
}

/// A service call on a blocking thread; its error as the proxy's answer (an
/// agent that ended meanwhile: 407, like a bad token).
async fn blocking<T: Send + 'static>(
    svc: &Arc<System>,
    f: impl FnOnce(&System) -> Result<T, ServiceError> + Send + 'static,
) -> Result<T, Fail> {
    let svc = svc.clone();
    let span = tracing::Span::current();
    let r = tokio::task::spawn_blocking(move || span.in_scope(|| f(&svc))).await;
    match r {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(match e.kind() {
            "permission_denied" | "not_found" => auth_required(&e.to_string()),
            "invalid_input" => text(StatusCode::BAD_REQUEST, &e.to_string()),
            _ => text(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        }),
        Err(_) => Err(text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "failed to check egress: the check was cancelled",
        )),
    }
}

/// Remove what belongs to one hop: `Connection` and the headers it names,
/// the standard hop-by-hop set, and every `Proxy-*` header (the agent's
/// token must never travel on).
fn strip_hop_by_hop(h: &mut HeaderMap) {
    let named: Vec<HeaderName> = h
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|n| HeaderName::from_bytes(n.trim().as_bytes()).ok())
        .collect();
    for n in named {
        h.remove(n);
    }
    for n in [
        header::CONNECTION,
        HeaderName::from_static("keep-alive"),
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
    ] {
        h.remove(n);
    }
    let proxy: Vec<HeaderName> = h
        .keys()
        .filter(|k| k.as_str().starts_with("proxy-"))
        .cloned()
        .collect();
    for n in proxy {
        h.remove(n);
    }
}

fn empty() -> Body {
    Empty::<Bytes>::new()
        .map_err(|never| match never {})
        .boxed()
}

/// An answer other than success, made a response at the end (a
/// `Response` is too large to pass around in every `Err`).
struct Fail {
    status: StatusCode,
    message: String,
    /// The reason phrase of a 403 (the way out).
    reason: Option<String>,
}

impl Fail {
    fn into_response(self) -> Response<Body> {
        let mut r = Response::new(
            Full::new(Bytes::from(format!("{}\n", self.message)))
                .map_err(|never| match never {})
                .boxed(),
        );
        *r.status_mut() = self.status;
        r.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        if self.status == StatusCode::PROXY_AUTHENTICATION_REQUIRED {
            r.headers_mut().insert(
                header::PROXY_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"agency egress\""),
            );
        }
        if let Some(phrase) = self
            .reason
            .and_then(|p| hyper::ext::ReasonPhrase::try_from(p.into_bytes()).ok())
        {
            r.extensions_mut().insert(phrase);
        }
        r
    }
}

fn text(status: StatusCode, message: &str) -> Fail {
    Fail {
        status,
        message: message.to_owned(),
        reason: None,
    }
}

fn auth_required(message: &str) -> Fail {
    text(StatusCode::PROXY_AUTHENTICATION_REQUIRED, message)
}

/// 403 naming the host and the way out, in the body and the reason
/// phrase (a client of a refused `CONNECT` often shows only the status
/// line).
fn forbidden(t: &EgressTarget, via: &Via, message: &str) -> Fail {
    let way_out = match via {
        Via::Agent => format!("ask your boss to grant egress:{}", EgressPattern::exact(t)),
        Via::Mcp { server, .. } => format!(
            "MCP server {server}'s manifest declares no egress {}",
            EgressPattern::exact(t)
        ),
    };
    Fail {
        reason: Some(format!("Forbidden: {way_out}")),
        ..text(StatusCode::FORBIDDEN, message)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_and_proxy_headers_are_removed() {
        let mut h = HeaderMap::new();
        for (k, v) in [
            ("connection", "keep-alive, x-secret-hop"),
            ("x-secret-hop", "1"),
            ("keep-alive", "timeout=5"),
            ("proxy-authorization", "Basic abc"),
            ("proxy-connection", "keep-alive"),
            ("te", "trailers"),
            ("upgrade", "websocket"),
            ("accept", "*/*"),
            ("authorization", "Bearer upstream"),
        ] {
            h.append(HeaderName::from_static(k), HeaderValue::from_static(v));
        }
        strip_hop_by_hop(&mut h);
        let mut left: Vec<&str> = h.keys().map(HeaderName::as_str).collect();
        left.sort_unstable();
        assert_eq!(left, ["accept", "authorization"]);
    }

    #[test]
    fn proxy_credentials() {
        let basic = |s: &str| {
            let mut h = HeaderMap::new();
            let v = format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(s)
            );
            h.insert(header::PROXY_AUTHORIZATION, v.parse().unwrap());
            proxy_credential(&h)
        };
        let some = |u: &str, t: &str| Some((Some(u.to_owned()), t.to_owned()));
        assert_eq!(basic("agent:agency_abc"), some("agent", "agency_abc"));
        assert_eq!(basic("mcp:age_abc"), some("mcp", "age_abc"));
        assert_eq!(basic("agent:"), None);
        assert_eq!(basic("no-colon"), None);
        let mut h = HeaderMap::new();
        h.insert(
            header::PROXY_AUTHORIZATION,
            "Bearer agency_x".parse().unwrap(),
        );
        assert_eq!(proxy_credential(&h), Some((None, "agency_x".to_owned())));
        assert_eq!(proxy_credential(&HeaderMap::new()), None);
    }
}
