//! Issue 28: the built-in runtime treats the model gateway's budget
//! refusal as the end of its turn, with the real daemon and the scripted
//! model: a root under a budget of one model call plays its first turn;
//! the gateway refuses the second; the run is not retried like a rate
//! limit and does not end "abnormal: error", it records why in the audit
//! log and ends `budget: …`; and the paused root shows in `agency
//! handlers`.

#![allow(clippy::unwrap_used)]

use crate::agent_story;

use std::time::{Duration, Instant};

use agent_story::{BIN, Story, agency, json, transcript};
use serde_json::json as j;

fn script() -> String {
    j!({
        "scenarios": [{
            "name": "root",
            "match": {"system_contains": "Help the user accomplish all their work"},
            "turns": [
                {"tool_calls": [{"name": "mail_inbox", "input": {}}]},
                {"text": "Read it."}
            ],
            "after_last": {"text": "Nothing more."}
        }],
        "fallback": {"text": "ok"}
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue28_a_budget_refusal_ends_the_builtin_run_without_retries() {
    let script = agency_testkit::Script::from_json(&script()).unwrap();
    let model = agency_testkit::ModelServer::start(script).await.unwrap();
    let cfg = format!(
        "[agents]\nruntime = \"builtin\"\nagency_program = {BIN:?}\n[agents.builtin]\napi = \"anthropic\"\nbase_url = {:?}\nmodel = \"scripted\"\nmax_turns = 20\n",
        model.base_url()
    );
    let story = Story::start(&cfg, Duration::from_secs(180)).await;
    let root = json(&story.home, &["budget", "show"])["handler"]
        .as_str()
        .unwrap()
        .to_owned();
    // One model call, and nothing else limited.
    let (code, _, err) = agency(&story.home, &["budget", "set", &root, "--calls", "1"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = agency(&story.home, &["send", "Read your inbox"]);
    assert_eq!(code, 0, "{err}");
    let deadline = Instant::now() + Duration::from_secs(150);
    let agent = story.wait_for_the_agent(deadline).await;
    let id = agent["id"].as_str().unwrap();
    let reason = agent["end_reason"].as_str().unwrap_or_default();
    assert!(
        reason.starts_with("budget: ") && reason.contains("model calls limit 1"),
        "{agent}\n{}",
        transcript(&story.home, id)
    );
    // Refused once, not retried: no retry in the transcript, and the
    // model saw only the call the budget allowed.
    let t = transcript(&story.home, id);
    assert!(!t.contains("\"retry\""), "{t}");
    assert!(t.contains("\"budget\""), "{t}");
    assert_eq!(model.requests().len(), 1, "{:?}", model.requests());
    // Not abnormal: the run ended as told, and said why in the audit log.
    let run = json(&story.home, &["run", id]);
    assert!(
        run.to_string().contains("budget: "),
        "the next agent is told how this one ended: {run}"
    );
    let audit = json(&story.home, &["audit", &root[..8]]);
    let entry = audit
        .as_array()
        .unwrap()
        .iter()
        .find(|e| {
            e["summary"]
                .as_str()
                .unwrap_or_default()
                .starts_with("(written by the runtime) Stopped: the model gateway refused")
        })
        .unwrap_or_else(|| panic!("{audit}"));
    assert!(
        entry["summary"]
            .as_str()
            .unwrap()
            .contains("model calls limit 1"),
        "{entry}"
    );
    assert!(!audit.to_string().contains("ended abnormally"), "{audit}");
    // The root is paused, and seen so.
    let (code, handlers, _) = agency(&story.home, &["handlers"]);
    assert_eq!(code, 0);
    assert!(
        handlers
            .lines()
            .any(|l| l.contains(&root) && l.contains("paused (budget)")),
        "{handlers}"
    );
    story.stop();
    model.shutdown().await;
}
