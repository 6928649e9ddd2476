//! `permissions_grant`'s `outcome` argument (issue 9 item 4): validated as
//! a UUID, passed to the service, and the grant is scoped to it.

use serde_json::json;

use crate::support::{Agency, call, connect, err, ok, serve};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue9_item4_permissions_grant_takes_the_outcome_it_is_for() {
    let a = Agency::new();
    let server = serve(a.svc.clone(), Some(a.identity())).await;
    let c = connect(&server.url).await.unwrap();
    let root = a.root.root().to_string();
    let o = ok(&call(
        &c,
        "outcome_create",
        json!({"title": "Team", "parents": [root]}),
    )
    .await);
    let doc = ok(&call(
        &c,
        "kb_create",
        json!({"description": "guide", "content": "x"}),
    )
    .await);
    let d = ok(&call(&c, "delegate", json!({"outcome": o["outcome"]})).await);
    // An outcome below the underling's root, created as the underling.
    let u: agency_core::HandlerId = d["handler"].as_str().unwrap().parse().unwrap();
    let ua = a.sys.agent_start(u).unwrap();
    let step = a
        .svc
        .outcome_create(
            agency_core::Principal::agent(u, ua),
            &agency_service::NewOutcome {
                title: "step".into(),
                parents: vec![u.root()],
                ..Default::default()
            },
        )
        .unwrap();
    let grant = |outcome: serde_json::Value| {
        json!({"handler": d["handler"], "resource_kind": "kb", "resource_id": doc["file"],
               "level": "read", "outcome": outcome})
    };
    err(
        &call(&c, "permissions_grant", grant(json!("not-a-uuid"))).await,
        "outcome",
    );
    err(
        &call(&c, "permissions_grant", grant(json!(root))).await,
        "grantee's area",
    );
    let g = ok(&call(&c, "permissions_grant", grant(json!(step.to_string()))).await);
    let held = a
        .svc
        .permissions_list(agency_core::Principal::User, Some(u))
        .unwrap();
    let cap = held
        .iter()
        .find(|x| serde_json::to_value(x.id).unwrap() == g["capability"])
        .unwrap();
    assert_eq!(cap.scope, Some(step));
    c.cancel().await.unwrap();
}
