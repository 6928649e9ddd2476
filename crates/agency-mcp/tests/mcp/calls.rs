//! Typed calls over MCP (issue 31 item 1): `agent_call` refuses an input
//! that breaks the verb's schema with machine-readable issues and sends
//! nothing; the callee reads the request from its inbox and answers with
//! `agent_reply`, a bad output refused and a corrected one accepted; the
//! caller waiting in `agent_call {wait}` gets the answer, and `mail_wait
//! {conversation}` finds the reply; a call outside the caller's
//! connections is refused like mail.

use std::sync::Arc;

use agency_core::{HandlerId, Principal};
use agency_mcp::AgentIdentity;
use serde_json::{Value, json};

use crate::support::{Agency, Client, call, connect, err, ok, serve};

fn agent(name: &str, connections: &[&str], verbs: Value) -> Value {
    json!({"name": name, "title": name, "connections": connections, "verbs": verbs,
           "source": {"file": format!("{name}.agent"), "line": 1}})
}

/// An organisation: main may call worker's `summarise`; loner has no
/// connection.
fn apply(a: &Agency) -> Vec<(String, HandlerId)> {
    let summarise = json!({"name": "summarise",
        "input": {"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}},
        "output": {"type": "object", "required": ["summary"], "properties": {"summary": {"type": "string"}}}});
    let model: agency_org::AgencyModel = serde_json::from_value(json!({
        "name": "Calls", "type": "Agency", "executiveAgent": "front",
        "agents": [agent("front", &[], json!([])), agent("main", &["worker"], json!([])),
                   agent("worker", &[], json!([summarise])), agent("loner", &[], json!([]))],
        "source": {"file": "agents.json", "line": 1}
    }))
    .unwrap();
    let plan = a.svc.org_apply(Principal::User, &model, false).unwrap();
    plan.agents
        .iter()
        .map(|p| (p.agent.clone(), p.handler.unwrap()))
        .collect()
}

async fn client_of(
    a: &Agency,
    handlers: &[(String, HandlerId)],
    name: &str,
) -> (Arc<Client>, crate::support::Server) {
    let handler = handlers.iter().find(|(n, _)| n == name).unwrap().1;
    let agent = a.sys.agent_start(handler).unwrap();
    let server = serve(
        a.svc.clone(),
        Some(AgentIdentity {
            handler,
            agent,
            workspace: None,
        }),
    )
    .await;
    let c = Arc::new(connect(&server.url).await.unwrap());
    (c, server)
}

/// The JSON envelope in a call's mail body.
fn envelope(body: &str) -> Value {
    let start = body.find("```json\n").unwrap() + 8;
    let end = body[start..].find("\n```").unwrap() + start;
    serde_json::from_str(&body[start..end]).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_call_checks_input_waits_for_a_checked_reply() {
    let a = Agency::new();
    let hs = apply(&a);
    let (main, _s1) = client_of(&a, &hs, "main").await;
    let (worker, _s2) = client_of(&a, &hs, "worker").await;

    // Input breaking the schema: refused with its issues; nothing sent.
    let r = call(
        &main,
        "agent_call",
        json!({"target": "worker", "verb": "summarise", "input": {"text": 5}}),
    )
    .await;
    let t = err(&r, "[schema_violation]");
    assert!(
        t.contains(r#""instancePath":"/text""#) && t.contains(r#""keyword":"type""#),
        "{t}"
    );
    let inbox = ok(&call(&worker, "mail_inbox", json!({})).await);
    assert_eq!(inbox["messages"], json!([]), "{inbox}");

    // A valid call, waiting for the answer.
    let waiter = {
        let main = main.clone();
        tokio::spawn(async move {
            call(
                &main,
                "agent_call",
                json!({"target": "worker", "verb": "summarise",
                "input": {"text": "a long story"}, "wait": 120000}),
            )
            .await
        })
    };
    let r = ok(&call(&worker, "mail_wait", json!({"timeout_ms": 60000})).await);
    assert_eq!(r["status"], "mail", "{r}");
    let inbox = ok(&call(&worker, "mail_inbox", json!({})).await);
    let env = envelope(inbox["messages"][0]["body"].as_str().unwrap());
    assert_eq!(env["agency_call"]["type"], "request");
    assert_eq!(env["input"], json!({"text": "a long story"}));
    let id = env["agency_call"]["request_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let conversation = env["agency_call"]["conversation_id"]
        .as_str()
        .unwrap()
        .to_owned();

    // A bad answer is refused to the callee; a corrected one goes through.
    let r = call(
        &worker,
        "agent_reply",
        json!({"request_id": id, "output": {"sumary": "x"}}),
    )
    .await;
    let t = err(&r, "[schema_violation]");
    assert!(t.contains(r#""keyword":"required""#), "{t}");
    let r = call(
        &worker,
        "agent_reply",
        json!({"request_id": id, "output": {"summary": "x"}, "error": "y"}),
    )
    .await;
    err(&r, "[invalid_input]");
    let replied = ok(&call(
        &worker,
        "agent_reply",
        json!({"request_id": id, "output": {"summary": "short"}}),
    )
    .await);
    assert_eq!(replied["type"], "response");
    let r = call(
        &worker,
        "agent_reply",
        json!({"request_id": id, "output": {"summary": "again"}}),
    )
    .await;
    err(&r, "already answered");

    // The waiting caller gets the answer.
    let r = ok(&waiter.await.unwrap());
    assert_eq!(r["status"], "answered", "{r}");
    assert_eq!(r["sent"]["request_id"], id.as_str());
    assert_eq!(r["call"]["output"], json!({"summary": "short"}));
    // And the reply is mail in the conversation.
    let r = ok(&call(
        &main,
        "mail_wait",
        json!({"conversation": conversation, "timeout_ms": 50}),
    )
    .await);
    assert_eq!(r["status"], "mail", "{r}");
    assert_eq!(r["messages"][0]["id"], replied["message"]);
    let r = ok(&call(
        &main,
        "mail_wait",
        json!({"conversation": conversation, "timeout_ms": 50, "ignore": [replied["message"]]}),
    )
    .await);
    assert_eq!(r["status"], "timeout");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_call_outside_connections_is_refused_and_wait_times_out() {
    let a = Agency::new();
    let hs = apply(&a);
    let (loner, _s) = client_of(&a, &hs, "loner").await;
    let r = call(
        &loner,
        "agent_call",
        json!({"target": "worker", "verb": "summarise", "input": {"text": "x"}}),
    )
    .await;
    let refused = err(&r, "[permission_denied]");
    let r = call(
        &loner,
        "mail_send",
        json!({"to": hs.iter().find(|(n, _)| n == "worker").unwrap().1.to_string(), "text": "hi"}),
    )
    .await;
    assert_eq!(
        err(&r, "[permission_denied]"),
        refused,
        "the same refusal as mail"
    );

    let (main, _s2) = client_of(&a, &hs, "main").await;
    let r = ok(&call(
        &main,
        "agent_call",
        json!({"target": "worker", "verb": "summarise",
        "input": {"text": "x"}, "wait": 100}),
    )
    .await);
    assert_eq!(r["status"], "timeout", "{r}");
    assert_eq!(r["sent"]["hops"], 1);
    let r = call(
        &main,
        "agent_call",
        json!({"target": "worker", "verb": "summarise",
        "input": {"text": "x"}, "wait": 999999}),
    )
    .await;
    err(&r, "[invalid_input]");
}
