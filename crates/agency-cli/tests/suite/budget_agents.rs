//! Issue 11 item 7 with the real daemon and the built-in runtime: a
//! scripted root agent that tries to delegate 500 outcomes under a budget
//! of 10 handlers ends with exactly 10 underlings, each refusal a tool
//! error it reads; and the budget shows it.

#![allow(clippy::unwrap_used)]

use crate::agent_story;

use std::time::{Duration, Instant};

use agent_story::{BIN, Story, agency, json};
use serde_json::json as j;

const TRIES: usize = 500;
const CAP: i64 = 10;

/// One turn creating 500 outcomes under the root's own, one turn
/// delegating each (the k-th most recent result is the (501-k)-th
/// outcome), then a final answer. Underlings answer "ok" and end.
fn script() -> String {
    let creates: Vec<_> = (1..=TRIES)
        .map(|i| {
            j!({"name": "outcome_create", "input": {
                "title": format!("task {i}"),
                "parents": ["{{system:Your root Outcome is ([0-9a-f-]{36})}}"]}})
        })
        .collect();
    let delegates: Vec<_> = (1..=TRIES)
        .map(|i| {
            j!({"name": "delegate", "input": {
                "outcome": format!("{{{{result[{}]:/outcome}}}}", TRIES + 1 - i)}})
        })
        .collect();
    j!({
        "scenarios": [{
            "name": "root",
            "match": {"system_contains": "Help the user accomplish all their work"},
            "turns": [
                {"tool_calls": creates},
                {"tool_calls": delegates},
                {"text": "Delegated what I could."}
            ],
            "after_last": {"text": "Nothing more."}
        }],
        "fallback": {"text": "ok"}
    })
    .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripted_model_delegating_500_outcomes_under_a_cap_of_10_gets_exactly_10() {
    let script = agency_testkit::Script::from_json(&script()).unwrap();
    let model = agency_testkit::ModelServer::start(script).await.unwrap();
    let cfg = format!(
        "[agents]\nruntime = \"builtin\"\nagency_program = {BIN:?}\n[agents.builtin]\napi = \"anthropic\"\nbase_url = {:?}\nmodel = \"scripted\"\nmax_turns = 20\n",
        model.base_url()
    );
    let story = Story::start(&cfg, Duration::from_secs(300)).await;
    let root = json(&story.home, &["budget", "show"])["handler"]
        .as_str()
        .unwrap()
        .to_owned();
    let (code, _, err) = agency(
        &story.home,
        &["budget", "set", &root, "--handlers", &CAP.to_string()],
    );
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = agency(&story.home, &["send", "Delegate everything"]);
    assert_eq!(code, 0, "{err}");
    let deadline = Instant::now() + Duration::from_secs(240);
    let first = loop {
        let agents = json(&story.home, &["agents"]);
        let found = agents["recent"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["handler"] == root.as_str())
            .map(|a| a["id"].as_str().unwrap().to_owned());
        if let Some(id) = found {
            break id;
        }
        assert!(Instant::now() < deadline, "no root agent started: {agents}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // The root's agent plays its three turns; wait for its final answer.
    let last_turn = |r: &agency_testkit::RecordedRequest| {
        r.scenario.as_deref() == Some("root") && r.script_turn == Some(2)
    };
    let summary = || {
        model
            .requests()
            .iter()
            .map(|r| {
                format!(
                    "{:?} turn {} script_turn {:?} status {} calls {} error {:?}\n",
                    r.scenario,
                    r.turn,
                    r.script_turn,
                    r.status,
                    r.tool_calls.len(),
                    r.error
                )
            })
            .collect::<String>()
    };
    while !model.requests().iter().any(last_turn) {
        assert!(
            Instant::now() < deadline,
            "the root agent did not finish:\n{}\n{}",
            summary(),
            story.log()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The first root agent (recorded as soon as it starts: later ones,
    // started again because the root keeps open outcomes, try again and
    // are refused again) has played its last turn.
    let t = loop {
        let (code, t, _) = agency(&story.home, &["--json", "transcript", &first]);
        if code == 0 && t.contains("Delegated what I could.") {
            break t;
        }
        assert!(
            Instant::now() < deadline,
            "the first root agent did not finish"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let shown = json(&story.home, &["budget", "show"]);
    assert_eq!(shown["spent"]["handlers"], CAP, "{shown}");
    assert_eq!(shown["children"].as_array().unwrap().len(), CAP as usize);
    assert_eq!(shown["paused"], serde_json::Value::Null, "{shown}");
    // The refusals reached the agent as tool errors naming the limit.
    assert_eq!(
        t.matches("handlers limit 10").count(),
        TRIES - CAP as usize,
        "{}",
        &t[..t.len().min(3000)]
    );
    story.stop();
    model.shutdown().await;
}
