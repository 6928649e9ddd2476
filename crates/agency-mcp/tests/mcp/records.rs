//! The record tools over real MCP (issue 9 item 12): a sent message's
//! receipt, a file's access log and the caller's live outcomes, `kb://`
//! links accepted as UUIDs, and the runs of an underling visible to its
//! boss while a sibling learns nothing.

use agency_core::Principal;
use agency_mcp::AgentIdentity;
use serde_json::json;

use crate::support::{Agency, call, connect, err, ok, serve};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue9_item12_receipts_access_logs_outcomes_and_kb_links() {
    let a = Agency::new();
    let server = serve(a.svc.clone(), Some(a.identity())).await;
    let c = connect(&server.url).await.unwrap();

    let file = ok(&call(
        &c,
        "kb_create",
        json!({"description": "notes", "content": "hi"}),
    )
    .await);
    let id = file["file"].as_str().unwrap().to_owned();
    // kb://UUID wherever a UUID is taken.
    let read = ok(&call(&c, "kb_read", json!({ "file": format!("kb://{id}") })).await);
    assert_eq!(read["content"], "hi");
    let log = ok(&call(&c, "kb_audit", json!({ "file": format!("kb://{id}") })).await);
    let actions: Vec<&str> = log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert!(
        actions.contains(&"create") && actions.contains(&"read"),
        "{log}"
    );

    let sent = ok(&call(&c, "mail_send", json!({"to": "user", "text": "done"})).await);
    let receipt = ok(&call(&c, "mail_status", json!({ "message": sent["message"] })).await);
    assert!(receipt["delivered_at"].is_number(), "{receipt}");
    assert!(receipt["acked_at"].is_null(), "{receipt}");
    a.svc
        .mail_ack(
            Principal::User,
            &[sent["message"].as_str().unwrap().parse().unwrap()],
        )
        .unwrap();
    let receipt = ok(&call(&c, "mail_status", json!({ "message": sent["message"] })).await);
    assert!(receipt["acked_at"].is_number(), "{receipt}");

    let o = ok(&call(
        &c,
        "outcome_create",
        json!({"title": "Live one", "parents": [a.root.to_string()]}),
    )
    .await);
    let list = ok(&call(&c, "outcome_list", json!({})).await);
    let titles: Vec<&str> = list["outcomes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["title"].as_str().unwrap())
        .collect();
    assert!(titles.contains(&"Live one"), "{list}");
    ok(&call(
        &c,
        "outcome_close",
        json!({"outcome": o["outcome"], "rationale": "no"}),
    )
    .await);
    let list = ok(&call(&c, "outcome_list", json!({})).await);
    assert!(!list.to_string().contains("Live one"), "{list}");
    let all = ok(&call(&c, "outcome_list", json!({"include_finished": true})).await);
    assert!(all.to_string().contains("Live one"), "{all}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue9_item12_runs_of_an_underling_reach_its_boss_not_a_sibling() {
    let a = Agency::new();
    let boss = Principal::agent(a.root, a.agent);
    let new = |title: &str| {
        a.svc
            .outcome_create(
                boss,
                &agency_service::NewOutcome {
                    title: title.into(),
                    parents: vec![a.root.root()],
                    ..Default::default()
                },
            )
            .unwrap()
    };
    let (oa, ob) = (new("A"), new("B"));
    let ha = a.svc.delegate(boss, oa, &[]).unwrap().handler;
    let hb = a.svc.delegate(boss, ob, &[]).unwrap().handler;
    let agent_a = a.sys.agent_start(ha).unwrap();
    let agent_b = a.sys.agent_start(hb).unwrap();

    let server = serve(a.svc.clone(), Some(a.identity())).await;
    let c = connect(&server.url).await.unwrap();
    let runs = ok(&call(&c, "run_list", json!({ "handler": ha.to_string() })).await);
    assert_eq!(runs["runs"][0]["agent"], json!(agent_a.to_string()));
    let one = ok(&call(&c, "run_view", json!({ "agent": agent_a.to_string() })).await);
    assert_eq!(one["live"], json!(true));

    // A prompt-injected sibling probing its neighbour's runs.
    let sibling = AgentIdentity {
        handler: hb,
        agent: agent_b,
        workspace: None,
    };
    let server_b = serve(a.svc.clone(), Some(sibling)).await;
    let cb = connect(&server_b.url).await.unwrap();
    err(
        &call(&cb, "run_list", json!({ "handler": ha.to_string() })).await,
        "not_found",
    );
    err(
        &call(&cb, "run_view", json!({ "agent": agent_a.to_string() })).await,
        "not_found",
    );
    err(
        &call(&cb, "run_list", json!({ "handler": a.root.to_string() })).await,
        "not_found",
    );
}
