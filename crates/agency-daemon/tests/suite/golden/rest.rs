//! Every `/v1` GET route the CLI reads, plus the POSTs that built the
//! state and a few error answers: status code and body, fields in the
//! order the daemon wrote them.

use super::json::Json;
use super::world::World;

/// Lists ordered by outcome UUID in a subtree and an outcome's view.
const SUBTREE: &[&[&str]] = &[&["outcomes"], &["edges"]];
const NEIGHBOURS: &[&[&str]] = &[&["parents"], &["children"]];

/// One answer as pinned: the HTTP status and the body.
fn answer(status: u16, body: Json) -> Json {
    Json::Obj(vec![
        ("status".into(), Json::Num(status.into())),
        ("body".into(), body),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rest_answers_are_pinned() {
    let w = World::build().await;
    let settings = w.settings();
    let (root, child) = (w.root, w.child);
    let (ra, ca) = (w.root_agent.agent, w.child_agent.agent);

    for (name, body) in &w.built {
        let name = format!("rest_post_{name}");
        settings.bind(|| insta::assert_json_snapshot!(name, body));
    }

    // The routes in the order of `agency --help`'s commands; where the
    // daemon orders a list by UUID (random on every run), the list is
    // sorted here by the names the snapshot gives its ids.
    let routes: Vec<(&str, String, &[&[&str]])> = vec![
        ("status", "/v1/status".into(), &[]),
        ("handlers", "/v1/handlers".into(), &[&[]]),
        ("handler_root", format!("/v1/handlers/{root}"), &[]),
        ("handler_child", format!("/v1/handlers/{child}"), &[]),
        (
            "handler_outcomes",
            format!("/v1/handlers/{root}/outcomes"),
            &[],
        ),
        ("handler_audit", format!("/v1/handlers/{child}/audit"), &[]),
        (
            "capabilities_root",
            format!("/v1/handlers/{root}/capabilities"),
            &[],
        ),
        (
            "capabilities_child",
            format!("/v1/handlers/{child}/capabilities"),
            &[],
        ),
        ("keep_warm", format!("/v1/handlers/{child}/keep-warm"), &[]),
        ("outcomes", "/v1/outcomes".into(), SUBTREE),
        (
            "outcomes_below_dig",
            format!("/v1/outcomes?root={}", w.dig),
            SUBTREE,
        ),
        (
            "outcome_seeds",
            format!("/v1/outcomes/{}", w.seeds),
            NEIGHBOURS,
        ),
        ("agents", "/v1/agents".into(), &[&["live"]]),
        ("kb", "/v1/kb".into(), &[&[]]),
        ("kb_cat", format!("/v1/kb/{}", w.plan), &[]),
        (
            "kb_cat_version",
            format!("/v1/kb/{}?version=1", w.plan),
            &[],
        ),
        ("kb_history", format!("/v1/kb/{}/history", w.plan), &[]),
        ("kb_audit", format!("/v1/kb/{}/audit", w.plan), &[]),
        ("inbox", "/v1/inbox".into(), &[]),
        ("inbox_all", "/v1/inbox?all=true".into(), &[]),
        ("mail_status", format!("/v1/mail/{}", w.reply), &[]),
        ("runs", "/v1/runs".into(), &[]),
        ("runs_of_child", format!("/v1/runs?handler={child}"), &[]),
        ("run", format!("/v1/runs/{ca}"), &[]),
        ("run_log", format!("/v1/runs/{ra}/log"), &[]),
        ("run_transcript", format!("/v1/runs/{ra}/transcript"), &[]),
        ("cost", "/v1/cost".into(), &[&["children"]]),
        ("cost_child", format!("/v1/cost/{child}"), &[]),
        ("budgets", "/v1/budgets".into(), &[&["children"]]),
        ("budgets_child", format!("/v1/budgets/{child}"), &[]),
        ("approvals", "/v1/approvals".into(), &[]),
        ("approvals_all", "/v1/approvals?all=true".into(), &[]),
        ("approval", format!("/v1/approvals/{}", w.approval), &[]),
        ("orgs", "/v1/orgs".into(), &[]),
        ("model", format!("/v1/models/{root}"), &[]),
        (
            "memory_search",
            format!("/v1/memory/{root}/search?q=beds"),
            &[],
        ),
        (
            "memory_show",
            format!("/v1/memory/{root}/{}", w.memory),
            &[],
        ),
        ("memory_status", format!("/v1/memory/{root}/status"), &[]),
        (
            "memory_compactions",
            format!("/v1/memory/{root}/compactions"),
            &[],
        ),
        ("mcp_pins", "/v1/mcp/pins".into(), &[]),
        ("agency_keys", "/v1/agency/keys".into(), &[]),
        (
            "agency_conversations",
            "/v1/agency/conversations".into(),
            &[],
        ),
        (
            "resolve",
            format!("/v1/resolve/handler/{}", &child.to_string()[..8]),
            &[],
        ),
        // Errors: unknown, malformed, refused.
        (
            "error_not_found",
            format!("/v1/handlers/{}", uuid::Uuid::nil()),
            &[],
        ),
        ("error_bad_id", "/v1/outcomes/not-a-uuid".into(), &[]),
        ("error_bad_kind", "/v1/resolve/planet/abc".into(), &[]),
    ];
    for (name, path, sorted) in routes {
        let (status, mut body) = w.get(&path).await;
        for list in sorted {
            w.sort_by_named(&mut body, list);
        }
        if name == "kb_audit" {
            w.sort_log_entries(&mut body);
        }
        let name = format!("rest_get_{name}");
        settings.bind(|| insta::assert_json_snapshot!(name, answer(status, body)));
    }

    // Checks that change nothing, then the daemon's own records of them.
    for (name, path, body) in [
        ("fsck", "/v1/fsck", serde_json::json!({})),
        ("gc_dry_run", "/v1/gc", serde_json::json!({"dry_run": true})),
    ] {
        let (status, body) = w.post_raw(path, body).await;
        let name = format!("rest_post_{name}");
        settings.bind(|| insta::assert_json_snapshot!(name, answer(status, body)));
    }
}
