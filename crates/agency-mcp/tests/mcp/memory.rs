//! The memory tools over real MCP (issue 13): store, search, forget and
//! condense as the calling agent; and the attack: a sibling agent passing
//! the first handler's memory ids to every tool is refused as "not found"
//! and its searches never return them.

use agency_core::Principal;
use agency_mcp::AgentIdentity;
use serde_json::json;

use crate::support::{Agency, call, connect, err, ok, serve};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue13_memory_tools_act_on_the_callers_handler_only() {
    let a = Agency::new();
    let server = serve(a.svc.clone(), Some(a.identity())).await;
    let c = connect(&server.url).await.unwrap();

    let m1 = ok(&call(
        &c,
        "memory_store",
        json!({"text": "The vault code is 4711", "tags": ["secrets"], "kind": "fact"}),
    )
    .await);
    let m2 = ok(&call(
        &c,
        "memory_store",
        json!({"text": "The vault is in the cellar"}),
    )
    .await);
    assert_eq!(m2["kind"], "note");
    let found = ok(&call(&c, "memory_search", json!({"query": "vault code"})).await);
    let hits = found["memories"].as_array().unwrap();
    assert_eq!(hits.len(), 2, "{found}");
    assert_eq!(hits[0]["id"], m1["id"]);
    assert!(hits[0]["score"].as_f64().unwrap() > 0.0);
    let tagged = ok(&call(
        &c,
        "memory_search",
        json!({"query": "vault", "tags": ["secrets"], "since": "2000-01-01T00:00:00Z"}),
    )
    .await);
    assert_eq!(tagged["memories"].as_array().unwrap().len(), 1);
    err(
        &call(&c, "memory_search", json!({"query": "*("})).await,
        "invalid_input",
    );
    err(
        &call(
            &c,
            "memory_search",
            json!({"query": "v", "since": "yesterday"}),
        )
        .await,
        "invalid_input",
    );
    err(
        &call(
            &c,
            "memory_store",
            json!({"text": "x", "kind": "instruction"}),
        )
        .await,
        "invalid_input",
    );

    // A sibling handler's agent (prompt-injected) holding A's memory ids.
    let boss = Principal::agent(a.root, a.agent);
    let o = a
        .svc
        .outcome_create(
            boss,
            &agency_service::NewOutcome {
                title: "B".into(),
                parents: vec![a.root.root()],
                ..Default::default()
            },
        )
        .unwrap();
    let hb = a.svc.delegate(boss, o, &[]).unwrap().handler;
    let agent_b = a.sys.agent_start(hb).unwrap();
    let server_b = serve(
        a.svc.clone(),
        Some(AgentIdentity {
            handler: hb,
            agent: agent_b,
            workspace: None,
        }),
    )
    .await;
    let cb = connect(&server_b.url).await.unwrap();
    let none = ok(&call(&cb, "memory_search", json!({"query": "vault code 4711"})).await);
    assert!(none["memories"].as_array().unwrap().is_empty(), "{none}");
    err(
        &call(&cb, "memory_forget", json!({"id": m1["id"]})).await,
        "not_found",
    );
    err(
        &call(
            &cb,
            "memory_condense",
            json!({"ids": [m1["id"], m2["id"]], "text": "stolen"}),
        )
        .await,
        "not_found",
    );
    // A's memories are untouched, and A condenses its own.
    let r = ok(&call(
        &c,
        "memory_condense",
        json!({"ids": [m1["id"], m2["id"]], "text": "Vault in the cellar, code 4711"}),
    )
    .await);
    assert!(r["compaction"].is_string(), "{r}");
    let found = ok(&call(&c, "memory_search", json!({"query": "vault"})).await);
    assert_eq!(found["memories"].as_array().unwrap().len(), 1);
    assert_eq!(found["memories"][0]["id"], r["summary"]["id"]);
    ok(&call(&c, "memory_forget", json!({"id": r["summary"]["id"]})).await);
    err(
        &call(&c, "memory_forget", json!({"id": r["summary"]["id"]})).await,
        "invalid_input",
    );
}
