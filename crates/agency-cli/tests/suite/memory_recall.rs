//! Issue 13 items 2 and 3 end to end: a real daemon with the built-in
//! runtime against the scripted model server, which also serves the
//! embeddings of `[memory.embeddings]`. The root's first agent stores a
//! memory (`memory_store`, embedded through the endpoint); the next agent,
//! started for a question about it, gets it in its first message — the
//! scripted scenario that answers matches only if the first user message
//! holds the memory's text, so the reply reaching the user proves recall.

#![allow(clippy::unwrap_used)]

use crate::agent_story;

use std::time::{Duration, Instant};

use agent_story::{BIN, Story, agency, json};

const SCRIPT: &str = r#"{
  "scenarios": [
    {
      "name": "recalls",
      "match": { "user_contains": "> The compost shed password is heron-42" },
      "turns": [
        { "tool_calls": [ { "name": "mail_inbox", "input": {} } ] },
        { "tool_calls": [ { "name": "mail_ack", "input": { "messages": ["{{result:/messages/0/id}}"] } } ] },
        { "tool_calls": [ { "name": "mail_send", "input": { "to": "boss", "subject": "Recalled", "text": "{{user:password is ([a-z0-9-]+)}}" } } ] },
        { "text": "Answered from memory." }
      ]
    },
    {
      "name": "stores",
      "match": { "user_contains": "Please remember" },
      "turns": [
        { "tool_calls": [ { "name": "mail_inbox", "input": {} } ] },
        { "tool_calls": [ { "name": "mail_ack", "input": { "messages": ["{{result:/messages/0/id}}"] } } ] },
        { "tool_calls": [ { "name": "memory_store", "input": { "text": "The compost shed password is heron-42", "kind": "fact", "tags": ["garden"] } } ] },
        { "text": "Stored." }
      ]
    }
  ],
  "fallback": { "text": "Nothing scripted; stopping." }
}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue13_the_next_agent_recalls_what_the_last_one_stored() {
    let script = agency_testkit::Script::from_json(SCRIPT).unwrap();
    let model = agency_testkit::ModelServer::start(script).await.unwrap();
    let cfg = format!(
        "[agents]\nruntime = \"builtin\"\nagency_program = {BIN:?}\n[agents.builtin]\napi = \"anthropic\"\nbase_url = {url:?}\nmodel = \"scripted\"\nmax_turns = 20\n\
         [memory.embeddings]\nbase_url = {url:?}\nmodel = \"hashed\"\ndims = 64\n",
        url = model.base_url()
    );
    let story = Story::start(&cfg, Duration::from_secs(90)).await;
    let deadline = Instant::now() + Duration::from_secs(90);
    let root = json(&story.home, &["status"])["root_handler"]
        .as_str()
        .unwrap()
        .to_owned();

    let (code, _, err) = agency(
        &story.home,
        &["send", "Please remember the shed password: heron-42"],
    );
    assert_eq!(code, 0, "{err}");
    let status = loop {
        let st = json(&story.home, &["memory", "status", &root[..8]]);
        if st["counts"]["live"] == 1 {
            break st;
        }
        assert!(
            Instant::now() < deadline,
            "no memory stored: {st}\n{}",
            story.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Stored through the scripted embeddings endpoint.
    assert_eq!(status["embeddings_model"], "hashed");
    assert_eq!(status["embedded_live"], 1);
    story.wait_for_the_agent(deadline).await;

    let (code, _, err) = agency(
        &story.home,
        &["send", "What was the password of the compost shed?"],
    );
    assert_eq!(code, 0, "{err}");
    let reply = loop {
        let inbox = json(&story.home, &["inbox"]);
        if let Some(m) = inbox
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["subject"] == "Recalled")
        {
            break m.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no reply: {inbox}\n{}",
            story.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(reply["body"], "heron-42");
    // "recalls" matches only a first user message quoting the memory
    // (`> TEXT`, the way recall renders it); the first run never did.
    let scenarios: Vec<Option<String>> = model
        .requests()
        .iter()
        .map(|r| r.scenario.clone())
        .collect();
    assert!(
        scenarios.iter().any(|s| s.as_deref() == Some("recalls")),
        "{scenarios:?}"
    );
    assert!(
        scenarios.iter().any(|s| s.as_deref() == Some("stores")),
        "{scenarios:?}"
    );
    story.wait_for_the_agent(deadline).await;
    story.stop();
    model.shutdown().await;
}
