//! The state both golden tests start from, built through the real daemon
//! (port 0, `runtime = "none"` so no agent process starts, the sandbox off
//! so nothing depends on the machine's cgroups): the root handler with an
//! agent token, outcomes (one with two parents), a delegated child with its
//! own token, a budget, KB files with history, mail with a reply, a pending
//! approval, a memory, an audit entry and a small organisation; and the
//! insta settings that name every id the test knows and redact what
//! differs from run to run.

use std::sync::Arc;
use std::time::Duration;

use agency_core::{AgentId, FileId, HandlerId, MailTarget, MessageId, OutcomeId, Principal};
use agency_daemon::{Daemon, Home};
use agency_service::{MailBody, NewOutcome, System};
use serde_json::json;

use super::json::Json;
use crate::fixture;

/// An agent token minted for a handler.
pub struct Agent {
    pub handler: HandlerId,
    pub agent: AgentId,
    pub token: String,
}

impl Agent {
    pub fn who(&self) -> Principal {
        Principal::agent(self.handler, self.agent)
    }
}

pub struct World {
    pub _dir: tempfile::TempDir,
    pub daemon: Daemon,
    pub svc: Arc<System>,
    admin: String,
    /// HTTP over the home's `daemon.sock`, where `/v1` is served.
    v1: reqwest::Client,
    /// HTTP over the daemon's TCP port (agents' routes).
    http: reqwest::Client,
    /// Every id the test knows, with the name it has in snapshots.
    labels: Vec<(String, String)>,
    /// The answers of the POSTs that built the state, in order.
    pub built: Vec<(&'static str, Json)>,
    pub root: HandlerId,
    pub root_agent: Agent,
    pub child: HandlerId,
    pub child_agent: Agent,
    /// Children of the root outcome: "Dig the beds" (delegated: the child
    /// handler's root), "Plant the seeds", and "Buy seeds" below both.
    pub dig: OutcomeId,
    pub plant: OutcomeId,
    pub seeds: OutcomeId,
    /// "Garden plan", two versions.
    pub plan: FileId,
    pub user_mail: MessageId,
    pub to_child: MessageId,
    pub reply: MessageId,
    pub approval: String,
    pub memory: String,
}

/// Distinct milliseconds between steps: lists ordered by time, then by a
/// random id, would otherwise swap entries made in the same millisecond.
async fn tick() {
    tokio::time::sleep(Duration::from_millis(3)).await;
}

fn text(subject: Option<&str>, t: &str) -> MailBody {
    MailBody::Text {
        subject: subject.map(str::to_owned),
        text: t.to_owned(),
    }
}

impl World {
    pub async fn build() -> World {
        let (dir, home) = fixture::home_with_config("[agents]\nsandbox = \"off\"\n");
        let tmp = dir.path().display().to_string();
        let (daemon, svc, root) = fixture::start(&home).await;
        let mut w = World::new(dir, &home, daemon, svc, root);
        w.label(&tmp, "[tmp]");
        // A handler's id is its root outcome's id: "[root]" names both.
        w.label(root, "root");
        // The root agent has a workspace, as a started agent would.
        let ws = std::path::Path::new(&tmp).join("ws");
        std::fs::create_dir(&ws).unwrap();
        let r = w
            .post(
                "tokens_mint_root",
                "/v1/tokens",
                json!({"handler": root, "workspace": ws}),
            )
            .await;
        w.root_agent = w.agent_of(&r, "root-agent");
        tick().await;

        let sent = w
            .post(
                "mail_send",
                "/v1/mail",
                json!({"to": "root", "subject": "Garden", "text": "Please plan the garden."}),
            )
            .await;
        w.user_mail = sent.str_at("message").parse().unwrap();
        w.label(w.user_mail, "msg-user");
        tick().await;

        let by = w.root_agent.who();
        let new = |title: &str, parents: Vec<OutcomeId>| NewOutcome {
            title: title.into(),
            description: format!("{title}, before spring."),
            parents,
            priority: 1,
        };
        w.dig = w
            .svc
            .outcome_create(by, &new("Dig the beds", vec![root.root()]))
            .unwrap();
        w.label(w.dig, "dig");
        tick().await;
        w.plant = w
            .svc
            .outcome_create(by, &new("Plant the seeds", vec![root.root()]))
            .unwrap();
        w.label(w.plant, "plant");
        tick().await;
        // Two parents: buying seeds serves both planting and digging.
        w.seeds = w
            .svc
            .outcome_create(by, &new("Buy seeds", vec![w.plant, w.dig]))
            .unwrap();
        w.label(w.seeds, "seeds");
        tick().await;

        w.plan = w
            .svc
            .kb_create(by, "Garden plan", b"dig, plant, water\n")
            .unwrap();
        w.label(w.plan, "plan");
        tick().await;
        let v1 = w.svc.kb_read(by, w.plan).unwrap();
        w.svc
            .kb_write(
                by,
                w.plan,
                b"dig, plant, water, wait\n",
                1,
                &v1.hash.to_string(),
            )
            .unwrap();
        tick().await;

        let grant = w
            .post(
                "capability_grant",
                &format!("/v1/handlers/{root}/capabilities"),
                json!({"kind": "egress", "key": "api.example.com", "level": "read", "delegatable": true}),
            )
            .await;
        assert!(grant.get("capability").is_some(), "{}", grant.to_text());
        tick().await;

        let kb_read = agency_service::GrantRequest {
            resource: agency_core::Resource::Kb(w.plan),
            level: agency_core::Level::Read,
            delegatable: false,
        };
        // The child handler's id is "[dig]", the id of its root outcome.
        w.child = w.svc.delegate(by, w.dig, &[kb_read]).unwrap().handler;
        assert_eq!(w.child.root(), w.dig);
        tick().await;
        let r = w
            .post(
                "tokens_mint_child",
                "/v1/tokens",
                json!({"handler": w.child}),
            )
            .await;
        w.child_agent = w.agent_of(&r, "child-agent");
        tick().await;

        w.to_child = w
            .svc
            .mail_send(
                by,
                MailTarget::Handler(w.child),
                &text(Some("Digging"), "Start by the fence."),
            )
            .unwrap();
        w.label(w.to_child, "msg-to-child");
        tick().await;
        w.reply = w
            .svc
            .mail_send_replying(
                w.child_agent.who(),
                MailTarget::Handler(root),
                &text(None, "Digging has begun."),
                Some(w.to_child),
            )
            .unwrap();
        w.label(w.reply, "msg-reply");
        tick().await;
        let to_user = w
            .svc
            .mail_send(
                by,
                MailTarget::User,
                &text(Some("Plan"), "The plan is ready."),
            )
            .unwrap();
        w.label(to_user, "msg-to-user");
        tick().await;

        let budget = w
            .post(
                "budget_set",
                &format!("/v1/budgets/{}", w.child),
                json!({"tokens": 1_000_000, "tool_calls": 1000, "micro_usd": 5_000_000}),
            )
            .await;
        assert!(budget.get("error").is_none(), "{}", budget.to_text());
        tick().await;

        let admission = w
            .agent_post(
                &w.child_agent.token,
                "/agent/tool-check",
                json!({"tool": "bash", "args": {"command": "rm -rf /tmp/agency-golden"}}),
            )
            .await;
        w.built.push(("tool_check_pending", admission.clone()));
        w.approval = match admission.get("approval") {
            Some(Json::Num(n)) => n.to_string(),
            _ => panic!("no pending approval: {}", admission.to_text()),
        };
        tick().await;

        let m = w
            .svc
            .memory_store(
                by,
                "The beds face south.",
                &["garden".to_owned()],
                Some("fact"),
            )
            .unwrap();
        w.memory = m.id.to_string();
        w.label(m.id, "memory");
        tick().await;
        w.svc
            .audit_submit(w.child_agent.who(), "Dug the first bed.")
            .unwrap();
        tick().await;

        let org = w.post("org_apply", "/v1/orgs", org_model()).await;
        if let Some(Json::Arr(agents)) = org.get("agents") {
            for a in agents {
                if let (Some(name), Some(h)) = (
                    a.get("agent").and_then(Json::as_str),
                    a.get("handler").and_then(Json::as_str),
                ) {
                    w.label(h, &format!("org-{name}"));
                }
            }
        }
        tick().await;
        w
    }

    fn new(
        dir: tempfile::TempDir,
        home: &Home,
        daemon: Daemon,
        svc: Arc<System>,
        root: HandlerId,
    ) -> World {
        let none = || Agent {
            handler: root,
            agent: AgentId(uuid::Uuid::nil()),
            token: String::new(),
        };
        World {
            admin: home.admin_token().unwrap(),
            v1: reqwest::Client::builder()
                .unix_socket(home.admin_socket_path())
                .build()
                .unwrap(),
            http: reqwest::Client::new(),
            _dir: dir,
            daemon,
            svc,
            labels: Vec::new(),
            built: Vec::new(),
            root,
            root_agent: none(),
            child: root,
            child_agent: none(),
            dig: root.root(),
            plant: root.root(),
            seeds: root.root(),
            plan: FileId(uuid::Uuid::nil()),
            user_mail: MessageId(uuid::Uuid::nil()),
            to_child: MessageId(uuid::Uuid::nil()),
            reply: MessageId(uuid::Uuid::nil()),
            approval: String::new(),
            memory: String::new(),
        }
    }

    /// Name `id` in snapshots.
    pub fn label(&mut self, id: impl ToString, name: &str) {
        let id = id.to_string();
        let name = if name.starts_with('[') {
            name.to_owned()
        } else {
            format!("[{name}]")
        };
        self.labels.push((id, name));
    }

    fn agent_of(&mut self, minted: &Json, name: &str) -> Agent {
        let agent: AgentId = minted.str_at("agent").parse().unwrap();
        self.label(agent, name);
        Agent {
            handler: minted.str_at("handler").parse().unwrap(),
            agent,
            token: minted.str_at("token"),
        }
    }

    /// `s` with every known id replaced by its name: the key lists are
    /// sorted by, where the API orders by random (v4) UUIDs.
    pub fn named(&self, s: &str) -> String {
        let mut out = s.to_owned();
        for (id, name) in &self.labels {
            out = out.replace(id.as_str(), name);
        }
        out
    }

    /// Sort the array at `path` in `v` by each entry's text, known ids
    /// named and other UUIDs blanked: for lists the API orders by UUID,
    /// and UUIDs are random (v4) on every run. Entries must differ in
    /// something else, which they do in this state.
    pub fn sort_by_named(&self, v: &mut Json, path: &[&str]) {
        let mut at = v;
        for key in path {
            match at {
                Json::Obj(m) => match m.iter_mut().find(|(k, _)| k == key) {
                    Some((_, next)) => at = next,
                    None => panic!("no {key:?} to sort"),
                },
                _ => panic!("no {key:?} to sort"),
            }
        }
        let Json::Arr(items) = at else {
            panic!("{path:?} is not a list")
        };
        items.sort_by_cached_key(|i| blank_uuids(&self.named(&i.to_text())));
    }

    /// Sort a list of log entries by what they say, their times left out:
    /// entries recorded within one millisecond (reads are recorded in
    /// batches, after the writes of their millisecond) have no reliable
    /// order, and the snapshot pins their content, not that order.
    pub fn sort_log_entries(&self, v: &mut Json) {
        let Json::Arr(items) = v else {
            panic!("the log is not a list")
        };
        items.sort_by_cached_key(|i| {
            let mut i = i.clone();
            if let Json::Obj(fields) = &mut i {
                fields.retain(|(k, _)| k != "at");
            }
            blank_uuids(&self.named(&i.to_text()))
        });
    }

    /// The insta settings of every golden snapshot: known ids by name, then
    /// whatever still differs between runs.
    pub fn settings(&self) -> insta::Settings {
        let mut s = insta::Settings::clone_current();
        s.set_snapshot_path("snapshots");
        s.set_prepend_module_to_snapshot(false);
        s.set_omit_expression(true);
        for (id, name) in &self.labels {
            s.add_filter(&regex_escape(id), name.as_str());
        }
        s.add_filter(
            r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
            "[uuid]",
        );
        s.add_filter(r"agency_[a-z]*_?[0-9a-f]{32,}", "[token]");
        s.add_filter(r"blake3:[0-9a-f]{64}", "[hash]");
        s.add_filter(r"\b[0-9a-f]{64}\b", "[hash]");
        s.add_filter(
            r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})",
            "[time]",
        );
        // Milliseconds since 1970 (2017 to 2033): every timestamp field.
        s.add_filter(r"\b1[5-9]\d{11}\b", "[ms]");
        s.add_filter(r"127\.0\.0\.1:\d+", "[addr]");
        // Durations measured while the test ran.
        s.add_filter(r#""(runtime_ms|elapsed_ms)": \d+"#, r#""$1": [duration]"#);
        s.add_filter(r#""pid": \d+"#, r#""pid": "[pid]""#);
        s
    }

    async fn send(&self, rq: reqwest::RequestBuilder) -> (u16, Json) {
        let r = rq.send().await.unwrap();
        let status = r.status().as_u16();
        let body = r.text().await.unwrap();
        (status, Json::parse(&body))
    }

    /// `GET path` on `/v1` as the user: the status and the body.
    pub async fn get(&self, path: &str) -> (u16, Json) {
        self.send(
            self.v1
                .get(format!("http://localhost{path}"))
                .bearer_auth(&self.admin),
        )
        .await
    }

    /// `POST path` on `/v1` as the user, kept in `built` under `name`.
    pub async fn post(&mut self, name: &'static str, path: &str, body: serde_json::Value) -> Json {
        let (status, v) = self
            .send(
                self.v1
                    .post(format!("http://localhost{path}"))
                    .bearer_auth(&self.admin)
                    .json(&body),
            )
            .await;
        assert_eq!(status, 200, "{path}: {}", v.to_text());
        self.built.push((name, v.clone()));
        v
    }

    /// `POST path` on `/v1` as the user: the status and the body.
    pub async fn post_raw(&self, path: &str, body: serde_json::Value) -> (u16, Json) {
        self.send(
            self.v1
                .post(format!("http://localhost{path}"))
                .bearer_auth(&self.admin)
                .json(&body),
        )
        .await
    }

    /// `POST path` on the TCP port with an agent's token.
    pub async fn agent_post(&self, token: &str, path: &str, body: serde_json::Value) -> Json {
        let (status, v) = self
            .send(
                self.http
                    .post(format!("http://{}{path}", self.daemon.addr()))
                    .bearer_auth(token)
                    .json(&body),
            )
            .await;
        assert_eq!(status, 200, "{path}: {}", v.to_text());
        v
    }

    /// The URL of the daemon's MCP endpoint.
    pub fn mcp_url(&self) -> String {
        format!("http://{}/mcp", self.daemon.addr())
    }
}

/// A one-agent organisation, enough for `GET /v1/orgs` to say something.
fn org_model() -> serde_json::Value {
    json!({
        "name": "GreetAgency",
        "type": "Agency",
        "description": "Greet visitors.",
        "executiveAgent": "Greeter",
        "agents": [{
            "name": "Greeter", "title": "Front Desk",
            "source": {"file": "Greeter.agent", "line": 1}
        }],
        "source": {"file": "GreetAgency.agency", "line": 1}
    })
}

/// `s` with every UUID replaced by `[uuid]`, as the snapshots show it.
fn blank_uuids(s: &str) -> String {
    const SHAPE: &[usize] = &[8, 4, 4, 4, 12];
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    'scan: while i < b.len() {
        if b.len() - i >= 36 {
            let mut j = i;
            let mut ok = true;
            for (n, len) in SHAPE.iter().enumerate() {
                if !b[j..j + len].iter().all(|c| c.is_ascii_hexdigit()) {
                    ok = false;
                    break;
                }
                j += len;
                if n < 4 {
                    if b[j] != b'-' {
                        ok = false;
                        break;
                    }
                    j += 1;
                }
            }
            if ok {
                out.extend_from_slice(b"[uuid]");
                i = j;
                continue 'scan;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Regex-escape a literal for an insta filter.
fn regex_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$#&-~".contains(c);
            special.then_some('\\').into_iter().chain([c])
        })
        .collect()
}
