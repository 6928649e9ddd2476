//! Messages to an agency from outside (issue 12 items 6-7) against a real
//! daemon on port 0: `POST /v1/agency/messages` answers 202 at once or
//! waits for the reply, `GET` polls it, `…/events` streams it; the reply
//! is the executive handler's `mail_send` with `in_reply_to`, made over
//! MCP with an agent token. Agency keys open their own agency's messages
//! on TCP and nothing else; the admin token works on the socket only.

#![allow(clippy::unwrap_used)]

use crate::fixture;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agency_core::{HandlerId, MailTarget, Principal};
use agency_daemon::{Daemon, Home};
use agency_service::System;
use serde_json::{Value, json};

struct Fx {
    _dir: tempfile::TempDir,
    _home: Home,
    daemon: Daemon,
    svc: Arc<System>,
    admin: String,
    /// TCP (127.0.0.1, the daemon's port).
    http: reqwest::Client,
    /// The home's socket.
    sock: reqwest::Client,
    /// The executive handlers of agencies `weather` and `other`.
    weather: HandlerId,
    other: HandlerId,
}

/// `agency up` of a one-agent agency `name`; returns its executive handler.
fn stand_up(svc: &System, name: &str, agent: &str) -> HandlerId {
    let model: agency_org::AgencyModel = serde_json::from_value(serde_json::json!({
        "name": name, "type": "Agency", "executiveAgent": agent,
        "agents": [{"name": agent, "title": agent, "source": {"file": "a.agent", "line": 1}}],
        "source": {"file": "a.agency", "line": 1}
    }))
    .unwrap();
    svc.org_apply(Principal::User, &model, false).unwrap();
    svc.org_executive(name).unwrap().unwrap()
}

impl Fx {
    async fn start() -> Fx {
        let (dir, home) = fixture::home();
        let (daemon, svc, root) = fixture::start(&home).await;
        let _ = root;
        let weather = stand_up(&svc, "weather", "desk");
        let other = stand_up(&svc, "other", "otherdesk");
        Fx {
            admin: home.admin_token().unwrap(),
            sock: reqwest::Client::builder()
                .unix_socket(home.admin_socket_path())
                .build()
                .unwrap(),
            http: reqwest::Client::builder().no_proxy().build().unwrap(),
            _dir: dir,
            _home: home,
            daemon,
            svc,
            weather,
            other,
        }
    }

    fn tcp(&self, path: &str) -> String {
        format!("http://{}{path}", self.daemon.addr())
    }

    fn sock(path: &str) -> String {
        format!("http://localhost{path}")
    }

    /// The user mints a key for `agency` over the socket.
    async fn mint(&self, agency: &str) -> (String, String) {
        let r = self
            .sock
            .post(Fx::sock("/v1/agency/keys"))
            .bearer_auth(&self.admin)
            .json(&json!({ "agency": agency }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        let v: Value = r.json().await.unwrap();
        (
            v["key"].as_str().unwrap().to_owned(),
            v["id"].as_str().unwrap().to_owned(),
        )
    }

    /// `POST /v1/agency/messages` over TCP with `token`.
    async fn post(&self, token: &str, body: Value) -> (u16, Value, Option<String>) {
        let r = self
            .http
            .post(self.tcp("/v1/agency/messages"))
            .bearer_auth(token)
            .json(&body)
            .send()
            .await
            .unwrap();
        let location = r
            .headers()
            .get("location")
            .map(|l| l.to_str().unwrap().to_owned());
        (
            r.status().as_u16(),
            r.json().await.unwrap_or(Value::Null),
            location,
        )
    }

    async fn get_tcp(&self, token: Option<&str>, path: &str) -> (u16, Value) {
        let mut rq = self.http.get(self.tcp(path));
        if let Some(t) = token {
            rq = rq.bearer_auth(t);
        }
        let r = rq.send().await.unwrap();
        (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
    }

    /// The id of the newest mail the user sent to `h` (the carrier of a
    /// message from outside), once delivered.
    fn mail_to(&self, h: HandlerId, n: usize) -> String {
        let sent = self.svc.mail_sent(Principal::User, None).unwrap();
        let to_h: Vec<_> = sent
            .iter()
            .filter(|m| m.to == MailTarget::Handler(h))
            .collect();
        assert_eq!(to_h.len(), n, "{sent:?}");
        to_h[0].id.to_string()
    }

    /// The executive `h` answers `mail` as its agent does: MCP `mail_send`
    /// to the user with `in_reply_to`, over TCP with an agent token.
    async fn reply_over_mcp(&self, h: HandlerId, mail: &str, text: &str) -> Value {
        let minted = self.svc.token_mint(Principal::User, h, None).unwrap();
        let r = mcp_call(
            &self.http,
            &self.tcp("/mcp"),
            &minted.token,
            "mail_send",
            json!({"to": "user", "text": text, "in_reply_to": mail}),
        )
        .await;
        self.svc
            .token_revoke(Principal::User, minted.agent)
            .unwrap();
        r
    }
}

/// One MCP tool call over streamable HTTP: initialize, initialized, call;
/// the call's `result`.
async fn mcp_call(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    tool: &str,
    args: Value,
) -> Value {
    let accept = "application/json, text/event-stream";
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}});
    let r = http
        .post(url)
        .bearer_auth(token)
        .header("Accept", accept)
        .json(&init)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // The endpoint is stateless (issue 15): a session id only if given.
    let session = r
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    let _ = r.text().await.unwrap();
    let post = |body: &Value| {
        let mut rq = http
            .post(url)
            .bearer_auth(token)
            .header("Accept", accept)
            .json(body);
        if let Some(s) = &session {
            rq = rq.header("mcp-session-id", s);
        }
        rq.send()
    };
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let r = post(&note).await.unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": tool, "arguments": args}});
    let r = post(&call).await.unwrap();
    let body = r.text().await.unwrap();
    let answer = body
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .chain(serde_json::from_str::<Value>(&body).ok())
        .find(|v| v["id"] == 2)
        .unwrap_or_else(|| panic!("no answer to the call in {body}"));
    answer["result"].clone()
}

fn tool_ok(r: &Value) -> Value {
    assert_ne!(r["isError"], true, "{r}");
    serde_json::from_str(r["content"][0]["text"].as_str().unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_is_answered_by_the_executive_and_read_three_ways() {
    let f = Fx::start().await;
    let (key, _) = f.mint("weather").await;

    // Nobody answers within 300 ms: 202 with where to look.
    let t0 = Instant::now();
    let (s, v, location) = f
        .post(
            &key,
            json!({"agency": "weather", "message": "Rain in Oslo?", "wait_ms": 300}),
        )
        .await;
    assert_eq!(s, 202, "{v}");
    assert!(t0.elapsed() >= Duration::from_millis(300), "it waited");
    assert_eq!(v["status"], "pending");
    let id = v["id"].as_str().unwrap().to_owned();
    let conversation = v["conversation"].as_str().unwrap().to_owned();
    assert_eq!(
        location.as_deref(),
        Some(&*format!("/v1/agency/messages/{id}"))
    );
    let (s, got) = f
        .get_tcp(Some(&key), &format!("/v1/agency/messages/{id}"))
        .await;
    assert_eq!((s, &got["status"]), (200, &json!("pending")), "{got}");

    // The executive answers over MCP; the message is answered.
    let mail = f.mail_to(f.weather, 1);
    let sent = tool_ok(&f.reply_over_mcp(f.weather, &mail, "Dry and 12 °C.").await);
    assert!(sent["message"].is_string(), "{sent}");
    let (s, got) = f
        .get_tcp(Some(&key), &format!("/v1/agency/messages/{id}"))
        .await;
    assert_eq!(s, 200);
    assert_eq!(got["status"], "answered", "{got}");
    assert_eq!(got["reply"], "Dry and 12 °C.");
    assert_eq!(got["conversation"], conversation.as_str());

    // A waiting POST returns the reply as soon as it comes (well before
    // its 20 s), continuing the conversation.
    let t0 = Instant::now();
    let waiting = {
        let (http, url, key) = (f.http.clone(), f.tcp("/v1/agency/messages"), key.clone());
        let body = json!({"agency": "weather", "message": "And tomorrow?",
                          "conversation": conversation, "wait_ms": 20_000});
        tokio::spawn(async move {
            let r = http
                .post(url)
                .bearer_auth(key)
                .json(&body)
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        })
    };
    let mail = fixture::wait_for("the second message's mail", || {
        let sent = f.svc.mail_sent(Principal::User, None).unwrap();
        (sent
            .iter()
            .filter(|m| m.to == MailTarget::Handler(f.weather))
            .count()
            == 2)
            .then(|| sent[0].id.to_string())
    })
    .await;
    // The executive sees the earlier exchange in the new mail.
    let agent = f.svc.agent_start(f.weather).unwrap();
    let inbox = f
        .svc
        .mail_inbox(Principal::agent(f.weather, agent), None)
        .unwrap();
    let m = inbox.iter().find(|m| m.id.to_string() == mail).unwrap();
    let body = m.body.clone().unwrap();
    assert!(
        body.contains("Rain in Oslo?") && body.contains("Dry and 12 °C."),
        "{body}"
    );
    f.svc.agent_end(agent, "test: read the inbox").unwrap();
    tool_ok(&f.reply_over_mcp(f.weather, &mail, "Storms.").await);
    let (s, v) = waiting.await.unwrap();
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["status"], "answered");
    assert_eq!(v["reply"], "Storms.");
    assert_eq!(v["conversation"], conversation.as_str());
    assert!(t0.elapsed() < Duration::from_secs(15), "{:?}", t0.elapsed());

    // The event stream: open while pending, one `reply` event, then the end.
    let (s, v, _) = f
        .post(&key, json!({"agency": "weather", "message": "Wind?"}))
        .await;
    assert_eq!(s, 202, "{v}");
    let id = v["id"].as_str().unwrap().to_owned();
    let stream = {
        let (http, url, key) = (
            f.http.clone(),
            f.tcp(&format!("/v1/agency/messages/{id}/events")),
            key.clone(),
        );
        tokio::spawn(async move {
            let r = http.get(url).bearer_auth(key).send().await.unwrap();
            let ct = r.headers()["content-type"].to_str().unwrap().to_owned();
            (ct, r.text().await.unwrap())
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!stream.is_finished(), "the stream waits for the reply");
    let mail = f.mail_to(f.weather, 3);
    tool_ok(&f.reply_over_mcp(f.weather, &mail, "Calm.").await);
    let (ct, text) = tokio::time::timeout(Duration::from_secs(10), stream)
        .await
        .expect("the stream ends after the reply")
        .unwrap();
    assert!(ct.starts_with("text/event-stream"), "{ct}");
    assert!(text.contains("event: reply"), "{text}");
    assert!(text.contains("\"reply\":\"Calm.\""), "{text}");
    // An answered message's stream is the reply at once.
    let r = f
        .http
        .get(f.tcp(&format!("/v1/agency/messages/{id}/events")))
        .bearer_auth(&key)
        .send();
    let text = tokio::time::timeout(Duration::from_secs(5), async {
        r.await.unwrap().text().await.unwrap()
    })
    .await
    .expect("an answered message's stream ends at once");
    assert!(
        text.contains("event: reply") && text.contains("Calm."),
        "{text}"
    );
    f.daemon.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_opens_its_own_agencys_messages_and_nothing_else() {
    let f = Fx::start().await;
    let (key, key_id) = f.mint("weather").await;
    let msg = |agency: &str| json!({"agency": agency, "message": "hello"});

    // Its own agency: yes. Another agency: 403, nothing delivered there.
    let (s, mine, _) = f.post(&key, msg("weather")).await;
    assert_eq!(s, 202, "{mine}");
    let (s, e, _) = f.post(&key, msg("other")).await;
    assert_eq!(s, 403, "{e}");
    assert!(
        f.svc
            .mail_sent(Principal::User, None)
            .unwrap()
            .iter()
            .all(|m| m.to != MailTarget::Handler(f.other))
    );
    // Another agency's message (sent by the user on the socket): 404, on
    // both the poll and the stream.
    let r = f
        .sock
        .post(Fx::sock("/v1/agency/messages"))
        .bearer_auth(&f.admin)
        .json(&msg("other"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202, "the admin token works on the socket");
    let theirs: Value = r.json().await.unwrap();
    let theirs = theirs["id"].as_str().unwrap();
    for path in [
        format!("/v1/agency/messages/{theirs}"),
        format!("/v1/agency/messages/{theirs}/events"),
    ] {
        let (s, e) = f.get_tcp(Some(&key), &path).await;
        assert_eq!(s, 404, "{path}: {e}");
    }

    // No other route, on either listener: not on TCP at all, 401 on the
    // socket (admin token only); not the MCP endpoint either.
    for path in [
        "/v1/handlers",
        "/v1/status",
        "/v1/inbox",
        "/v1/kb",
        "/v1/agency/keys",
    ] {
        let (s, _) = f.get_tcp(Some(&key), path).await;
        assert_eq!(s, 404, "TCP {path}");
        let r = f
            .sock
            .get(Fx::sock(path))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401, "socket {path}");
    }
    let r = f
        .http
        .post(f.tcp("/mcp"))
        .bearer_auth(&key)
        .header("Accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401, "a key is not an agent token");
    // The rest of /v1 stays off TCP, even with the admin token.
    let (s, _) = f.get_tcp(Some(&f.admin), "/v1/handlers").await;
    assert_eq!(s, 404);

    // The admin token is refused on TCP; no token or a made-up one: 401.
    let mine_id = mine["id"].as_str().unwrap();
    let path = format!("/v1/agency/messages/{mine_id}");
    for bad in [
        Some(f.admin.as_str()),
        None,
        Some("agk_0000"),
        Some("agency_nope"),
    ] {
        let (s, e) = f.get_tcp(bad, &path).await;
        assert_eq!(s, 401, "{bad:?}: {e}");
    }
    let (s, e, _) = f.post(&f.admin, msg("weather")).await;
    assert_eq!(s, 401, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("daemon.sock"),
        "{e}"
    );

    // Bad requests: 400 with a "failed to …" message; unknown agency 404.
    let bad = [
        (json!({"agency": "weather", "message": ""}), 400),
        (
            json!({"agency": "weather", "message": "x".repeat(64 * 1024 + 1)}),
            400,
        ),
        (
            json!({"agency": "weather", "message": "x", "wait_ms": 120_001}),
            400,
        ),
        (
            json!({"agency": "weather", "message": "x", "conversation": "nope"}),
            400,
        ),
        (
            json!({"agency": "weather", "message": "x", "extra": 1}),
            400,
        ),
        (json!({"agency": "weather"}), 400),
        (
            json!({"agency": "weather", "message": "x", "conversation": uuid::Uuid::new_v4()}),
            404,
        ),
    ];
    for (body, want) in bad {
        let (s, e, _) = f.post(&key, body.clone()).await;
        assert_eq!(s, want, "{body}: {e}");
        assert!(
            e["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("failed to"),
            "{e}"
        );
    }
    let r = f
        .http
        .post(f.tcp("/v1/agency/messages"))
        .bearer_auth(&key)
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let e: Value = r.json().await.unwrap();
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("failed to parse"),
        "{e}"
    );
    // A key for an agency that does not exist cannot be minted; a user
    // post to one is 404.
    let r = f
        .sock
        .post(Fx::sock("/v1/agency/messages"))
        .bearer_auth(&f.admin)
        .json(&msg("nowhere"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);

    // Revoked: 401 at once.
    let r = f
        .sock
        .delete(Fx::sock(&format!("/v1/agency/keys/{key_id}")))
        .bearer_auth(&f.admin)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let (s, _) = f.get_tcp(Some(&key), &path).await;
    assert_eq!(s, 401);
    let (s, _, _) = f.post(&key, msg("weather")).await;
    assert_eq!(s, 401);
    f.daemon.stop().await.unwrap();
}
