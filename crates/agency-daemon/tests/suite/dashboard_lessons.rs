//! The dashboard's Lessons page against a real daemon whose pipeline runs
//! are answered by the scripted model server: lessons learned from two
//! runs listed with their utility and history, each run's scorecard in
//! the score trend, a tool-policy lesson waiting in "Needs you", and the
//! user's decisions (approve, reject, retire, roll back) as CSRF-guarded
//! actions; agents' text in a lesson comes back as JSON data.

use std::time::Duration;

use agency_api::{DashboardLogin, LessonDetail, LessonView, NeedsYou, PipelineScore};
use agency_core::status::{LessonState, PipelineRunStatus};
use agency_core::{HandlerId, Principal};
use agency_daemon::Daemon;
use agency_testkit::{ModelServer, Script};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fixture;

const XSS_TITLE: &str = "<script>alert(1)</script><img src=x onerror=alert(2)> routes";
const XSS_ADVICE: &str = "Add a request test <img src=x onerror=alert(3)><script>alert(4)</script>";

/// The built-in Retriever, a Gatekeeper that reads it and scores (the
/// stage a lesson's replay re-runs), a Learner that proposes.
const PIPELINE: &str = "---\npipeline: learns\nstages:\n  - name: Retriever\n    kind: code\n    step: retriever\n    reads: [input]\n    output: {type: object}\n  - name: Gatekeeper\n    kind: llm\n    system: You are the Gatekeeper of this pipeline.\n    reads: [input, Retriever]\n    output: {type: object, required: [scorecard, totalScore], properties: {scorecard: {type: object}}}\n  - name: Learner\n    kind: llm\n    system: You are the Learner of this pipeline.\n    reads: [input]\n    output: {type: object, required: [candidateLessons]}\n---\n\n## Gatekeeper\n\n{{input}}\n\n{{Retriever}}\n\n## Learner\n\n{{input}}\n";

fn answer(name: &str, system: &str, user: Option<&str>, answer: Value) -> Value {
    let mut m = json!({"system_contains": system});
    if let Some(u) = user {
        m["user_contains"] = json!(u);
    }
    json!({"name": name, "match": m, "turns": [{"text": answer.to_string()}]})
}

/// The first run's Gatekeeper passes it; the second fails Safety (so a
/// lesson proposed by the first run only waits for a second). Both
/// Learners propose the XSS-titled lesson and a tool-policy lesson; the
/// first also proposes one no other run does.
fn script() -> Script {
    let card = |safety: i64| {
        json!({"scorecard": {"correctness": 5, "verification": 4, "safety": safety,
                             "clarity": 4, "autonomy": 3},
               "totalScore": 16 + safety})
    };
    let both = [
        json!({"title": XSS_TITLE, "lesson": XSS_ADVICE, "tags": ["http"]}),
        json!({"title": "Ask first", "lesson": "Ask for approval before running sudo.",
               "scope": {"kind": "tool_policy", "name": "learns"}}),
    ];
    let once =
        json!({"title": "Name the handlers", "lesson": "Name each handler after its route."});
    let learner = |lessons: Vec<Value>| json!({"reflection": "r", "candidateLessons": lessons});
    // A run that recalls a lesson is clearer: the replay gate's evidence.
    let mut clearer = card(5);
    clearer["scorecard"]["clarity"] = json!(5);
    let doc = json!({"scenarios": [
        answer("gate, lessons recalled", "You are the Gatekeeper", Some("Advice, quoted"), clearer),
        // The second run's prompt also names the first (a recalled example).
        answer("gate 2", "You are the Gatekeeper", Some("second run"), card(2)),
        answer("gate 1", "You are the Gatekeeper", Some("first run"), card(5)),
        answer("gate", "You are the Gatekeeper", None, card(2)),
        answer("learn 1", "You are the Learner", Some("first run"),
               learner(vec![both[0].clone(), both[1].clone(), once])),
        answer("learn", "You are the Learner", None, learner(both.to_vec())),
    ]});
    Script::from_json(&doc.to_string()).unwrap()
}

struct Fx {
    _dir: tempfile::TempDir,
    _model: ModelServer,
    daemon: Daemon,
    svc: std::sync::Arc<agency_service::System>,
    http: reqwest::Client,
    cookie: String,
    csrf: String,
}

impl Fx {
    /// A daemon whose model upstream is the scripted server, two finished
    /// runs of `learns`, and a logged-in dashboard session.
    async fn start() -> Fx {
        let model = ModelServer::start(script()).await.unwrap();
        let (dir, home) = fixture::home_with_config(&format!(
            "[server]\nport = 0\n[models.default]\napi = \"anthropic\"\nbase_url = {:?}\nmodel = \"test-model\"\ndefault_price = {{ input = 1.0, output = 2.0 }}\n",
            model.base_url()
        ));
        let (daemon, svc, _) = fixture::start(&home).await;
        let pipeline = agency_org::pipeline::compile_pipeline_str("learns.pipeline", PIPELINE)
            .expect("the test pipeline compiles");
        for input in [
            "first run: add a /health route",
            "second run: add a /ready route",
        ] {
            let run = svc
                .pipeline_start(
                    Principal::User,
                    agency_service::pipelines::PipelineStart {
                        model: pipeline.clone(),
                        input: json!(input),
                        level: 0,
                        live_tools: false,
                    },
                )
                .unwrap()
                .run
                .id;
            wait_done(&svc, run).await;
        }
        // The lessons the two runs proposed went through their replay.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !svc
            .lessons(Principal::User, None, &[LessonState::Replaying], None)
            .unwrap()
            .is_empty()
        {
            assert!(std::time::Instant::now() < deadline, "a replay never ended");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let v1 = reqwest::Client::builder()
            .unix_socket(home.admin_socket_path())
            .build()
            .unwrap();
        let login: DashboardLogin = v1
            .post("http://localhost/v1/dashboard/login")
            .bearer_auth(home.admin_token().unwrap())
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let r = http.get(&login.url).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::SEE_OTHER);
        let cookie = r.headers()["set-cookie"].to_str().unwrap();
        let cookie = cookie.split(';').next().unwrap().to_owned();
        let url = format!("http://{}/dashboard/api/session", daemon.addr());
        let s: Value = http
            .get(url)
            .header("cookie", &cookie)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        Fx {
            _dir: dir,
            _model: model,
            csrf: s["csrf"].as_str().unwrap().to_owned(),
            cookie,
            daemon,
            svc,
            http,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}/dashboard/api/{path}", self.daemon.addr())
    }

    async fn get<T: serde::de::DeserializeOwned>(&self, path: &str) -> T {
        let r = self
            .http
            .get(self.url(path))
            .header("cookie", &self.cookie)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        assert_eq!(r.headers()["content-type"], "application/json", "{path}");
        assert_eq!(r.headers()["x-content-type-options"], "nosniff", "{path}");
        r.json().await.unwrap()
    }

    /// POST `path` with `body`, with the session's CSRF token or not.
    async fn post(&self, path: &str, body: Value, csrf: bool) -> (StatusCode, Value) {
        let mut req = self
            .http
            .post(self.url(path))
            .header("cookie", &self.cookie)
            .json(&body);
        if csrf {
            req = req.header("x-csrf-token", &self.csrf);
        }
        let r = req.send().await.unwrap();
        (r.status(), r.json().await.unwrap_or(Value::Null))
    }

    fn lesson(&self, title: &str) -> LessonView {
        self.svc
            .lessons(Principal::User, None, &[], None)
            .unwrap()
            .into_iter()
            .find(|l| l.title == title)
            .unwrap_or_else(|| panic!("no lesson {title:?}"))
    }
}

async fn wait_done(svc: &agency_service::System, run: HandlerId) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let v = svc.pipeline_show(Principal::User, run).unwrap();
        if !v.run.status.is_unfinished() {
            assert_eq!(v.run.status, PipelineRunStatus::Done, "{v:#?}");
            return;
        }
        assert!(std::time::Instant::now() < deadline, "the run never ended");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lessons_scores_and_a_lesson_awaiting_the_user_are_served_as_data() {
    let fx = Fx::start().await;

    // The lessons, with their utility and evidence; agents' text exact.
    let lessons: Vec<LessonView> = fx.get("lessons").await;
    assert_eq!(lessons.len(), 3, "{lessons:#?}");
    let xss = lessons.iter().find(|l| l.title == XSS_TITLE).unwrap();
    assert_eq!(xss.advice, XSS_ADVICE, "the advice is data, exactly");
    assert_eq!(xss.state, LessonState::Admitted);
    assert_eq!(xss.supporting_runs.len(), 2);
    let policy = fx.lesson("Ask first");
    assert_eq!(policy.state, LessonState::AwaitingUser);
    let only: Vec<LessonView> = fx.get("lessons?state=awaiting_user").await;
    assert_eq!(only.iter().map(|l| l.id).collect::<Vec<_>>(), [policy.id]);
    let r = fx
        .http
        .get(fx.url("lessons?state=bogus"))
        .header("cookie", &fx.cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);

    // One lesson's history and versions.
    let d: LessonDetail = fx.get(&format!("lessons/{}", xss.id)).await;
    assert_eq!(d.lesson.title, XSS_TITLE);
    assert!(d.history.iter().any(|e| e.action == "proposed"), "{d:#?}");
    assert_eq!(d.versions.len() as i64, d.lesson.version);

    // The score trend: both runs, newest first, the second failing Safety.
    let scores: Vec<PipelineScore> = fx.get("scores").await;
    assert_eq!(
        scores
            .iter()
            .map(|s| (s.total, s.safety_pass))
            .collect::<Vec<_>>(),
        [(18, false), (21, true)],
        "{scores:#?}"
    );
    assert!(scores.iter().all(|s| s.pipeline == "learns"));
    let none: Vec<PipelineScore> = fx.get("scores?pipeline=other").await;
    assert!(none.is_empty());

    // "Needs you" lists the lesson waiting for the user.
    let n: NeedsYou = fx.get("needs-you").await;
    assert_eq!(
        n.lessons.iter().map(|l| l.id).collect::<Vec<_>>(),
        [policy.id]
    );

    // The page is served as a script of its own, building text nodes.
    let js = fx
        .http
        .get(format!(
            "http://{}/dashboard/assets/lessons.js",
            fx.daemon.addr()
        ))
        .header("cookie", &fx.cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(js.status(), StatusCode::OK);
    let js = js.text().await.unwrap();
    assert!(js.contains("PAGES.lessons") && !js.contains("innerHTML"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lesson_decisions_need_the_csrf_token_and_change_the_lesson() {
    let fx = Fx::start().await;
    let policy = fx.lesson("Ask first");
    let once = fx.lesson("Name the handlers");
    let xss = fx.lesson(XSS_TITLE);
    assert_eq!(once.state, LessonState::Proposed);
    let with_reason = json!({"reason": "not now"});
    let actions = [
        (format!("lessons/{}/approve", policy.id), json!({})),
        (format!("lessons/{}/reject", once.id), with_reason.clone()),
        (format!("lessons/{}/retire", xss.id), with_reason.clone()),
        (format!("lessons/{}/rollback", xss.id), json!({})),
    ];
    // Without the CSRF token: refused, nothing changes.
    for (path, body) in &actions {
        let (st, _) = fx.post(path, body.clone(), false).await;
        assert_eq!(st, StatusCode::FORBIDDEN, "{path}");
    }
    for (l, was) in [(&policy, &policy), (&once, &once), (&xss, &xss)] {
        let now = fx.lesson(&l.title);
        assert_eq!((now.state, now.version), (was.state, was.version));
    }

    // A reason is required to reject or retire.
    let (st, body) = fx
        .post(
            &format!("lessons/{}/reject", once.id),
            json!({"reason": " "}),
            true,
        )
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST, "{body}");
    let (st, _) = fx
        .post(&format!("lessons/{}/retire", xss.id), json!({}), true)
        .await;
    assert!(st.is_client_error(), "{st}");

    // With it: approve, reject, retire, roll back.
    let (st, v) = fx.post(&actions[0].0, actions[0].1.clone(), true).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["state"], "admitted");
    let n: NeedsYou = fx.get("needs-you").await;
    assert!(n.lessons.is_empty(), "approved: no longer waiting");
    let (st, v) = fx.post(&actions[1].0, actions[1].1.clone(), true).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["state"], "rejected");
    assert!(v["reason"].as_str().unwrap().contains("not now"), "{v}");
    let (st, v) = fx.post(&actions[2].0, actions[2].1.clone(), true).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["state"], "retired");
    // Rolled back to the version before (the admitted one): admitted.
    let (st, v) = fx.post(&actions[3].0, actions[3].1.clone(), true).await;
    assert_eq!(st, StatusCode::OK, "{v}");
    assert_eq!(v["state"], "admitted", "{v}");
    assert_eq!(v["version"], xss.version + 2);
    // A version that does not exist: refused.
    let (st, _) = fx
        .post(
            &format!("lessons/{}/rollback", xss.id),
            json!({"to": 99}),
            true,
        )
        .await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    let d = fx.svc.lesson_show(Principal::User, xss.id).unwrap();
    let actions: Vec<&str> = d.history.iter().map(|e| e.action.as_str()).collect();
    assert!(
        actions.contains(&"retired") && actions.contains(&"rolled_back"),
        "{actions:?}"
    );
}
