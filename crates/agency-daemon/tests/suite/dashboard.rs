//! The web dashboard against a real daemon: the one-time login URL, the
//! session cookie, CSRF, `Host`/`Origin`, an agent's token against every
//! route, and agents' text coming back as JSON data, never markup.

use std::time::Duration;

use agency_api::DashboardLogin;
use agency_core::{MailTarget, Principal};
use agency_daemon::Daemon;
use agency_service::{Admission, ToolCallRequest};
use reqwest::StatusCode;
use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::Value;

use crate::fixture;

/// Every route of the dashboard but the login URL, with the method that
/// reads or acts (`{approval}` and `{handler}` filled in by the test).
const ROUTES: &[(&str, &str)] = &[
    ("GET", "/dashboard"),
    ("GET", "/dashboard/"),
    ("GET", "/dashboard/assets/app.js"),
    ("GET", "/dashboard/assets/app.css"),
    ("GET", "/dashboard/assets/pages.js"),
    ("GET", "/dashboard/assets/lessons.js"),
    ("GET", "/dashboard/api/session"),
    ("POST", "/dashboard/api/logout"),
    ("GET", "/dashboard/api/needs-you"),
    ("GET", "/dashboard/api/org"),
    ("GET", "/dashboard/api/outcomes"),
    ("GET", "/dashboard/api/outcomes/{outcome}"),
    ("GET", "/dashboard/api/runs"),
    ("GET", "/dashboard/api/runs/{agent}"),
    ("GET", "/dashboard/api/runs/{agent}/transcript"),
    ("GET", "/dashboard/api/runs/{agent}/log"),
    ("GET", "/dashboard/api/costs"),
    ("GET", "/dashboard/api/kb"),
    ("GET", "/dashboard/api/kb/{file}/history"),
    ("GET", "/dashboard/api/kb/{file}/versions/1"),
    ("GET", "/dashboard/api/mail"),
    ("GET", "/dashboard/api/orgs"),
    ("GET", "/dashboard/api/approvals"),
    ("GET", "/dashboard/api/lessons"),
    ("GET", "/dashboard/api/lessons/{lesson}"),
    ("GET", "/dashboard/api/scores"),
    ("GET", "/dashboard/api/events/stream"),
    ("POST", "/dashboard/api/approvals/{approval}/approve"),
    ("POST", "/dashboard/api/approvals/{approval}/deny"),
    ("POST", "/dashboard/api/handlers/{handler}/stop"),
    ("POST", "/dashboard/api/handlers/{handler}/pause"),
    ("POST", "/dashboard/api/handlers/{handler}/resume"),
    ("POST", "/dashboard/api/handlers/{handler}/budget"),
    ("POST", "/dashboard/api/handlers/{handler}/mail"),
    ("POST", "/dashboard/api/mcp/changes/x/approve"),
    ("POST", "/dashboard/api/mcp/changes/x/reject"),
    ("POST", "/dashboard/api/lessons/{lesson}/approve"),
    ("POST", "/dashboard/api/lessons/{lesson}/reject"),
    ("POST", "/dashboard/api/lessons/{lesson}/retire"),
    ("POST", "/dashboard/api/lessons/{lesson}/rollback"),
];

const XSS_TITLE: &str = "<script>alert(1)</script><img src=x onerror=alert(2)>";
const XSS_BODY: &str = "hello <img src=x onerror=alert(3)><script>alert(4)</script>";

struct Fx {
    _dir: tempfile::TempDir,
    home: std::path::PathBuf,
    daemon: Daemon,
    svc: std::sync::Arc<agency_service::System>,
    v1: reqwest::Client,
    admin: String,
    http: reqwest::Client,
}

impl Fx {
    async fn start() -> Fx {
        let (dir, home) = fixture::home();
        let (daemon, svc, _) = fixture::start(&home).await;
        Fx {
            _dir: dir,
            home: home.dir().to_owned(),
            svc,
            v1: reqwest::Client::builder()
                .unix_socket(home.admin_socket_path())
                .build()
                .unwrap(),
            admin: home.admin_token().unwrap(),
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            daemon,
        }
    }

    fn home_dir(&self) -> &std::path::Path {
        &self.home
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.daemon.addr())
    }

    async fn login_url(&self) -> String {
        let r = self
            .v1
            .post("http://localhost/v1/dashboard/login")
            .bearer_auth(&self.admin)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let l: DashboardLogin = r.json().await.unwrap();
        l.url
    }

    /// A logged-in session: its cookie header and CSRF token.
    async fn session(&self) -> (String, String) {
        let url = self.login_url().await;
        let r = self.http.get(&url).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::SEE_OTHER);
        let set = r.headers()["set-cookie"].to_str().unwrap().to_owned();
        let cookie = set.split(';').next().unwrap().to_owned();
        let s: Value = self
            .http
            .get(self.url("/dashboard/api/session"))
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        (cookie, s["csrf"].as_str().unwrap().to_owned())
    }

    /// An agent of the root handler asks to run `sudo ls`: a pending
    /// approval (the default policy asks for sudo). Its token and the id.
    fn pending_approval(&self) -> (agency_service::MintedToken, i64) {
        let root = self.svc.root_handler().unwrap().unwrap();
        let minted = self.svc.token_mint(Principal::User, root, None).unwrap();
        let who = Principal::agent(minted.handler, minted.agent);
        let call = ToolCallRequest {
            tool: "bash".into(),
            args: serde_json::json!({ "command": "sudo ls" }),
            read_only: None,
        };
        match self.svc.tool_call_admit(who, call).unwrap() {
            Admission::Pending { approval, .. } => (minted, approval.0),
            other => panic!("expected a pending approval, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn issue30_login_url_works_once_and_opens_a_strict_session() {
    let fx = Fx::start().await;
    let url = fx.login_url().await;
    assert!(url.starts_with(&format!(
        "http://127.0.0.1:{}/dashboard/login?t=",
        fx.daemon.addr().port()
    )));
    let token = url.split("t=").nth(1).unwrap();
    assert!(token.len() >= 32, "at least 128 bits: {token}");

    // Without a session: a page that says how to get one, and no data.
    let r = fx.http.get(fx.url("/dashboard/")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    assert!(r.text().await.unwrap().contains("agency dashboard"));

    let r = fx.http.get(&url).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::SEE_OTHER);
    assert_eq!(r.headers()["location"], "/dashboard/");
    let set = r.headers()["set-cookie"].to_str().unwrap().to_owned();
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/dashboard"] {
        assert!(set.contains(attr), "{attr} missing from {set}");
    }
    let cookie = set.split(';').next().unwrap();

    // The same URL again: refused, and it opens nothing.
    let again = fx.http.get(&url).send().await.unwrap();
    assert_eq!(again.status(), StatusCode::FORBIDDEN);
    assert!(again.headers().get("set-cookie").is_none());
    assert!(again.text().await.unwrap().contains("used or expired"));
    // A made-up token too.
    let made_up = fx
        .http
        .get(fx.url(&format!("/dashboard/login?t={}", "0".repeat(64))))
        .send()
        .await
        .unwrap();
    assert_eq!(made_up.status(), StatusCode::FORBIDDEN);

    let page = fx
        .http
        .get(fx.url("/dashboard/"))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), StatusCode::OK);
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("script-src 'self'"),
        "{csp}"
    );
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(page.headers()["x-content-type-options"], "nosniff");
    assert_eq!(page.headers()["referrer-policy"], "no-referrer");
    let html = page.text().await.unwrap();
    assert!(
        !html.contains("<script>") && !html.contains(" style="),
        "no inline script or style"
    );

    let api = fx
        .http
        .get(fx.url("/dashboard/api/needs-you"))
        .header("cookie", cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), StatusCode::OK);
    assert_eq!(api.headers()["cache-control"], "no-store");
}

#[tokio::test]
async fn issue30_an_action_needs_the_sessions_csrf_token() {
    let fx = Fx::start().await;
    let (cookie, csrf) = fx.session().await;
    let (_, id) = fx.pending_approval();
    let approve = fx.url(&format!("/dashboard/api/approvals/{id}/approve"));
    for token in [None, Some("0".repeat(64)), Some(String::new())] {
        let mut req = fx.http.post(&approve).header("cookie", &cookie);
        if let Some(t) = &token {
            req = req.header("x-csrf-token", t);
        }
        let r = req.send().await.unwrap();
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "token {token:?}");
    }
    // Another session's token is not this one's.
    let (_, other_csrf) = fx.session().await;
    let r = fx
        .http
        .post(&approve)
        .header("cookie", &cookie)
        .header("x-csrf-token", &other_csrf)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let still = fx.svc.approvals_list(Principal::User, false).unwrap();
    assert_eq!(still.len(), 1, "nothing was decided");

    let r = fx
        .http
        .post(&approve)
        .header("cookie", &cookie)
        .header("x-csrf-token", &csrf)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert!(
        fx.svc
            .approvals_list(Principal::User, false)
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn issue30_a_foreign_origin_or_host_is_refused() {
    let fx = Fx::start().await;
    let (cookie, csrf) = fx.session().await;
    let (_, id) = fx.pending_approval();
    let port = fx.daemon.addr().port();
    let approve = fx.url(&format!("/dashboard/api/approvals/{id}/approve"));
    for origin in [
        "http://evil.example".to_owned(),
        format!("http://127.0.0.1:{}", port + 1),
        "null".to_owned(),
    ] {
        let r = fx
            .http
            .post(&approve)
            .header("cookie", &cookie)
            .header("x-csrf-token", &csrf)
            .header("origin", &origin)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "origin {origin}");
    }
    for host in [
        format!("evil.example:{port}"),
        format!("127.0.0.1:{}", port + 1),
    ] {
        let r = fx
            .http
            .get(fx.url("/dashboard/api/needs-you"))
            .header("cookie", &cookie)
            .header("host", &host)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::FORBIDDEN, "host {host}");
    }
    assert_eq!(
        fx.svc.approvals_list(Principal::User, false).unwrap().len(),
        1
    );
    // Our own origin, by either loopback name, is fine.
    let r = fx
        .http
        .get(fx.url("/dashboard/api/needs-you"))
        .header("cookie", &cookie)
        .header("host", format!("localhost:{port}"))
        .header("origin", format!("http://localhost:{port}"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
}

#[tokio::test]
async fn issue30_an_agents_token_opens_no_dashboard_route() {
    let fx = Fx::start().await;
    let (minted, approval) = fx.pending_approval();
    let root = fx.svc.root_handler().unwrap().unwrap();
    let runs = fx.svc.runs(Principal::User, None, None, None).unwrap();
    let file = fx.svc.kb_list(Principal::User, None, Some(1)).unwrap()[0].id;
    // A login URL exists: an agent's token must not redeem or mint one.
    let _ = fx.login_url().await;
    for bearer in [minted.token.clone(), fx.admin.clone()] {
        for (method, path) in ROUTES {
            let path = path
                .replace("{approval}", &approval.to_string())
                .replace("{handler}", &root.to_string())
                .replace("{outcome}", &root.root().to_string())
                .replace(
                    "{agent}",
                    &runs.first().map_or(minted.agent, |r| r.agent).to_string(),
                )
                .replace("{file}", &file.to_string())
                .replace("{lesson}", &agency_core::LessonId::new_random().to_string());
            let mut h = HeaderMap::new();
            h.insert(
                "authorization",
                HeaderValue::from_str(&format!("Bearer {bearer}")).unwrap(),
            );
            // Even with a CSRF header and our origin.
            h.insert("x-csrf-token", HeaderValue::from_static("anything"));
            let req = match *method {
                "GET" => fx.http.get(fx.url(&path)),
                _ => fx
                    .http
                    .post(fx.url(&path))
                    .json(&serde_json::json!({"text": "x", "reason": "x"})),
            };
            let r = req.headers(h).send().await.unwrap();
            assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{method} {path}");
            let body = r.text().await.unwrap();
            assert!(
                !body.contains(&root.to_string()),
                "{method} {path} leaked data: {body}"
            );
        }
    }
    // The agent cannot mint a login URL on the TCP listener either (`/v1`
    // is on the admin socket only).
    let r = fx
        .http
        .post(fx.url("/v1/dashboard/login"))
        .bearer_auth(&minted.token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NOT_FOUND);
    // Nothing happened: the approval waits, the root handler runs.
    assert_eq!(
        fx.svc.approvals_list(Principal::User, false).unwrap().len(),
        1
    );
    assert_eq!(
        fx.svc.handler_view(Principal::User, root).unwrap().status,
        agency_core::status::HandlerStatus::Active
    );
}

#[tokio::test]
async fn issue30_agents_text_comes_back_as_json_data() {
    let fx = Fx::start().await;
    let (minted, _) = fx.pending_approval();
    let root = minted.handler;
    let who = Principal::agent(root, minted.agent);
    let child = fixture::delegate_new(&fx.svc, who, root, XSS_TITLE);
    fx.svc
        .mail_send(who, MailTarget::User, &fixture::text(XSS_BODY))
        .unwrap();
    let (cookie, _) = fx.session().await;
    let get = |path: &'static str| {
        let req = fx.http.get(fx.url(path)).header("cookie", &cookie);
        async move {
            let r = req.send().await.unwrap();
            assert_eq!(r.status(), StatusCode::OK, "{path}");
            assert_eq!(r.headers()["content-type"], "application/json", "{path}");
            assert_eq!(r.headers()["x-content-type-options"], "nosniff", "{path}");
            r.json::<Value>().await.unwrap()
        }
    };
    let org = get("/dashboard/api/org").await;
    let card = org["cards"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["handler"]["id"] == child.to_string())
        .unwrap();
    assert_eq!(
        card["handler"]["title"], XSS_TITLE,
        "the title is data, exactly"
    );
    let outcomes = get("/dashboard/api/outcomes").await;
    assert!(
        outcomes["outcomes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["title"] == XSS_TITLE)
    );
    let mail = get("/dashboard/api/mail").await;
    assert!(
        mail.as_array()
            .unwrap()
            .iter()
            .any(|m| m["body"].as_str().is_some_and(|b| b.contains(XSS_BODY))),
        "{mail}"
    );
}

impl Fx {
    async fn act(&self, cookie: &str, csrf: &str, path: &str, body: Value) -> (StatusCode, Value) {
        let r = self
            .http
            .post(self.url(path))
            .header("cookie", cookie)
            .header("x-csrf-token", csrf)
            .json(&body)
            .send()
            .await
            .unwrap();
        (r.status(), r.json().await.unwrap())
    }

    async fn needs_you(&self, cookie: &str) -> agency_api::NeedsYou {
        self.http
            .get(self.url("/dashboard/api/needs-you"))
            .header("cookie", cookie)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }
}

#[tokio::test]
async fn issue30_needs_you_lists_what_waits_and_each_rows_action_works() {
    let fx = Fx::start().await;
    let (cookie, csrf) = fx.session().await;
    let (minted, approval) = fx.pending_approval();
    let root = minted.handler;
    let who = Principal::agent(root, minted.agent);
    let child = fixture::delegate_new(&fx.svc, who, root, "Soil");
    fx.svc
        .handler_mark_stalled(child, "three agents exited without progress")
        .unwrap();
    // A budget of one tool call: the second call reaches it and pauses
    // the child's subtree.
    let one_call = agency_core::usage::BudgetLimits {
        tool_calls: Some(1),
        ..Default::default()
    };
    fx.svc.budget_set(Principal::User, child, one_call).unwrap();
    let kid = fx.svc.token_mint(Principal::User, child, None).unwrap();
    let kid_who = Principal::agent(kid.handler, kid.agent);
    for _ in 0..2 {
        let _ = fx.svc.tool_call_admit(
            kid_who,
            ToolCallRequest {
                tool: "bash".into(),
                args: serde_json::json!({ "command": "ls" }),
                read_only: None,
            },
        );
    }

    let n = fx.needs_you(&cookie).await;
    assert_eq!(
        n.approvals.iter().map(|a| a.id.0).collect::<Vec<_>>(),
        [approval]
    );
    assert_eq!(n.approvals[0].args, r#"{"command":"sudo ls"}"#);
    assert_eq!(n.stalled.len(), 1);
    assert_eq!(
        (n.stalled[0].handler, n.stalled[0].title.as_str()),
        (child, "Soil")
    );
    assert_eq!(
        n.paused.iter().map(|p| p.handler).collect::<Vec<_>>(),
        [child],
        "{n:?}"
    );
    assert_eq!(n.paused[0].limits, Some(one_call));
    assert!(n.titles.iter().any(|t| t.handler == root));

    // Deny the call, guide the stalled handler, raise the budget.
    let (st, _) = fx
        .act(
            &cookie,
            &csrf,
            &format!("/dashboard/api/approvals/{approval}/deny"),
            serde_json::json!({"reason": "not as root"}),
        )
        .await;
    assert_eq!(st, StatusCode::OK);
    let (st, sent) = fx
        .act(
            &cookie,
            &csrf,
            &format!("/dashboard/api/handlers/{child}/mail"),
            serde_json::json!({"text": "Try the other bed."}),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{sent}");
    let (st, raised) = fx
        .act(
            &cookie,
            &csrf,
            &format!("/dashboard/api/handlers/{child}/budget"),
            serde_json::json!({"tool_calls": 10}),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{raised}");
    let n = fx.needs_you(&cookie).await;
    assert!(
        n.approvals.is_empty() && n.stalled.is_empty() && n.paused.is_empty(),
        "{n:?}"
    );
    assert_eq!(
        fx.svc.approvals_list(Principal::User, true).unwrap()[0]
            .deny_reason
            .as_deref(),
        Some("not as root")
    );

    // Pause the child's subtree by hand, see it in "needs you", resume it.
    let (st, p) = fx
        .act(
            &cookie,
            &csrf,
            &format!("/dashboard/api/handlers/{child}/pause"),
            serde_json::json!({}),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{p}");
    assert_eq!(p["paused"], true, "{p}");
    let n = fx.needs_you(&cookie).await;
    assert_eq!(
        n.paused.iter().map(|p| p.handler).collect::<Vec<_>>(),
        [child],
        "{n:?}"
    );
    assert!(
        n.paused[0].pause.reason.starts_with("paused by the user"),
        "{n:?}"
    );
    let (st, _) = fx
        .act(
            &cookie,
            &csrf,
            &format!("/dashboard/api/handlers/{child}/resume"),
            serde_json::json!({}),
        )
        .await;
    assert_eq!(st, StatusCode::OK);
    assert!(fx.needs_you(&cookie).await.paused.is_empty());

    // Stop the child's subtree from the Organisation page's action.
    let (st, _) = fx
        .act(
            &cookie,
            &csrf,
            &format!("/dashboard/api/handlers/{child}/stop"),
            serde_json::json!({}),
        )
        .await;
    assert_eq!(st, StatusCode::OK);
    let org: agency_api::OrgPage = fx
        .http
        .get(fx.url("/dashboard/api/org"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let card = org.cards.iter().find(|c| c.handler.id == child).unwrap();
    assert_eq!(
        card.handler.status,
        agency_core::status::HandlerStatus::Deactivated
    );
    let root_card = org.cards.iter().find(|c| c.handler.id == root).unwrap();
    assert!(root_card.live_since.is_some(), "the minted agent is live");
    assert!(root_card.last_activity.is_some());
}

#[tokio::test]
async fn issue30_the_live_stream_carries_events_and_ends_with_the_session() {
    let fx = Fx::start().await;
    let (cookie, csrf) = fx.session().await;
    let root = fx.svc.root_handler().unwrap().unwrap();
    let mut stream = fx
        .http
        .get(fx.url("/dashboard/api/events/stream"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    assert_eq!(stream.headers()["content-type"], "text/event-stream");
    fixture::mail_from_user(&fx.svc, root, "first");
    let mut seen = String::new();
    while !seen.contains("mail.sent") {
        let chunk = stream.chunk().await.unwrap().expect("the stream goes on");
        seen.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(seen.contains("id: "), "{seen}");

    let (st, _) = fx
        .act(
            &cookie,
            &csrf,
            "/dashboard/api/logout",
            serde_json::json!({}),
        )
        .await;
    assert_eq!(st, StatusCode::OK);
    // The next event ends the stream instead of reaching a logged-out page.
    fixture::mail_from_user(&fx.svc, root, "second");
    let mut after = String::new();
    while let Some(chunk) = stream.chunk().await.unwrap() {
        after.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(!after.contains("second"), "{after}");
    // And the session opens nothing any more.
    let r = fx
        .http
        .get(fx.url("/dashboard/api/needs-you"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
}

/// Issue 31: a pipeline run that stopped at a stage shows in "Needs you".
/// This daemon has no model upstream, so the first llm stage fails
/// `failed_infra` and the run stops there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue31_a_stopped_pipeline_run_shows_in_needs_you() {
    let fx = Fx::start().await;
    let (cookie, _) = fx.session().await;
    let src = "---\npipeline: one\nstages:\n  - name: A\n    kind: llm\n    system: You are A.\n    reads: [input]\n    output: {type: object, required: [x], properties: {x: {type: string}}}\n---\n\n## A\n\n{{input}}\n";
    let model = agency_org::pipeline::compile_pipeline_str("one.pipeline", src).unwrap();
    let run = fx
        .svc
        .pipeline_start(
            Principal::User,
            agency_service::pipelines::PipelineStart {
                model,
                input: serde_json::json!("go"),
                level: 0,
                live_tools: false,
            },
        )
        .unwrap()
        .run
        .id;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let n = loop {
        let n = fx.needs_you(&cookie).await;
        if !n.stopped_pipelines.is_empty() {
            break n;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the run never stopped: {n:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(n.stopped_pipelines[0].id, run);
    assert_eq!(
        n.stopped_pipelines[0].status,
        agency_core::status::PipelineRunStatus::Failed
    );
    assert!(
        n.titles
            .iter()
            .any(|t| t.handler == run && t.title.contains("one"))
    );
    let shown = fx.svc.pipeline_show(Principal::User, run).unwrap();
    let stage = &shown.stages_detail[0];
    assert_eq!(stage.status, agency_core::status::StageStatus::FailedInfra);
    assert!(
        stage.error.as_deref().unwrap_or("").contains("upstream"),
        "{stage:?}"
    );
}

/// Issue 31 item 2: `POST /v1/pipelines/{name}/runs` starts a pipeline
/// the daemon knows by name: the home's `pipelines/NAME.pipeline` first,
/// else a built-in one; a bad name or a source that does not compile
/// starts nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue31_a_pipeline_starts_by_name_from_the_home_or_built_in() {
    let fx = Fx::start().await;
    let post = |name: &str, body: Value| {
        fx.v1
            .post(format!("http://localhost/v1/pipelines/{name}/runs"))
            .bearer_auth(&fx.admin)
            .json(&body)
            .send()
    };
    let r = post(
        "agencycore",
        serde_json::json!({"input": "add a /health route"}),
    )
    .await
    .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["pipeline"], "agencycore");
    assert_eq!(v["stages_detail"].as_array().unwrap().len(), 11);

    let dir = fx.home_dir().join("pipelines");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("mine.pipeline"),
        "---\npipeline: mine\nstages:\n  - name: A\n    kind: llm\n    system: You are A.\n    reads: [input]\n    output: {type: object}\n---\n\n## A\n\n{{input}}\n",
    )
    .unwrap();
    let r = post("mine", serde_json::json!({"input": "x"}))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.json::<Value>().await.unwrap()["pipeline"], "mine");

    std::fs::write(
        dir.join("broken.pipeline"),
        "---\npipeline: broken\nstagez: []\n---\n",
    )
    .unwrap();
    let r = post("broken", serde_json::json!({"input": "x"}))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    let text = r.text().await.unwrap();
    assert!(text.contains("broken.pipeline:3:"), "{text}");
    for (name, status) in [
        ("nope", StatusCode::NOT_FOUND),
        ("..%2Fetc", StatusCode::BAD_REQUEST),
    ] {
        let r = post(name, serde_json::json!({"input": "x"})).await.unwrap();
        assert_eq!(r.status(), status, "{name}");
    }
    let runs = fx.svc.pipeline_runs(Principal::User, false, None).unwrap();
    assert_eq!(runs.len(), 2, "nothing started for the bad ones");
}
