//! Issue 27 item B: outside callers of `POST /v1/agency/messages` are
//! bounded per agency API key, against a real daemon on port 0: a rate
//! (token bucket: `[agency_api] messages_per_minute`, `burst`) and a cap
//! on messages not yet answered (`max_pending_per_key`, counted in the
//! store's transaction, so parallel requests cannot pass it together).
//! Each refusal is 429 with `Retry-After` and a JSON error naming the
//! limit and its value. The user (admin token, socket) is not bound; 0 or
//! absurd values are refused when the daemon starts.

#![allow(clippy::unwrap_used)]

use crate::fixture;

use std::sync::Arc;

use agency_core::Principal;
use agency_daemon::{Daemon, Home};
use agency_service::System;
use serde_json::{Value, json};

struct Fx {
    _dir: tempfile::TempDir,
    home: Home,
    daemon: Daemon,
    svc: Arc<System>,
    http: reqwest::Client,
}

/// The answer to one `POST`: status, `Retry-After`, body.
struct Posted {
    status: u16,
    retry_after: Option<String>,
    body: Value,
}

impl Fx {
    /// A daemon whose `[agency_api]` is `agency_api`, with a one-agent
    /// agency `weather` stood up.
    async fn start(agency_api: &str) -> Fx {
        let (dir, home) = fixture::home_with_config(&format!("[agency_api]\n{agency_api}"));
        let (daemon, svc, _) = fixture::start(&home).await;
        let model: agency_org::AgencyModel = serde_json::from_value(json!({
            "name": "weather", "type": "Agency", "executiveAgent": "desk",
            "agents": [{"name": "desk", "title": "desk", "source": {"file": "a.agent", "line": 1}}],
            "source": {"file": "a.agency", "line": 1}
        }))
        .unwrap();
        svc.org_apply(Principal::User, &model, false).unwrap();
        Fx {
            _dir: dir,
            home,
            daemon,
            svc,
            http: reqwest::Client::builder().no_proxy().build().unwrap(),
        }
    }

    fn mint(&self) -> String {
        self.svc
            .org_key_mint(Principal::User, "weather")
            .unwrap()
            .key
    }

    /// `POST /v1/agency/messages` to `weather` over TCP with `key`.
    async fn post(&self, key: &str, text: &str) -> Posted {
        let r = self
            .http
            .post(format!("http://{}/v1/agency/messages", self.daemon.addr()))
            .bearer_auth(key)
            .json(&json!({ "agency": "weather", "message": text }))
            .send()
            .await
            .unwrap();
        Posted {
            status: r.status().as_u16(),
            retry_after: r
                .headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap().to_owned()),
            body: r.json().await.unwrap_or(Value::Null),
        }
    }

    /// The same as the user, with the admin token on the home's socket.
    async fn post_as_user(&self, text: &str) -> u16 {
        let sock = reqwest::Client::builder()
            .unix_socket(self.home.admin_socket_path())
            .build()
            .unwrap();
        sock.post("http://localhost/v1/agency/messages")
            .bearer_auth(self.home.admin_token().unwrap())
            .json(&json!({ "agency": "weather", "message": text }))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }
}

/// A 429 naming `limit` = `value`, with a `Retry-After` of whole seconds
/// that the body repeats.
#[track_caller]
fn assert_limited(p: &Posted, limit: &str, value: u64) {
    assert_eq!(p.status, 429, "{}", p.body);
    let e = &p.body["error"];
    assert_eq!(e["kind"], "rate_limited", "{e}");
    assert_eq!(e["limit"], limit, "{e}");
    assert_eq!(e["value"], value, "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(message.starts_with("failed to send a message"), "{message}");
    assert!(message.contains(&format!("{limit} = {value}")), "{message}");
    let secs: u64 = p.retry_after.as_deref().unwrap().parse().unwrap();
    assert!(secs >= 1, "Retry-After {secs}");
    assert_eq!(e["retry_after_secs"], secs, "{e}");
    assert!(
        message.contains(&format!("retry after {secs} s")),
        "{message}"
    );
}

/// N requests of one key at once: exactly `cap` are accepted, whatever
/// their interleaving, because the count is taken in the write
/// transaction that adds the message; every other one is 429 naming the
/// cap. Another key of the same agency has a cap of its own, and the user
/// has none.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn issue27_parallel_messages_of_one_key_stop_at_exactly_the_pending_cap() {
    const CAP: u64 = 5;
    const N: usize = 40;
    let f = Arc::new(
        Fx::start(&format!(
            "max_pending_per_key = {CAP}\nmessages_per_minute = 6000\nburst = 1000\n"
        ))
        .await,
    );
    let key = f.mint();
    let posts = (0..N).map(|i| {
        let (f, key) = (f.clone(), key.clone());
        tokio::spawn(async move { f.post(&key, &format!("question {i}")).await })
    });
    let answers: Vec<Posted> = futures_util::future::join_all(posts)
        .await
        .into_iter()
        .map(Result::unwrap)
        .collect();
    let accepted = answers.iter().filter(|p| p.status == 202).count();
    assert_eq!(
        accepted,
        usize::try_from(CAP).unwrap(),
        "statuses: {:?}",
        answers.iter().map(|p| p.status).collect::<Vec<_>>()
    );
    for p in answers.iter().filter(|p| p.status != 202) {
        assert_limited(p, "agency_api.max_pending_per_key", CAP);
    }
    // The cap holds after the burst too.
    assert_limited(
        &f.post(&key, "one more").await,
        "agency_api.max_pending_per_key",
        CAP,
    );
    // Per key: a second key of the same agency starts at none pending.
    let other = f.mint();
    assert_eq!(f.post(&other, "from another caller").await.status, 202);
    // The user is not an outside caller.
    assert_eq!(f.post_as_user("from the user").await, 202);
}

/// A key that posts faster than its bucket refills is refused with the
/// rate, its value and when a message would be taken; other keys and the
/// user are not slowed by it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue27_a_key_past_its_rate_is_refused_with_retry_after() {
    let f = Fx::start("messages_per_minute = 1\nburst = 3\nmax_pending_per_key = 100\n").await;
    let key = f.mint();
    for i in 0..3 {
        let p = f.post(&key, &format!("question {i}")).await;
        assert_eq!(p.status, 202, "{}", p.body);
    }
    let p = f.post(&key, "one too many").await;
    assert_limited(&p, "agency_api.messages_per_minute", 1);
    let secs: u64 = p.retry_after.unwrap().parse().unwrap();
    assert!((1..=60).contains(&secs), "one message a minute: {secs} s");
    let other = f.mint();
    assert_eq!(f.post(&other, "another caller").await.status, 202);
    assert_eq!(f.post_as_user("the user").await, 202);
}

/// `[agency_api]` values that would refuse everything (0) or bound
/// nothing (absurdly large) stop the daemon's start, naming the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue27_agency_api_limits_of_0_or_absurd_are_refused_at_load() {
    for (toml, want) in [
        (
            "max_pending_per_key = 0\n",
            "agency_api.max_pending_per_key = 0 would refuse every message",
        ),
        ("burst = 0\n", "agency_api.burst = 0"),
        (
            "messages_per_minute = 1000000\n",
            "agency_api.messages_per_minute = 1000000 is out of range",
        ),
        (
            "max_pending_per_key = 99999999\n",
            "agency_api.max_pending_per_key = 99999999 is out of range",
        ),
    ] {
        let (_dir, home) = fixture::home_with_config(&format!("[agency_api]\n{toml}"));
        let e = Daemon::start(&home).await.unwrap_err().to_string();
        assert!(e.contains(want), "{toml}: {e}");
        assert!(e.contains("agency.toml"), "names the file: {e}");
    }
}
