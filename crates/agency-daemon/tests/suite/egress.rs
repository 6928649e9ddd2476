//! Issue 10 items 4 and 6, as attacks on the egress proxy of a real daemon
//! (port 0): a loopback "external" HTTP server and a TCP echo server stand
//! for the internet. Without a credential: 407; with an agent's token but
//! no capability: 403 and the server sees no connection; with
//! `egress:127.0.0.1:PORT`: the request arrives (Proxy-Authorization
//! removed) and the answer comes back; a revocation stops the next
//! connection; another handler's agent gets nothing from this one's grant;
//! a host-name grant that resolves to a local address is refused; every
//! connection is in the audit log; a real client (curl, in a spawned
//! agent) finds the proxy through the variables Agency sets.

#![allow(clippy::unwrap_used)]

use crate::fixture;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use agency_core::{HandlerId, Level, Principal, Resource};
use agency_daemon::Daemon;
use agency_service::{GrantRequest, System};
use base64::Engine as _;
use fixture::{
    command_agents, delegate_new, home, home_with_config, mail_from_user, start, wait_for,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A loopback server standing for a host on the internet: counts the
/// connections it accepts and keeps each request's head; answers
/// `200` with `seen PATH` and the body it got.
#[derive(Clone, Default)]
struct External {
    connections: Arc<AtomicUsize>,
    heads: Arc<Mutex<Vec<String>>>,
}

impl External {
    async fn start() -> (External, SocketAddr) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let ext = External::default();
        let e = ext.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                e.connections.fetch_add(1, Ordering::SeqCst);
                let e = e.clone();
                tokio::spawn(async move {
                    let (head, mut rest) = read_head(&mut s).await;
                    let len =
                        header(&head, "content-length").map_or(0, |v| v.parse::<usize>().unwrap());
                    while rest.len() < len {
                        let mut buf = [0u8; 4096];
                        let n = s.read(&mut buf).await.unwrap();
                        assert!(n > 0, "body cut short");
                        rest.extend_from_slice(&buf[..n]);
                    }
                    let path = head.split(' ').nth(1).unwrap_or("").to_owned();
                    let mut body = format!("seen {path}\n").into_bytes();
                    body.extend_from_slice(&rest);
                    e.heads.lock().unwrap().push(head);
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\nX-Upstream: yes\r\n\r\n",
                        body.len()
                    );
                    s.write_all(answer.as_bytes()).await.unwrap();
                    s.write_all(&body).await.unwrap();
                    let _ = s.shutdown().await;
                });
            }
        });
        (ext, addr)
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

/// A loopback TCP echo server (the far end of a tunnel), counting
/// connections.
async fn echo_server() -> (Arc<AtomicUsize>, SocketAddr) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    let c = count.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            c.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    (count, addr)
}

/// Read up to the end of an HTTP head; returns it and what followed.
async fn read_head(s: &mut TcpStream) -> (String, Vec<u8>) {
    let mut buf = Vec::new();
    loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(i + 4);
            return (String::from_utf8(buf).unwrap(), rest);
        }
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).await.unwrap();
        assert!(
            n > 0,
            "connection closed before the end of the head: {buf:?}"
        );
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

fn status(head: &str) -> u16 {
    head.split(' ').nth(1).unwrap().parse().unwrap()
}

fn basic(token: &str) -> String {
    let b = base64::engine::general_purpose::STANDARD.encode(format!("agent:{token}"));
    format!("Proxy-Authorization: Basic {b}\r\n")
}

/// Send a request head (and body) to the proxy; the answer's head and
/// whole body (the request says `Connection: close`).
async fn request(proxy: SocketAddr, head: &str, body: &[u8]) -> (String, String) {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body).await.unwrap();
    let (head, mut rest) = read_head(&mut s).await;
    s.read_to_end(&mut rest).await.unwrap();
    (head, String::from_utf8_lossy(&rest).into_owned())
}

async fn get(proxy: SocketAddr, auth: &str, url: &str) -> (String, String) {
    let head = format!("GET {url} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n");
    request(proxy, &head, b"").await
}

/// `CONNECT target`; on 200, one round trip of `ping` through the tunnel.
async fn connect(proxy: SocketAddr, auth: &str, target: &str) -> (String, String) {
    let mut s = TcpStream::connect(proxy).await.unwrap();
    let head = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n{auth}\r\n");
    s.write_all(head.as_bytes()).await.unwrap();
    let (head, rest) = read_head(&mut s).await;
    if status(&head) != 200 {
        let mut rest = rest;
        let len = header(&head, "content-length").map_or(0, |v| v.parse().unwrap());
        while rest.len() < len {
            let mut buf = [0u8; 1024];
            let n = s.read(&mut buf).await.unwrap();
            assert!(n > 0);
            rest.extend_from_slice(&buf[..n]);
        }
        return (head, String::from_utf8_lossy(&rest).into_owned());
    }
    s.write_all(b"ping").await.unwrap();
    let mut back = [0u8; 4];
    s.read_exact(&mut back).await.unwrap();
    (head, String::from_utf8_lossy(&back).into_owned())
}

struct Proxied {
    _dir: tempfile::TempDir,
    daemon: Daemon,
    svc: Arc<System>,
    root: HandlerId,
    proxy: SocketAddr,
    /// The root handler's agent's token, as the proxy credential.
    auth: String,
    agent: Principal,
}

async fn proxied() -> Proxied {
    let (dir, home) = home();
    let (daemon, svc, root) = start(&home).await;
    let minted = svc.token_mint(Principal::User, root, None).unwrap();
    Proxied {
        _dir: dir,
        proxy: daemon.egress_proxy_addr().unwrap(),
        daemon,
        svc,
        root,
        auth: basic(&minted.token),
        agent: Principal::agent(root, minted.agent),
    }
}

fn egress(pattern: &str) -> GrantRequest {
    GrantRequest {
        resource: Resource::from_parts("egress", pattern).unwrap(),
        level: Level::Read,
        delegatable: false,
    }
}

fn egress_log(svc: &System, h: HandlerId) -> Vec<String> {
    svc.audit_read(Principal::User, Some(h))
        .unwrap()
        .into_iter()
        .map(|e| e.summary)
        .filter(|s| s.starts_with("egress"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue10_item6_no_credential_or_a_bad_one_is_407() {
    let p = proxied().await;
    let (ext, addr) = External::start().await;
    p.svc
        .grant(Principal::User, p.root, &egress(&addr.to_string()))
        .unwrap();
    let url = format!("http://{addr}/x");
    for auth in [
        String::new(),
        basic("agency_not-a-real-token"),
        "Proxy-Authorization: Basic !!!\r\n".to_owned(),
        // The token as the user name, not the password, is no credential.
        format!(
            "Proxy-Authorization: Basic {}\r\n",
            base64::engine::general_purpose::STANDARD.encode(format!(
                "{}:",
                p.auth.trim_end().rsplit(' ').next().unwrap()
            ))
        ),
    ] {
        let (head, body) = get(p.proxy, &auth, &url).await;
        assert_eq!(status(&head), 407, "{auth:?}: {head}{body}");
        assert!(header(&head, "proxy-authenticate").is_some(), "{head}");
        let (head, _) = connect(p.proxy, &auth, &addr.to_string()).await;
        assert_eq!(status(&head), 407, "{head}");
    }
    // A token that was good once: revoked (its agent ended).
    let Principal::Agent { agent, .. } = p.agent else {
        panic!("an agent")
    };
    assert!(p.svc.token_revoke(Principal::User, agent).unwrap());
    let (head, _) = get(p.proxy, &p.auth, &url).await;
    assert_eq!(status(&head), 407, "{head}");
    assert_eq!(ext.connections(), 0, "nothing may reach the server");
    p.daemon.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue10_item6_without_a_capability_403_and_no_connection() {
    let p = proxied().await;
    let (ext, addr) = External::start().await;
    let (echoed, echo) = echo_server().await;
    let (head, body) = get(p.proxy, &p.auth, &format!("http://{addr}/secret")).await;
    assert_eq!(status(&head), 403, "{head}{body}");
    assert!(
        body.contains(&format!("{addr}"))
            && body.contains(&format!("ask your boss to grant egress:{addr}")),
        "{body}"
    );
    // The way out is in the status line too (curl shows only that for a
    // refused CONNECT).
    let (head, body) = connect(p.proxy, &p.auth, &echo.to_string()).await;
    assert_eq!(status(&head), 403, "{head}{body}");
    assert!(
        head.lines()
            .next()
            .unwrap()
            .contains(&format!("egress:{echo}")),
        "{head}"
    );
    // A grant for another port or address is no grant for this one.
    p.svc
        .grant(
            Principal::User,
            p.root,
            &egress(&format!("127.0.0.1:{}", addr.port() ^ 1)),
        )
        .unwrap();
    let (head, _) = get(p.proxy, &p.auth, &format!("http://{addr}/secret")).await;
    assert_eq!(status(&head), 403);
    let (head, _) = get(p.proxy, &p.auth, &format!("http://[::1]:{}/x", addr.port())).await;
    assert_eq!(status(&head), 403);
    assert_eq!(ext.connections(), 0);
    assert_eq!(echoed.load(Ordering::SeqCst), 0);
    p.daemon.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue10_item6_with_a_capability_the_request_arrives_and_the_answer_comes_back() {
    let p = proxied().await;
    let (ext, addr) = External::start().await;
    let (echoed, echo) = echo_server().await;
    p.svc
        .grant(Principal::User, p.root, &egress(&addr.to_string()))
        .unwrap();
    p.svc
        .grant(Principal::User, p.root, &egress(&echo.to_string()))
        .unwrap();
    // Plain HTTP, with a body: forwarded in origin form, hop-by-hop and
    // Proxy-* headers removed, the answer streamed back.
    let body = vec![b'z'; 300_000];
    let head = format!(
        "POST http://{addr}/upload?x=1 HTTP/1.1\r\nHost: {addr}\r\n{}Content-Length: {}\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\nProxy-Connection: keep-alive\r\nX-Kept: yes\r\n\r\n",
        p.auth,
        body.len()
    );
    let (rhead, rbody) = request(p.proxy, &head, &body).await;
    assert_eq!(
        status(&rhead),
        200,
        "{rhead}{}",
        &rbody[..rbody.len().min(300)]
    );
    assert_eq!(header(&rhead, "x-upstream"), Some("yes"));
    assert!(rbody.starts_with("seen /upload?x=1\n"), "{}", &rbody[..40]);
    assert_eq!(rbody.len(), "seen /upload?x=1\n".len() + body.len());
    let seen = ext.heads().pop().unwrap();
    assert!(seen.starts_with("POST /upload?x=1 HTTP/1.1\r\n"), "{seen}");
    assert_eq!(header(&seen, "host"), Some(addr.to_string().as_str()));
    assert_eq!(header(&seen, "x-kept"), Some("yes"));
    for gone in ["proxy-authorization", "proxy-connection", "x-hop"] {
        assert_eq!(
            header(&seen, gone),
            None,
            "{gone} reached the server: {seen}"
        );
    }
    // A tunnel: bytes both ways, untouched.
    let (head, back) = connect(p.proxy, &p.auth, &echo.to_string()).await;
    assert_eq!(status(&head), 200, "{head}");
    assert_eq!(back, "ping");
    assert_eq!(echoed.load(Ordering::SeqCst), 1);
    // Both are in the handler's audit log, with the capability that
    // allowed them.
    let log = egress_log(&p.svc, p.root);
    assert!(
        log.iter()
            .any(|l| l.starts_with(&format!("egress to {addr} allowed by capability"))),
        "{log:?}"
    );
    assert!(
        log.iter()
            .any(|l| l.starts_with(&format!("egress to {echo} allowed by capability"))),
        "{log:?}"
    );
    p.daemon.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue10_item6_revoking_stops_the_next_connection() {
    let p = proxied().await;
    let (echoed, echo) = echo_server().await;
    let cap = p
        .svc
        .grant(Principal::User, p.root, &egress(&echo.to_string()))
        .unwrap();
    let (head, back) = connect(p.proxy, &p.auth, &echo.to_string()).await;
    assert_eq!((status(&head), back.as_str()), (200, "ping"));
    p.svc.revoke(Principal::User, cap).unwrap();
    let (head, _) = connect(p.proxy, &p.auth, &echo.to_string()).await;
    assert_eq!(status(&head), 403, "{head}");
    assert_eq!(echoed.load(Ordering::SeqCst), 1);
    let log = egress_log(&p.svc, p.root);
    assert_eq!(log.len(), 2, "{log:?}");
    assert!(
        log[0].contains("allowed") && log[1].contains("refused"),
        "{log:?}"
    );
    p.daemon.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue10_item6_a_grant_is_its_handlers_alone() {
    // The credential is the token, and the token names the agent: an
    // underling's agent gets nothing from its boss's capability.
    let p = proxied().await;
    let (ext, addr) = External::start().await;
    p.svc
        .grant(Principal::User, p.root, &egress(&addr.to_string()))
        .unwrap();
    let b = delegate_new(&p.svc, p.agent, p.root, "underling");
    let b_token = p.svc.token_mint(Principal::User, b, None).unwrap();
    let (head, _) = get(p.proxy, &basic(&b_token.token), &format!("http://{addr}/x")).await;
    assert_eq!(status(&head), 403, "{head}");
    assert_eq!(ext.connections(), 0);
    // Refused in b's audit log, nothing in the root's.
    assert_eq!(
        egress_log(&p.svc, b),
        [format!(
            "egress to {addr} refused: no egress capability matches"
        )]
    );
    assert!(egress_log(&p.svc, p.root).is_empty());
    p.daemon.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue10_item6_a_host_name_that_resolves_to_a_local_address_is_refused() {
    // DNS rebinding: a name granted as if it were a public host, resolving
    // to loopback (here `localhost`), would reach local services.
    let p = proxied().await;
    let (ext, addr) = External::start().await;
    let (echoed, echo) = echo_server().await;
    let port = addr.port();
    p.svc
        .grant(
            Principal::User,
            p.root,
            &egress(&format!("localhost:{port}")),
        )
        .unwrap();
    p.svc
        .grant(
            Principal::User,
            p.root,
            &egress(&format!("*.localhost:{}", echo.port())),
        )
        .unwrap();
    let (head, body) = get(p.proxy, &p.auth, &format!("http://localhost:{port}/x")).await;
    assert_eq!(status(&head), 403, "{head}{body}");
    assert!(body.contains("a local address"), "{body}");
    let (head, body) = connect(p.proxy, &p.auth, &format!("localhost:{port}")).await;
    assert_eq!(status(&head), 403, "{head}{body}");
    assert_eq!(ext.connections(), 0, "the local server was reached by name");
    // An address granted as written is taken as written.
    p.svc
        .grant(
            Principal::User,
            p.root,
            &egress(&format!("127.0.0.1:{port}")),
        )
        .unwrap();
    let (head, _) = get(p.proxy, &p.auth, &format!("http://127.0.0.1:{port}/x")).await;
    assert_eq!(status(&head), 200, "{head}");
    assert_eq!(echoed.load(Ordering::SeqCst), 0);
    let log = egress_log(&p.svc, p.root);
    assert!(
        log.iter().any(|l| l.starts_with(&format!(
            "egress to localhost:{port} refused: localhost resolves to"
        )) && l.contains("a local address")),
        "{log:?}"
    );
    p.daemon.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue10_item6_bad_requests_and_heads_are_refused() {
    let p = proxied().await;
    // Not a proxy request: origin form.
    let (head, _) = request(
        p.proxy,
        &format!(
            "GET / HTTP/1.1\r\nHost: x\r\n{}Connection: close\r\n\r\n",
            p.auth
        ),
        b"",
    )
    .await;
    assert_eq!(status(&head), 400, "{head}");
    // https in absolute form (a proxy would have to speak TLS itself).
    let (head, _) = get(p.proxy, &p.auth, "https://127.0.0.1:1/").await;
    assert_eq!(status(&head), 400, "{head}");
    // A head past the bound.
    let big = format!("X-Big: {}\r\n", "a".repeat(100 * 1024));
    let mut s = TcpStream::connect(p.proxy).await.unwrap();
    let _ = s
        .write_all(format!("GET http://127.0.0.1:1/ HTTP/1.1\r\nHost: x\r\n{big}\r\n").as_bytes())
        .await;
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out).await;
    let text = String::from_utf8_lossy(&out);
    assert!(text.starts_with("HTTP/1.1 431"), "{text}");
    p.daemon.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue10_item4_a_spawned_agent_reaches_a_granted_host_through_its_proxy_variables() {
    // The `command` runtime's agent runs curl, which finds the proxy and
    // the credential in the variables Agency set (`NO_PROXY` emptied, as
    // the stand-in "external" server is on loopback).
    let (ext, addr) = External::start().await;
    let script = format!(
        "NO_PROXY= no_proxy= curl -sS -o /dev/null http://{addr}/plain; NO_PROXY= no_proxy= curl -sS -p -o /dev/null http://{addr}/tunnelled; exec sleep 300"
    );
    let (_dir, home) = home_with_config(&command_agents("", &script));
    let (daemon, svc, root) = start(&home).await;
    svc.grant(Principal::User, root, &egress(&addr.to_string()))
        .unwrap();
    mail_from_user(&svc, root, "go");
    let heads = wait_for("both requests", || {
        let h = ext.heads();
        (h.len() == 2).then_some(h)
    })
    .await;
    assert!(heads[0].starts_with("GET /plain HTTP/1.1"), "{heads:?}");
    assert!(heads[1].starts_with("GET /tunnelled HTTP/1.1"), "{heads:?}");
    assert!(
        heads
            .iter()
            .all(|h| header(h, "proxy-authorization").is_none())
    );
    let log = wait_for("the audit records", || {
        let log = egress_log(&svc, root);
        (log.len() == 2).then_some(log)
    })
    .await;
    assert!(
        log.iter().all(|l| l.contains("allowed by capability")),
        "{log:?}"
    );
    daemon.stop().await.unwrap();
}
