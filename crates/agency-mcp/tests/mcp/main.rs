//! The MCP endpoint end to end: a real service behind `agency_mcp::router`,
//! driven over loopback HTTP by rmcp's own streamable-HTTP client.

#![allow(clippy::unwrap_used)]

mod boundary;
mod budgets;
mod calls;
mod fuzz;
mod grant_outcome;
mod memory;
mod records;
mod reopen;
mod repos;
mod support;
mod wait;

use agency_mcp::{AgentIdentity, TOOL_NAMES};
use serde_json::json;
use support::{Agency, call, connect, err, ok, raw_post, serve, serve_as, text};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_every_tool_with_a_description_and_an_object_schema() {
    let a = Agency::new();
    let server = serve(a.svc.clone(), Some(a.identity())).await;
    let client = connect(&server.url).await.unwrap();

    let info = client.peer_info().expect("server info");
    assert!(
        info.protocol_version.as_str() >= "2025-11-25",
        "negotiated {}",
        info.protocol_version
    );
    assert!(info.capabilities.tools.is_some());

    let tools = client.list_all_tools().await.unwrap();
    for name in TOOL_NAMES {
        let t = tools
            .iter()
            .find(|t| t.name == *name)
            .unwrap_or_else(|| panic!("tool {name} is not listed"));
        assert!(
            t.description
                .as_deref()
                .is_some_and(|d| !d.trim().is_empty()),
            "{name} has no description"
        );
        assert_eq!(t.input_schema.get("type"), Some(&json!("object")), "{name}");
    }
    assert_eq!(tools.len(), TOOL_NAMES.len());
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kb_round_trip_and_stale_write() {
    let a = Agency::new();
    let server = serve(a.svc.clone(), Some(a.identity())).await;
    let c = connect(&server.url).await.unwrap();

    let created = ok(&call(
        &c,
        "kb_create",
        json!({"description": "Plan for the garden", "content": "dig, plant, water"}),
    )
    .await);
    let file = created["file"].as_str().unwrap().to_owned();
    assert_eq!(created["version"], 1);

    let read = ok(&call(&c, "kb_read", json!({ "file": file })).await);
    assert_eq!(read["content"], "dig, plant, water");
    assert_eq!(read["encoding"], "utf-8");
    assert_eq!(read["version"], 1);
    assert_eq!(read["hash"], created["hash"]);
    assert_eq!(read["description"], "Plan for the garden");
    assert_eq!(read["kind"], "document");

    let v2 = ok(&call(
        &c,
        "kb_write",
        json!({"file": file, "base_version": 1, "base_hash": read["hash"], "content": "dig, plant, water, wait"}),
    )
    .await);
    assert_eq!(v2["version"], 2);

    // The same base again is stale now: a conflict naming version 2.
    let stale = call(
        &c,
        "kb_write",
        json!({"file": file, "base_version": 1, "base_hash": read["hash"], "content": "lost update"}),
    )
    .await;
    let t = err(&stale, "current version");
    assert!(t.starts_with("[conflict] "), "{t}");
    assert!(t.contains("current version is 2"), "{t}");

    let old = ok(&call(&c, "kb_read_version", json!({"file": file, "version": 1})).await);
    assert_eq!(old["content"], "dig, plant, water");
    let history = ok(&call(&c, "kb_history", json!({ "file": file })).await);
    assert_eq!(history["versions"].as_array().unwrap().len(), 2);
    assert!(history.get("next_after").is_none(), "{history}");
    // Paged: one version, then the cursor for the rest.
    let first = ok(&call(&c, "kb_history", json!({ "file": file, "limit": 1 })).await);
    assert_eq!(first["versions"][0]["version"], 1);
    assert_eq!(first["next_after"], 1);
    let rest = ok(&call(&c, "kb_history", json!({ "file": file, "after": 1 })).await);
    assert_eq!(rest["versions"][0]["version"], 2);
    let listed = ok(&call(&c, "kb_list", json!({})).await);
    assert!(
        listed["files"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["id"] == json!(file))
    );
    let found = ok(&call(&c, "kb_browse", json!({"query": "GARDEN plan"})).await);
    assert_eq!(found["files"].as_array().unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_are_tool_errors_the_agent_can_read() {
    let a = Agency::new();
    let server = serve(a.svc.clone(), Some(a.identity())).await;
    let c = connect(&server.url).await.unwrap();

    let r = call(&c, "kb_read", json!({"file": "not-a-uuid"})).await;
    let t = err(&r, "`file`");
    assert!(t.starts_with("[invalid_input] "), "{t}");
    err(
        &call(
            &c,
            "kb_read",
            json!({"file": a.root.to_string(), "extra": 1}),
        )
        .await,
        "unknown field",
    );
    err(&call(&c, "kb_read", json!({})).await, "missing field");
    err(
        &call(
            &c,
            "kb_create",
            json!({"description": "d", "content": "x", "path": "notes.md"}),
        )
        .await,
        "not both",
    );
    err(
        &call(
            &c,
            "kb_read",
            json!({"file": uuid::Uuid::new_v4().to_string()}),
        )
        .await,
        "[not_found]",
    );
    err(
        &call(&c, "outcome_create", json!({"title": "t", "parents": []})).await,
        "`parents` is empty",
    );
    err(
        &call(&c, "mail_send", json!({"to": "someone", "text": "hi"})).await,
        "`to`",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outcomes_and_mail() {
    let a = Agency::new();
    let server = serve(a.svc.clone(), Some(a.identity())).await;
    let c = connect(&server.url).await.unwrap();

    let created = ok(&call(
        &c,
        "outcome_create",
        json!({"title": "Tidy the garden", "parents": [a.root.to_string()], "priority": 2}),
    )
    .await);
    let outcome = created["outcome"].as_str().unwrap().to_owned();

    let anc = ok(&call(&c, "outcome_ancestors", json!({ "outcome": outcome })).await);
    let chain: Vec<&str> = anc["chains"][0]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap())
        .collect();
    assert_eq!(chain, [outcome.as_str(), a.root.to_string().as_str()]);

    let view = ok(&call(&c, "outcome_view", json!({ "outcome": outcome })).await);
    assert_eq!(view["outcome"]["title"], "Tidy the garden");
    let sub = ok(&call(
        &c,
        "outcome_subtree",
        json!({ "outcome": a.root.to_string() }),
    )
    .await);
    assert!(sub["outcomes"].as_array().unwrap().len() >= 2);

    let upd = ok(&call(
        &c,
        "outcome_update",
        json!({"outcome": outcome, "status": "blocked", "reason": "waiting for rain"}),
    )
    .await);
    assert_eq!(upd["status"], "blocked");
    err(
        &call(
            &c,
            "outcome_update",
            json!({"outcome": outcome, "status": "completed"}),
        )
        .await,
        "unknown variant",
    );

    // The root handler's boss is the user, which it may write to.
    let sent = ok(&call(
        &c,
        "mail_send",
        json!({"to": "boss", "text": "Started on the garden"}),
    )
    .await);
    assert_eq!(sent["to"], json!({"kind": "user"}));
    let later = ok(&call(
        &c,
        "mail_send_deferred",
        json!({"to": "self", "text": "check the garden", "delay_seconds": 3600}),
    )
    .await);
    assert!(later["deliver_at_rfc3339"].as_str().unwrap().ends_with('Z'));
    err(
        &call(
            &c,
            "mail_send_deferred",
            json!({"to": "self", "text": "x", "delay_seconds": 1, "deliver_at": "2030-01-01T00:00:00Z"}),
        )
        .await,
        "exactly one",
    );
    let inbox = ok(&call(&c, "mail_inbox", json!({})).await);
    assert!(inbox["messages"].is_array());

    let closed = ok(&call(
        &c,
        "outcome_close",
        json!({"outcome": outcome, "rationale": "no garden after all"}),
    )
    .await);
    assert_eq!(closed["status"], "closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_audit_and_permissions() {
    let a = Agency::new();
    let server = serve(a.svc.clone(), Some(a.identity())).await;
    let c = connect(&server.url).await.unwrap();

    let state = ok(&call(&c, "state_read", json!({})).await);
    let written = ok(&call(
        &c,
        "state_write",
        json!({"base_version": state["version"], "base_hash": state["hash"], "content": "## Progress\nnone yet"}),
    )
    .await);
    assert_eq!(written["version"], state["version"].as_i64().unwrap() + 1);
    let again = ok(&call(&c, "state_read", json!({})).await);
    assert_eq!(again["content"], "## Progress\nnone yet");

    ok(&call(&c, "audit_submit", json!({"summary": "wrote my state"})).await);
    let log = ok(&call(&c, "audit_read", json!({})).await);
    assert!(
        log["entries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["summary"] == "wrote my state")
    );
    // issue 9 item 9: the log pages with a cursor (each entry's `seq`).
    ok(&call(&c, "audit_submit", json!({"summary": "and then some"})).await);
    let mut summaries = Vec::new();
    let mut args = json!({ "limit": 1 });
    loop {
        let page = ok(&call(&c, "audit_read", args.clone()).await);
        let entries = page["entries"].as_array().unwrap();
        assert_eq!(entries.len(), 1, "{page}");
        summaries.push(entries[0]["summary"].as_str().unwrap().to_owned());
        match page.get("next_after") {
            Some(n) => args = json!({ "limit": 1, "after": n }),
            None => break,
        }
    }
    assert_eq!(
        summaries.len(),
        log["entries"].as_array().unwrap().len() + 1
    );
    assert_eq!(summaries.last().unwrap(), "and then some");
    // The outcome history pages the same way.
    let made = ok(&call(
        &c,
        "outcome_create",
        json!({"title": "Paged", "parents": [a.root.to_string()]}),
    )
    .await);
    let root = made["outcome"].as_str().unwrap().to_owned();
    for p in [1, 2] {
        ok(&call(
            &c,
            "outcome_update",
            json!({"outcome": root, "priority": p}),
        )
        .await);
    }
    let all = ok(&call(&c, "outcome_history", json!({ "outcome": root })).await);
    let events = all["events"].as_array().unwrap();
    assert!(
        !events.is_empty() && all.get("next_after").is_none(),
        "{all}"
    );
    let one = ok(&call(
        &c,
        "outcome_history",
        json!({ "outcome": root, "limit": 1 }),
    )
    .await);
    assert_eq!(one["events"][0], events[0]);
    assert_eq!(events.len(), 3, "{all}");
    let next = ok(&call(
        &c,
        "outcome_history",
        json!({ "outcome": root, "after": one["next_after"] }),
    )
    .await);
    assert_eq!(next["events"][0], events[1]);

    let caps = ok(&call(&c, "permissions_list", json!({})).await);
    assert!(!caps["capabilities"].as_array().unwrap().is_empty());
    // Granting to a handler that is not an underling is the service's call.
    let r = call(
        &c,
        "permissions_grant",
        json!({"handler": uuid::Uuid::new_v4().to_string(), "resource_kind": "repo", "resource_id": "agency", "level": "read"}),
    )
    .await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delegate_then_force_stop() {
    let a = Agency::new();
    let server = serve(a.svc.clone(), Some(a.identity())).await;
    let c = connect(&server.url).await.unwrap();

    let o = ok(&call(
        &c,
        "outcome_create",
        json!({"title": "Research tools", "parents": [a.root.to_string()]}),
    )
    .await);
    let doc = ok(&call(
        &c,
        "kb_create",
        json!({"description": "tool notes", "content": "x"}),
    )
    .await);
    let d = ok(&call(
        &c,
        "delegate",
        json!({"outcome": o["outcome"], "capabilities": [
            {"resource_kind": "kb", "resource_id": doc["file"], "level": "read"}
        ]}),
    )
    .await);
    assert_eq!(d["handler"], o["outcome"]);
    assert_eq!(d["capabilities"].as_array().unwrap().len(), 1);

    let mail = ok(&call(
        &c,
        "mail_send",
        json!({"to": d["handler"], "file": doc["file"], "subject": "notes"}),
    )
    .await);
    assert!(mail["message"].is_string());

    let stop = ok(&call(&c, "force_stop", json!({"handler": d["handler"]})).await);
    assert_eq!(stop["new_owner"], json!(a.root));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workspace_paths_are_confined() {
    let a = Agency::new();
    let server = serve(a.svc.clone(), Some(a.identity())).await;
    let c = connect(&server.url).await.unwrap();

    let created = ok(&call(
        &c,
        "kb_create",
        json!({"description": "notes from a file", "path": "notes.md"}),
    )
    .await);
    let read = ok(&call(&c, "kb_read", json!({ "file": created["file"] })).await);
    assert_eq!(read["content"], "# Notes\nfrom the workspace\n");
    let abs = a.ws.join("notes.md");
    ok(&call(
        &c,
        "kb_create",
        json!({"description": "absolute inside", "path": abs.to_str().unwrap()}),
    )
    .await);

    for (path, needle) in [
        ("../x", "'..'"),
        ("/etc/passwd", "outside your workspace"),
        ("pw", "symlink"),
        ("etc/passwd", "symlink"),
        ("a\0b", "NUL"),
        ("missing.md", "no such file"),
        ("", "empty"),
    ] {
        let r = call(
            &c,
            "kb_create",
            json!({"description": "escape", "path": path}),
        )
        .await;
        let t = err(&r, needle);
        assert!(t.starts_with("[invalid_path] "), "{path:?}: {t}");
    }
    // Nothing was created by the refused calls.
    let mine = ok(&call(&c, "kb_browse", json!({"query": "escape"})).await);
    assert!(mine["files"].as_array().unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_content_comes_back_as_base64() {
    let a = Agency::new();
    std::fs::write(a.ws.join("blob.bin"), [0xff_u8, 0x00, 0xfe]).unwrap();
    let server = serve(a.svc.clone(), Some(a.identity())).await;
    let c = connect(&server.url).await.unwrap();
    let created = ok(&call(
        &c,
        "kb_create",
        json!({"description": "binary", "path": "blob.bin"}),
    )
    .await);
    let read = ok(&call(&c, "kb_read", json!({ "file": created["file"] })).await);
    assert_eq!(read["encoding"], "base64");
    assert_eq!(read["content"], "/wD+");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_without_workspace_must_pass_content_inline() {
    let a = Agency::new();
    let identity = AgentIdentity {
        workspace: None,
        ..a.identity()
    };
    let server = serve(a.svc.clone(), Some(identity)).await;
    let c = connect(&server.url).await.unwrap();
    err(
        &call(
            &c,
            "kb_create",
            json!({"description": "d", "path": "notes.md"}),
        )
        .await,
        "this agent has no workspace; pass content inline",
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_without_identity_are_refused() {
    let a = Agency::new();
    let server = serve(a.svc.clone(), None).await;
    assert!(connect(&server.url).await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ended_agent_is_refused_by_the_service() {
    let a = Agency::new();
    let server = serve(a.svc.clone(), Some(a.identity())).await;
    let c = connect(&server.url).await.unwrap();
    assert!(a.sys.agent_end(a.agent, "test").unwrap());
    err(&call(&c, "kb_list", json!({})).await, "[permission_denied]");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_2026_clients_are_identified_too() {
    use rmcp::model::ProtocolVersion;
    use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
    use rmcp::transport::StreamableHttpClientTransport;

    let a = Agency::new();
    let server = serve(a.svc.clone(), Some(a.identity())).await;
    let c = ()
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_uri(server.url.clone()),
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .unwrap();
    let created = ok(&call(
        &c,
        "kb_create",
        json!({"description": "stateless", "content": "hello"}),
    )
    .await);
    let read = ok(&call(&c, "kb_read", json!({ "file": created["file"] })).await);
    assert_eq!(read["content"], "hello");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_inline_content_reaches_the_service() {
    let a = Agency::new();
    let server = serve(a.svc.clone(), Some(a.identity())).await;
    let c = connect(&server.url).await.unwrap();
    let max = a.svc.limits().max_file_bytes;
    // Over the transport's default 4 MiB, within the service's limit.
    let big = "a".repeat(5 * 1024 * 1024);
    let created = ok(&call(
        &c,
        "kb_create",
        json!({"description": "big", "content": big}),
    )
    .await);
    assert_eq!(created["size"], 5 * 1024 * 1024);
    // Over the service's limit: refused by the service, readably.
    let huge = "a".repeat(max + 1);
    err(
        &call(
            &c,
            "kb_create",
            json!({"description": "huge", "content": huge}),
        )
        .await,
        "maximum file size",
    );
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_host_headers_are_refused() {
    let a = Agency::new();
    let server = serve(a.svc.clone(), Some(a.identity())).await;
    let resp = raw_post(&server.url, &[("Host", "evil.example:80")], INIT).await;
    let status = resp.lines().next().unwrap_or_default();
    assert!(
        status.contains(" 403 ") || status.contains(" 400 "),
        "{status}"
    );
}

/// Issue 15: the endpoint is stateless, so no MCP session exists that one
/// agent could open and another agent's token then use: every request acts
/// as the token it came with, whatever session id it carries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_15_no_session_carries_one_agents_calls_to_another() {
    let a = Agency::new();
    // A second live agent, of an underling handler, and a file only the
    // root handler may read.
    let root_agent = agency_core::Principal::agent(a.root, a.agent);
    let o = a
        .svc
        .outcome_create(
            root_agent,
            &agency_service::NewOutcome {
                title: "second".into(),
                parents: vec![a.root.root()],
                ..Default::default()
            },
        )
        .unwrap();
    a.svc.delegate(root_agent, o, &[]).unwrap();
    let secret = a
        .svc
        .kb_create(root_agent, "root's notes", b"the root handler's own notes")
        .unwrap();
    let other_handler = agency_core::HandlerId::from_root(o);
    let other = AgentIdentity {
        handler: other_handler,
        agent: a.sys.agent_start(other_handler).unwrap(),
        workspace: None,
    };
    let first = a.identity();
    let server = serve_as(a.svc.clone(), move |req| {
        Some(if req.headers().contains_key("x-test-other") {
            other.clone()
        } else {
            first.clone()
        })
    })
    .await;

    let resp = raw_post(&server.url, &[], INIT).await;
    assert!(resp.contains("protocolVersion"), "{resp}");
    assert!(
        !resp.to_ascii_lowercase().contains("mcp-session-id"),
        "the endpoint handed out a session: {resp}"
    );
    // A session id the first agent might have held, replayed by another.
    let sid = [
        ("Mcp-Session-Id", "0d4c0d4c-0000-4000-8000-000000000000"),
        ("MCP-Protocol-Version", "2025-11-25"),
    ];
    let read = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"kb_read","arguments":{{"file":"{secret}"}}}}}}"#
    );
    let own = raw_post(&server.url, &sid, &read).await;
    assert!(own.contains("the root handler's own notes"), "{own}");
    let mut hijack = sid.to_vec();
    hijack.push(("x-test-other", "1"));
    let refused = raw_post(&server.url, &hijack, &read).await;
    assert!(refused.contains("not_found"), "{refused}");
    assert!(!refused.contains("own notes"), "{refused}");
}

/// Issue 15: a plain `tools/call` is answered by the endpoint's direct path,
/// the same call with anything unusual by rmcp; both must give the agent
/// the same answer, and the direct path must not take what it cannot judge.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_15_direct_and_rmcp_paths_answer_alike() {
    let a = Agency::new();
    let who = agency_core::Principal::agent(a.root, a.agent);
    let file = a.svc.kb_create(who, "notes", b"same either way").unwrap();
    let server = serve(a.svc.clone(), Some(a.identity())).await;
    let v = ("MCP-Protocol-Version", "2025-11-25");
    let body = |id: u32, extra: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"kb_read","arguments":{{"file":"{file}"}}{extra}}}}}"#
        )
    };
    // The JSON-RPC object of a whole HTTP response, whether sent as JSON or
    // as one SSE event.
    let answer = |resp: &str| -> serde_json::Value {
        let (head, payload) = resp.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{resp}");
        let json = payload
            .lines()
            .find_map(|l| l.strip_prefix("data: "))
            .unwrap_or(payload);
        serde_json::from_str(json.trim()).unwrap_or_else(|e| panic!("{e}: {resp}"))
    };
    let direct = answer(&raw_post(&server.url, &[v], &body(7, "")).await);
    assert_eq!(direct["id"], 7);
    let result = &direct["result"];
    let read: serde_json::Value =
        serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(read["content"], "same either way");
    // A progress token (rmcp's client sends one on every request) stays on
    // the direct path; other `_meta` and SEP-2243's method header send the
    // call through rmcp: same result every way.
    for (headers, extra) in [
        (vec![v], r#","_meta":{"progressToken":1}"#),
        (vec![v], r#","_meta":{"progressToken":1,"x-other":true}"#),
        (vec![v, ("Mcp-Method", "tools/call")], ""),
    ] {
        let via_rmcp = answer(&raw_post(&server.url, &headers, &body(8, extra)).await);
        assert_eq!(via_rmcp["id"], 8);
        assert_eq!(&via_rmcp["result"], result);
    }
    // A tool error (bad arguments) reads the same on the direct path.
    let bad = answer(
        &raw_post(
            &server.url,
            &[v],
            r#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"kb_read","arguments":{"file":"nope"}}}"#,
        )
        .await,
    );
    assert_eq!(bad["id"], "x");
    assert_eq!(bad["result"]["isError"], true);
    // What the direct path does not take is still judged by rmcp: a
    // foreign Host, an unknown tool, a missing protocol version.
    let foreign = raw_post(&server.url, &[v, ("Host", "evil.example")], &body(9, "")).await;
    assert!(!foreign.contains("same either way"), "{foreign}");
    let unknown = raw_post(
        &server.url,
        &[v],
        r#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"no_such_tool","arguments":{}}}"#,
    )
    .await;
    assert!(!unknown.contains("\"result\""), "{unknown}");
}

/// Issue 15: the direct path acts only on an identity the daemon's token
/// check attached. A well-formed `tools/call` without one (no token, or a
/// token that did not check out) must read nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_15_direct_path_without_identity_reads_nothing() {
    let a = Agency::new();
    let who = agency_core::Principal::agent(a.root, a.agent);
    let file = a.svc.kb_create(who, "notes", b"private notes").unwrap();
    let server = serve(a.svc.clone(), None).await;
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"kb_read","arguments":{{"file":"{file}"}}}}}}"#
    );
    let resp = raw_post(
        &server.url,
        &[("MCP-Protocol-Version", "2025-11-25")],
        &body,
    )
    .await;
    assert!(!resp.contains("private notes"), "{resp}");
    assert!(!resp.contains("\"result\""), "{resp}");
}
