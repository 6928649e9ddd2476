//! The daemon in-process on port 0: guards (admin token on the Unix
//! socket, loopback Host and Origin on TCP), one daemon per home, the
//! address file, and REST calls mapped to service calls with typed error
//! statuses.

#![allow(clippy::unwrap_used)]

use crate::fixture;

use agency_daemon::{Daemon, DaemonError, Home};
use serde_json::{Value, json};

struct Fixture {
    _dir: tempfile::TempDir,
    home: Home,
    daemon: Daemon,
    admin: String,
    http: reqwest::Client,
    /// Speaks HTTP over the home's `daemon.sock`, where `/v1` is served.
    v1: reqwest::Client,
}

impl Fixture {
    async fn start() -> Fixture {
        let (dir, home) = fixture::home();
        Fixture::start_on(dir, home).await
    }

    /// The daemon started on `home` (kept alive with `dir`).
    async fn start_on(dir: tempfile::TempDir, home: Home) -> Fixture {
        let daemon = Daemon::start(&home).await.unwrap();
        let admin = home.admin_token().unwrap();
        Fixture {
            _dir: dir,
            daemon,
            admin,
            http: reqwest::Client::new(),
            v1: reqwest::Client::builder()
                .unix_socket(home.admin_socket_path())
                .build()
                .unwrap(),
            home,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.daemon.addr())
    }

    /// A URL for the admin socket (the host is only the `Host` header).
    fn v1_url(&self, path: &str) -> String {
        format!("http://localhost{path}")
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        let r = self
            .v1
            .get(self.v1_url(path))
            .bearer_auth(&self.admin)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let r = self
            .v1
            .post(self.v1_url(path))
            .bearer_auth(&self.admin)
            .json(&body)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guards_and_rest_round_trip() {
    let f = Fixture::start().await;
    assert!(f.daemon.addr().ip().is_loopback());
    let info = f.home.daemon_info().unwrap().unwrap();
    assert_eq!(info.addr, f.daemon.addr());

    // No token, a wrong token: 401 on /v1, even on the socket.
    let r = f.v1.get(f.v1_url("/v1/status")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r =
        f.v1.get(f.v1_url("/v1/status"))
            .bearer_auth("agency_admin_wrong")
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 401);
    // On TCP there is no /v1 at all: the admin token is never sent there.
    let r = f
        .http
        .get(f.url("/v1/status"))
        .bearer_auth(&f.admin)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    // A foreign Host or Origin on TCP: 403.
    let r = f
        .http
        .post(f.url("/mcp"))
        .header("Host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = f
        .http
        .post(f.url("/mcp"))
        .header("Origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);

    let (s, status) = f.get("/v1/status").await;
    assert_eq!(s, 200, "{status}");
    let root = status["root_handler"].as_str().unwrap().to_owned();
    assert_eq!(status["counts"]["handlers_active"], 1);

    let (s, sent) = f
        .post("/v1/mail", json!({"to": "root", "text": "hello"}))
        .await;
    assert_eq!(s, 200, "{sent}");
    assert_eq!(sent["to"], root.as_str());
    let (_, handlers) = f.get("/v1/handlers").await;
    assert_eq!(handlers[0]["inbox_depth"], 1);

    // Typed errors: bad input 400, unknown 404, refused 400/403.
    let (s, e) = f.post("/v1/mail", json!({"to": "nope", "text": "x"})).await;
    assert_eq!(s, 400, "{e}");
    assert_eq!(e["error"]["kind"], "invalid_input");
    let (s, e) = f
        .get(&format!("/v1/handlers/{}", uuid::Uuid::new_v4()))
        .await;
    assert_eq!((s, e["error"]["kind"].as_str()), (404, Some("not_found")));
    let (s, e) = f
        .post(&format!("/v1/handlers/{root}/stop"), json!({}))
        .await;
    assert_eq!(s, 400, "{e}");
    let (s, e) = f
        .post("/v1/mail", json!({"to": "root", "text": "x", "extra": 1}))
        .await;
    assert!(s == 400 || s == 422, "{s} {e}");

    // Prefixes resolve for the CLI.
    let (s, r) = f.get(&format!("/v1/resolve/handler/{}", &root[..8])).await;
    assert_eq!((s, r["id"].as_str()), (200, Some(root.as_str())));

    // Tokens: mint, use on /mcp (identity accepted), revoke, refused.
    let (s, minted) = f.post("/v1/tokens", json!({"handler": root})).await;
    assert_eq!(s, 200, "{minted}");
    let token = minted["token"].as_str().unwrap().to_owned();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    let mcp = |tok: Option<&str>| {
        let mut rq = f
            .http
            .post(f.url("/mcp"))
            .header("Accept", "application/json, text/event-stream")
            .json(&init);
        if let Some(t) = tok {
            rq = rq.bearer_auth(t);
        }
        rq.send()
    };
    assert_eq!(mcp(Some(&token)).await.unwrap().status(), 200);
    let none = mcp(None).await.unwrap();
    assert_eq!(none.status(), 401);
    assert!(
        none.headers().get("www-authenticate").is_none(),
        "no OAuth discovery hints"
    );
    let r =
        f.v1.delete(f.v1_url(&format!("/v1/tokens/{}", minted["agent"].as_str().unwrap())))
            .bearer_auth(&f.admin)
            .send()
            .await
            .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(mcp(Some(&token)).await.unwrap().status(), 401);
    // The admin token is not an agent token.
    assert_eq!(mcp(Some(&f.admin)).await.unwrap().status(), 401);

    // One daemon per home.
    match Daemon::start(&f.home).await {
        Err(DaemonError::AlreadyRunning { .. }) => {}
        other => panic!("expected AlreadyRunning, got {other:?}"),
    }
    let home = f.home.clone();
    f.daemon.stop().await.unwrap();
    assert!(home.daemon_info().unwrap().is_none());
    // After a clean stop the home can be served again.
    Daemon::start(&home).await.unwrap().stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deferred_mail_is_delivered_when_due_without_polling() {
    use agency_core::{MailTarget, Principal};
    let f = Fixture::start().await;
    let svc = f.daemon.service().clone();
    let root = svc.root_handler().unwrap().unwrap();
    let agent = svc.agent_start(root).unwrap();
    // Let the delivery task go to sleep with nothing due (it would sleep
    // for an hour), then schedule mail due in 300 ms: it must wake up.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let body = agency_service::MailBody::Text {
        subject: None,
        text: "stand up".into(),
    };
    let due = svc.now().plus_millis(300);
    let id = svc
        .mail_send_deferred(
            Principal::agent(root, agent),
            MailTarget::Handler(root),
            &body,
            due,
        )
        .unwrap();
    let start = std::time::Instant::now();
    loop {
        let status = svc.mail_status(Principal::agent(root, agent), id).unwrap();
        if let Some(at) = status.delivered_at {
            assert!(at >= due, "delivered early");
            break;
        }
        assert!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "not delivered within 5 s of falling due"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    f.daemon.stop().await.unwrap();
}

/// `POST /launch/NAME` hands nothing to an agent's token alone: not before
/// the capability is granted, not after (the launch nonce is missing), not
/// to the admin token, nor without a token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn launch_answers_only_agents_holding_the_servers_capability() {
    let (dir, home) = fixture::home();
    let secret = format!("s3cr3t-{}", uuid::Uuid::new_v4().simple());
    std::fs::write(dir.path().join("key"), format!("{secret}\n")).unwrap();
    std::fs::write(
        home.config_path(),
        format!(
            "[secrets]\nk = {{ file = {:?} }}\n[mcp_servers.echo]\ncommand = \"echo-mcp\"\nargs = [\"--fast\"]\nenv = {{ ECHO_SECRET = \"${{secret:k}}\" }}\n[mcp_servers.web]\nurl = \"http://127.0.0.1:9/mcp\"\nheaders = {{ Authorization = \"Bearer ${{secret:k}}\" }}\n",
            dir.path().join("key").display().to_string()
        ),
    )
    .unwrap();
    let daemon = Daemon::start(&home).await.unwrap();
    let svc = daemon.service().clone();
    let root = svc.root_handler().unwrap().unwrap();
    let token = svc
        .token_mint(agency_core::Principal::User, root, None)
        .unwrap()
        .token;
    let http = reqwest::Client::new();
    let launch = |name: &str, bearer: Option<String>| {
        let mut req = http.post(format!("http://{}/launch/{name}", daemon.addr()));
        if let Some(b) = bearer {
            req = req.bearer_auth(b);
        }
        async move {
            let r = req.send().await.unwrap();
            (
                r.status().as_u16(),
                r.json::<Value>().await.unwrap_or(Value::Null),
            )
        }
    };
    let grant = |name: &str| {
        fixture::grant_mcp_server(&svc, root, name);
    };

    let (status, body) = launch("echo", Some(token.clone())).await;
    assert_eq!(status, 403, "{body}");
    assert!(!body.to_string().contains(&secret));
    assert_eq!(launch("echo", None).await.0, 401);
    assert_eq!(
        launch("echo", Some(home.admin_token().unwrap())).await.0,
        401
    );

    // Issue 9 item 6: holding the capability is not enough; without the
    // single-use nonce of a spawn's launcher, the token gets no secret
    // (tests/launch.rs plays the launcher's side).
    grant("echo");
    grant("web");
    for name in ["echo", "web"] {
        let (status, body) = launch(name, Some(token.clone())).await;
        assert_eq!(status, 403, "{body}");
        assert!(!body.to_string().contains(&secret));
        assert!(
            body["error"]["message"].as_str().unwrap().contains("nonce"),
            "{body}"
        );
    }

    // Held but not declared: the user may add it to agency.toml later.
    // Unknown routes are 404s, whoever asks.
    for bearer in [Some(token.clone()), Some(home.admin_token().unwrap()), None] {
        let mut req = http.get(format!("http://{}/v1/no-such-route", daemon.addr()));
        if let Some(b) = bearer {
            req = req.bearer_auth(b);
        }
        assert_eq!(req.send().await.unwrap().status().as_u16(), 404);
    }

    // The daemon's service refuses a grant on an undeclared server
    // (issue 14 item 4), naming the declared ones to the user.
    let refused = svc
        .grant(
            agency_core::Principal::User,
            root,
            &fixture::mcp_server_read("ghost"),
        )
        .unwrap_err();
    assert_eq!(
        refused.to_string(),
        "failed to grant mcp_server:ghost: no such server in agency.toml (declared: echo, web)"
    );
    // Held but no longer declared (granted while it was, then removed
    // from agency.toml): a service that was never told the names stands
    // in for that history.
    home.open_service()
        .unwrap()
        .grant(
            agency_core::Principal::User,
            root,
            &fixture::mcp_server_read("ghost"),
        )
        .unwrap();
    let (status, body) = launch("ghost", Some(token.clone())).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(launch("bad%20name", Some(token)).await.0, 403);
    daemon.stop().await.unwrap();
}

/// Issue 9 item 11: the quotas and retention of `agency.toml` reach the
/// service, `POST /v1/gc` runs the retention policy (a dry run changes
/// nothing), and the daemon collects on its own after start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue9_item11_config_quotas_and_gc_over_rest_and_at_start() {
    use agency_store::BlobStore as _;

    let (dir, home) = fixture::home_with_config(
        "[limits]\nmax_kb_files_per_handler = 1\n[retention]\nblob_grace_minutes = 1\n",
    );
    // An orphan blob (a write that failed before its row) from long ago.
    let blobs = agency_store::FsBlobStore::open(home.blobs_dir()).unwrap();
    let orphan = blobs.put(b"orphaned long ago").unwrap();
    std::fs::File::open(blobs.path_of(&orphan))
        .unwrap()
        .set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(3600))
        .unwrap();
    let f = Fixture::start_on(dir, home).await;

    // The configured quota binds an agent.
    let svc = f.daemon.service().clone();
    let e = tokio::task::spawn_blocking(move || {
        let root = svc.root_handler().unwrap().unwrap();
        let agent = svc.agent_start(root).unwrap();
        let who = agency_core::Principal::agent(root, agent);
        svc.kb_create(who, "one", b"1").unwrap();
        svc.kb_create(who, "two", b"2").unwrap_err()
    })
    .await
    .unwrap();
    assert_eq!(e.kind(), "quota");
    assert!(
        e.to_string()
            .contains("limits.max_kb_files_per_handler = 1 in agency.toml"),
        "{e}"
    );

    // The daemon's collection after start removes the old orphan.
    let mut collected = false;
    for _ in 0..300 {
        if !f
            .home
            .blobs_dir()
            .join(&orphan.as_str()[7..9])
            .join(&orphan.as_str()[9..])
            .exists()
        {
            collected = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        collected,
        "the daemon did not collect the orphan after start"
    );

    let (s, r) = f.post("/v1/gc", json!({"dry_run": true})).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["dry_run"], true);
    assert_eq!(r["blobs_removed"], 0);
    let (s, r) = f.post("/v1/gc", json!({})).await;
    assert_eq!((s, r["dry_run"].as_bool()), (200, Some(false)), "{r}");
    let (s, fsck) = f.post("/v1/fsck", json!({})).await;
    assert_eq!(s, 200);
    assert_eq!(fsck["problems"], json!([]));
    f.daemon.stop().await.unwrap();
}

/// Issue 9 item 13: `POST /v1/outcomes/{id}/reopen` is the user's
/// `outcome_reopen`, with the service's refusals as typed errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_user_reopens_a_finished_outcome_over_rest() {
    use agency_core::Principal;
    let f = Fixture::start().await;
    let svc = f.daemon.service().clone();
    let root = svc.root_handler().unwrap().unwrap();
    let agent = Principal::agent(root, svc.agent_start(root).unwrap());
    let new = agency_service::NewOutcome {
        title: "Paint the fence".into(),
        parents: vec![root.root()],
        ..Default::default()
    };
    let o = svc.outcome_create(agent, &new).unwrap();
    let path = format!("/v1/outcomes/{o}/reopen");
    let (s, e) = f.post(&path, json!({"rationale": "again"})).await;
    assert_eq!(s, 400, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with(&format!("failed to reopen outcome {o}")),
        "{e}"
    );
    svc.outcome_complete(agent, o, "painted").unwrap();
    let (s, _) = f.post(&path, json!({"rationale": "x", "extra": 1})).await;
    assert!((400..500).contains(&s), "{s}");
    let (s, r) = f.post(&path, json!({"rationale": "it rained"})).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["status"], "open");
    assert_eq!(r["responsible"], root.to_string());
    let (_, view) = f.get(&format!("/v1/outcomes/{o}")).await;
    assert_eq!(
        view["history"].as_array().unwrap().last().unwrap()["action"],
        "reopened"
    );
    f.daemon.stop().await.unwrap();
}
