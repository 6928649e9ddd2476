//! Issue 11 item 1, "the model per handler may differ", from the command
//! line against a real `agency serve` with the built-in runtime: `agency
//! model set <handler> <NAME>` gives the root handler the upstream `cheap`
//! (which names its own model) instead of the runtime's `main`; its agent
//! is started on it, so every call of the run goes through `/model/cheap`
//! (the gateway refuses any other upstream to this handler's agents) with
//! the cheap model. `show` (text and `--json`), `clear`, and a refused
//! undeclared name are checked too.

#![allow(clippy::unwrap_used)]

use crate::agent_story;

use std::time::Duration;

use agent_story::{BIN, SCRIPT, Story, agency, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_user_gives_a_handler_its_own_model_and_its_agent_runs_on_it() {
    let script = agency_testkit::Script::from_json(SCRIPT).unwrap();
    let model = agency_testkit::ModelServer::start(script).await.unwrap();
    let url = model.base_url();
    let cfg = format!(
        "[agents]\nruntime = \"builtin\"\nagency_program = {BIN:?}\n[agents.builtin]\nupstream = \"main\"\nmodel = \"scripted\"\nmax_turns = 20\n\
         [models.main]\napi = \"anthropic\"\nbase_url = {url:?}\n\
         [models.cheap]\napi = \"anthropic\"\nbase_url = {url:?}\nmodel = \"scripted-cheap\"\n"
    );
    let story = Story::start(&cfg, Duration::from_secs(60)).await;
    let root = agency_config::Home::new(&story.home)
        .open_service()
        .unwrap()
        .root_handler()
        .unwrap()
        .unwrap()
        .to_string();
    let r8 = &root[..8];
    let run = |args: &[&str]| {
        let (code, out, err) = agency(&story.home, args);
        assert_eq!(code, 0, "agency {args:?}: {out}{err}");
        out
    };

    let out = run(&["model", "show", r8]);
    assert!(
        out.contains("the runtime's model upstream (none set)"),
        "{out}"
    );
    let (code, _, err) = agency(&story.home, &["model", "set", r8, "nope"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("no [models.nope]") && err.contains("cheap, main"),
        "{err}"
    );
    let out = run(&["model", "set", r8, "cheap"]);
    assert!(
        out.contains(&format!("handler {root}: model upstream cheap (set on it)")),
        "{out}"
    );
    let shown = json(&story.home, &["model", "show", r8]);
    assert_eq!(shown["effective"], "cheap", "{shown}");
    assert_eq!(shown["set_on"], root.as_str(), "{shown}");

    // The run: every call reached the model server as the cheap model,
    // through `/model/cheap` (any other upstream is refused to this
    // handler's agents, and the run completed).
    let (reply, agent) = story.ask_and_wait().await;
    assert_eq!(agent["end_reason"], "completed", "{agent}\n{}", story.log());
    story.assert_common_outcome(&reply, &agent).await;
    let requests = model.requests();
    assert_eq!(requests.len(), 6, "{requests:?}");
    for r in &requests {
        assert_eq!(
            (r.model.as_str(), r.status),
            ("scripted-cheap", 200),
            "{r:?}"
        );
    }
    let cost = json(&story.home, &["cost"]);
    assert_eq!(cost["subtree"]["calls"], 6, "{cost}");

    let out = run(&["model", "clear", r8]);
    assert!(
        out.contains("the runtime's model upstream (none set)"),
        "{out}"
    );
    // The change is in the handler's audit log.
    let audit = json(&story.home, &["audit", r8]);
    let summaries: Vec<&str> = audit
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["summary"].as_str())
        .collect();
    assert!(
        summaries.contains(&"model upstream set to cheap by the user"),
        "{summaries:?}"
    );
    story.stop();
    model.shutdown().await;
}
