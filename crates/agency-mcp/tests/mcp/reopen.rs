//! The `outcome_reopen` tool (issue 9 item 13) over real MCP: the service
//! decides, the tool passes the rationale and reports the refusal text.

use serde_json::json;

use crate::support::{Agency, call, connect, err, ok, serve};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue9_item13_outcome_reopen_tool() {
    let a = Agency::new();
    let server = serve(a.svc.clone(), Some(a.identity())).await;
    let c = connect(&server.url).await.unwrap();
    let o = ok(&call(
        &c,
        "outcome_create",
        json!({"title": "Paint the fence", "parents": [a.root.to_string()]}),
    )
    .await);
    let id = o["outcome"].as_str().unwrap().to_owned();
    err(
        &call(&c, "outcome_reopen", json!({"outcome": id})).await,
        "rationale",
    );
    let t = err(
        &call(
            &c,
            "outcome_reopen",
            json!({"outcome": id, "rationale": "not yet"}),
        )
        .await,
        "only a finished outcome",
    );
    assert!(
        t.starts_with(&format!("[invalid_input] failed to reopen outcome {id}")),
        "{t}"
    );
    ok(&call(
        &c,
        "outcome_complete",
        json!({"outcome": id, "rationale": "painted"}),
    )
    .await);
    let r = ok(&call(
        &c,
        "outcome_reopen",
        json!({"outcome": id, "rationale": "it rained on the wet paint"}),
    )
    .await);
    assert_eq!(r["status"], "open");
    assert_eq!(r["responsible"], a.root.to_string());
    let view = ok(&call(&c, "outcome_view", json!({ "outcome": id })).await);
    assert_eq!(view["outcome"]["status"], "open");
    let last = view["history"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["action"], "reopened");
    assert!(
        last["detail"]
            .as_str()
            .unwrap()
            .contains("it rained on the wet paint")
    );
}
