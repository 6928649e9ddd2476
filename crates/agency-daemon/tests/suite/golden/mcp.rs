//! What an agent sees on the daemon's `/mcp` with its bearer token:
//! `tools/list` (names, descriptions, input schemas, annotations: the
//! agents' prompt) and the result of every Agency tool, called in order on
//! the prepared state, plus error results. A result is pinned as the
//! agent reads it: `isError` and the content blocks, each text block as
//! the JSON it carries (keys in the order sent); `structuredContent`,
//! when present, must equal the first block's JSON.

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

use super::json::Json;
use super::world::World;

type Client = RunningService<RoleClient, ()>;

async fn connect(w: &World, token: &str) -> Client {
    let cfg =
        StreamableHttpClientTransportConfig::with_uri(w.mcp_url()).auth_header(token.to_owned());
    ().serve(StreamableHttpClientTransport::from_config(cfg))
        .await
        .unwrap()
}

/// Tools whose lists the daemon orders by UUID (random on every run), and
/// where that list is in their result: sorted by `World::sort_by_named`.
const UUID_ORDERED: &[(&str, &[&[&str]])] = &[
    ("kb_list", &[&["files"]]),
    ("kb_browse", &[&["files"]]),
    ("outcome_view", &[&["parents"], &["children"]]),
    ("outcome_ancestors", &[&["chains"]]),
    ("outcome_subtree", &[&["outcomes"], &["edges"]]),
    ("force_stop", &[&["handlers"], &["agents_to_kill"]]),
];

/// A tool result as the agent reads it (see the module doc); `fix` is
/// given each text block's JSON.
fn pinned(r: &CallToolResult, fix: impl Fn(&mut Json)) -> Json {
    let mut blocks = Vec::new();
    for c in &r.content {
        let block = Json::parse(&serde_json::to_string(c).unwrap());
        let block = match (block, c.as_text()) {
            (Json::Obj(fields), Some(t)) => Json::Obj(
                fields
                    .into_iter()
                    .map(|(k, v)| match k.as_str() {
                        "text" => match serde_json::from_str::<Json>(&t.text) {
                            Ok(mut j) => {
                                fix(&mut j);
                                (k, j)
                            }
                            Err(_) => (k, v),
                        },
                        _ => (k, v),
                    })
                    .collect(),
            ),
            (b, _) => b,
        };
        blocks.push(block);
    }
    if let Some(s) = &r.structured_content {
        let first: Value = r
            .content
            .first()
            .and_then(|c| c.as_text())
            .and_then(|t| serde_json::from_str(&t.text).ok())
            .unwrap_or(Value::Null);
        assert_eq!(s, &first, "structuredContent differs from the text");
    }
    Json::Obj(vec![
        ("isError".into(), Json::Bool(r.is_error.unwrap_or(false))),
        ("content".into(), Json::Arr(blocks)),
        (
            "structuredContent".into(),
            Json::Bool(r.structured_content.is_some()),
        ),
    ])
}

/// The JSON of a result's first text block.
fn value(r: &CallToolResult) -> Value {
    let t = &r.content[0].as_text().expect("a text block").text;
    serde_json::from_str(t).unwrap_or(Value::Null)
}

struct Session<'a> {
    w: &'a mut World,
    settings: insta::Settings,
    step: usize,
}

impl Session<'_> {
    /// Call `tool` as `client`, pin its result as `mcp_NN_tool_what`, and
    /// return its JSON.
    async fn call(&mut self, client: &Client, tool: &str, what: &str, args: Value) -> Value {
        let Value::Object(args) = args else {
            panic!("arguments must be an object")
        };
        let r = client
            .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
            .await
            .unwrap_or_else(|e| panic!("{tool}: protocol error {e}"));
        self.step += 1;
        let name = match what {
            "" => format!("mcp_{:02}_{tool}", self.step),
            w => format!("mcp_{:02}_{tool}_{w}", self.step),
        };
        let sort = UUID_ORDERED.iter().find(|(t, _)| *t == tool);
        let pinned = pinned(&r, |j| {
            if let (Some((_, lists)), false) = (sort, r.is_error.unwrap_or(false)) {
                for list in *lists {
                    self.w.sort_by_named(j, list);
                }
            }
            // Reads are logged in batches: entries of one millisecond have
            // no reliable order, so their content is pinned, not the order.
            if let ("kb_audit", Json::Obj(fields)) = (tool, &mut *j)
                && let Some((_, entries)) = fields.iter_mut().find(|(k, _)| k == "entries")
            {
                self.w.sort_log_entries(entries);
            }
        });
        self.settings
            .bind(|| insta::assert_json_snapshot!(name, pinned));
        // Entries the daemon orders by time get distinct milliseconds.
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
        value(&r)
    }

    /// Name a new id in the snapshots that follow.
    fn label(&mut self, id: &Value, name: &str) {
        let id = id.as_str().unwrap_or_else(|| panic!("no id for {name}"));
        self.w.label(id, name);
        self.settings = self.w.settings();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_tools_and_results_are_pinned() {
    let mut w = World::build().await;
    let root = connect(&w, &w.root_agent.token).await;
    let child = connect(&w, &w.child_agent.token).await;

    let tools = root.list_all_tools().await.unwrap();
    let listed = Json::parse(&serde_json::to_string(&tools).unwrap());
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    let mut want: Vec<&str> = agency_mcp::TOOL_NAMES.to_vec();
    want.sort_unstable();
    assert_eq!(names, want, "tools/list is every Agency tool, by name");
    let settings = w.settings();
    settings.bind(|| insta::assert_json_snapshot!("mcp_tools_list", listed));

    let (plan, dig, plant, seeds) = (
        w.plan.to_string(),
        w.dig.to_string(),
        w.plant.to_string(),
        w.seeds.to_string(),
    );
    let (r, c) = (w.root.to_string(), w.child.to_string());
    let (reply, to_child) = (w.reply.to_string(), w.to_child.to_string());
    let child_agent = w.child_agent.agent.to_string();
    let memory = w.memory.clone();
    let mut s = Session {
        settings,
        w: &mut w,
        step: 0,
    };

    // Knowledge Base.
    s.call(&root, "kb_list", "", json!({})).await;
    s.call(&root, "kb_browse", "", json!({"query": "garden"}))
        .await;
    let read = s.call(&root, "kb_read", "", json!({"file": plan})).await;
    s.call(
        &root,
        "kb_read_version",
        "",
        json!({"file": plan, "version": 1}),
    )
    .await;
    s.call(&root, "kb_history", "", json!({"file": plan})).await;
    let created = s
        .call(
            &root,
            "kb_create",
            "",
            json!({"description": "Seed list", "content": "carrots\n"}),
        )
        .await;
    s.label(&created["file"], "seed-list");
    s.call(
        &root,
        "kb_write",
        "",
        json!({"file": created["file"], "base_version": 1, "base_hash": created["hash"],
               "content": "carrots, beans\n"}),
    )
    .await;
    s.call(
        &root,
        "kb_write",
        "stale",
        json!({"file": plan, "base_version": 1, "base_hash": read["hash"], "content": "x\n"}),
    )
    .await;
    s.call(&root, "kb_audit", "", json!({"file": plan})).await;

    // Outcomes.
    s.call(&root, "outcome_view", "", json!({"outcome": seeds}))
        .await;
    s.call(&root, "outcome_ancestors", "", json!({"outcome": seeds}))
        .await;
    s.call(&root, "outcome_subtree", "", json!({"outcome": r}))
        .await;
    s.call(&root, "outcome_history", "", json!({"outcome": plant}))
        .await;
    s.call(&root, "outcome_list", "", json!({})).await;
    let compost = s
        .call(
            &root,
            "outcome_create",
            "",
            json!({"title": "Compost", "description": "Start a heap.", "parents": [r], "priority": 2}),
        )
        .await;
    s.label(&compost["outcome"], "compost");
    let compost = compost["outcome"].clone();
    s.call(
        &root,
        "outcome_update",
        "",
        json!({"outcome": compost, "title": "Compost heap", "status": "blocked", "reason": "No bin yet."}),
    )
    .await;
    s.call(
        &root,
        "outcome_close",
        "",
        json!({"outcome": compost, "rationale": "The neighbour has one."}),
    )
    .await;
    s.call(
        &root,
        "outcome_reopen",
        "",
        json!({"outcome": compost, "rationale": "The neighbour moved."}),
    )
    .await;
    s.call(
        &root,
        "outcome_complete",
        "",
        json!({"outcome": compost, "rationale": "Bin bought and filled."}),
    )
    .await;
    s.call(
        &root,
        "outcome_view",
        "not_found",
        json!({"outcome": uuid::Uuid::nil()}),
    )
    .await;

    // Mail.
    s.call(&root, "mail_inbox", "", json!({})).await;
    s.call(&root, "mail_status", "", json!({"message": reply}))
        .await;
    s.call(&root, "mail_ack", "", json!({"messages": [reply]}))
        .await;
    let sent = s
        .call(
            &root,
            "mail_send",
            "",
            json!({"to": c, "subject": "Seeds", "text": "Buy carrots too.", "in_reply_to": reply}),
        )
        .await;
    s.label(&sent["message"], "msg-seeds");
    let later = s
        .call(
            &root,
            "mail_send_deferred",
            "",
            json!({"to": "self", "text": "Check the beds.", "delay_seconds": 3600}),
        )
        .await;
    s.label(&later["message"], "msg-later");
    s.call(
        &child,
        "mail_wait",
        "",
        json!({"timeout_ms": 1000, "ignore": [to_child]}),
    )
    .await;
    s.call(
        &root,
        "mail_send",
        "bad_target",
        json!({"to": "nobody", "text": "x"}),
    )
    .await;

    // Permissions and the handler tree.
    s.call(&root, "permissions_list", "", json!({})).await;
    s.call(
        &root,
        "permissions_grant",
        "",
        json!({"handler": c, "resource_kind": "egress", "resource_id": "api.example.com", "level": "read"}),
    )
    .await;
    s.call(
        &root,
        "delegate",
        "",
        json!({"outcome": plant, "budget": {"tool_calls": 100, "usd": 1.5}}),
    )
    .await;
    s.call(&child, "permissions_list", "", json!({})).await;

    // State document and audit log.
    let state = s.call(&child, "state_read", "", json!({})).await;
    s.call(
        &child,
        "state_write",
        "",
        json!({"base_version": state["version"], "base_hash": state["hash"],
               "content": "# State\nDigging along the fence.\n"}),
    )
    .await;
    s.call(
        &child,
        "audit_submit",
        "",
        json!({"summary": "Second bed dug."}),
    )
    .await;
    s.call(&root, "audit_read", "", json!({"handler": c})).await;
    s.call(
        &child,
        "outcome_request_completion",
        "",
        json!({"summary": "Both beds are dug."}),
    )
    .await;

    // Runs.
    s.call(&root, "run_list", "", json!({})).await;
    s.call(&root, "run_view", "", json!({"agent": child_agent}))
        .await;

    // Memory.
    let m1 = s
        .call(
            &root,
            "memory_store",
            "",
            json!({"text": "Carrots like sandy soil.", "tags": ["garden", "carrots"], "kind": "fact"}),
        )
        .await;
    s.label(&m1["id"], "memory-carrots");
    let m2 = s
        .call(
            &root,
            "memory_store",
            "note",
            json!({"text": "Water at dawn."}),
        )
        .await;
    s.label(&m2["id"], "memory-water");
    s.call(&root, "memory_search", "", json!({"query": "soil"}))
        .await;
    s.call(
        &root,
        "memory_condense",
        "",
        json!({"ids": [m1["id"], m2["id"]], "text": "Sandy soil for carrots; water at dawn.", "tags": ["garden"]}),
    )
    .await;
    s.call(&root, "memory_forget", "", json!({"id": memory}))
        .await;

    // Repos: none is configured.
    s.call(
        &root,
        "repo_clone",
        "unknown",
        json!({"name": "garden", "dest": "garden"}),
    )
    .await;
    s.call(
        &root,
        "repo_push",
        "unknown",
        json!({"repo": "garden", "path": "garden", "branch": "main"}),
    )
    .await;

    // Last: stopping the child retires it.
    s.call(&root, "force_stop", "", json!({"handler": dig}))
        .await;
    s.call(&root, "kb_read", "bad_id", json!({"file": "nope"}))
        .await;

    root.cancel().await.unwrap();
    child.cancel().await.unwrap();
}
