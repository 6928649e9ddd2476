//! Agents run: the real daemon (`agency serve`) with the `builtin` runtime
//! spawns `agency agent` for the root handler when the user writes to it;
//! the agent talks to the scripted model server over the Anthropic API and
//! to the daemon over MCP, and its answer reaches the user's inbox.

#![allow(clippy::unwrap_used)]

use crate::agent_story;

use std::time::Duration;

use agent_story::{BIN, SCRIPT, Story, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_root_handlers_builtin_agent_answers_the_user() {
    let script = agency_testkit::Script::from_json(SCRIPT).unwrap();
    let model = agency_testkit::ModelServer::start(script).await.unwrap();
    let cfg = format!(
        "[agents]\nruntime = \"builtin\"\nagency_program = {BIN:?}\n[agents.builtin]\napi = \"anthropic\"\nbase_url = {:?}\nmodel = \"scripted\"\nmax_turns = 20\n",
        model.base_url()
    );
    let story = Story::start(&cfg, Duration::from_secs(60)).await;
    let (reply, agent) = story.ask_and_wait().await;
    assert_eq!(agent["end_reason"], "completed");
    // The agent's stderr is kept with its run (issue 9 item 16).
    let log = json(&story.home, &["logs", agent["id"].as_str().unwrap()]);
    assert!(
        log["text"].as_str().unwrap().contains("agent ended: "),
        "{log}"
    );
    let requests = model.requests();
    assert_eq!(requests.len(), 6, "{requests:?}");
    assert!(requests.iter().all(|r| r.status == 200));
    story.assert_common_outcome(&reply, &agent).await;
    story.stop();
    model.shutdown().await;
}
