//! Issue 9 item 6, as attacks: an agent's token alone fetches no secret.
//! The launcher of each spawn gets a single-use nonce per extra server (in
//! its MCP configuration entry); `POST /launch/NAME` without it, with a
//! made-up one, a replayed one, or one stolen by another agent is refused.
//! No secret ever leaves the daemon (issue 27): `/launch` answers with the
//! daemon's `/mcp-proxy/NAME`, which checks the token and the capability
//! on every request, runs a stdio server itself and adds an HTTP server's
//! headers itself.

#![allow(clippy::unwrap_used)]

use crate::fixture;

use std::sync::{Arc, Mutex};

use agency_core::{AgentId, HandlerId, Principal};
use agency_daemon::{Daemon, Home};
use agency_service::System;
use fixture::{
    command_agents, delegate_new, grant_mcp_server as grant, home, mail_from_user, start, wait_for,
};
use serde_json::Value;

/// A home whose `command` agents copy their MCP configuration to
/// `out/AGENT.json`, then wait; `extra` is appended to agency.toml.
fn recording_home(extra: impl FnOnce(&std::path::Path) -> String) -> (tempfile::TempDir, Home) {
    let (dir, home) = home();
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let script = format!(
        "cp \"$AGENCY_MCP_CONFIG\" {:?}/\"$AGENCY_AGENT\".json; exec sleep 300",
        out.display().to_string()
    );
    let cfg = format!("{}{}", command_agents("", &script), extra(dir.path()));
    std::fs::write(home.config_path(), cfg).unwrap();
    (dir, home)
}

/// A recording home declaring the stdio servers `files` and `notes`, both
/// given `secret` (from a file) in their environment.
fn files_and_notes_home(secret: &str) -> (tempfile::TempDir, Home) {
    recording_home(|d| {
        std::fs::write(d.join("key"), secret).unwrap();
        format!(
            "[secrets]\nk = {{ file = {:?} }}\n[mcp_servers.files]\ncommand = \"mcp-files\"\nenv = {{ KEY = \"${{secret:k}}\" }}\n[mcp_servers.notes]\ncommand = \"mcp-notes\"\nenv = {{ KEY = \"${{secret:k}}\" }}\n",
            d.join("key").display().to_string()
        )
    })
}

/// The MCP configuration the live agent of `h` was given.
async fn config_of(dir: &std::path::Path, svc: &System, h: HandlerId) -> (AgentId, Value) {
    wait_for("an agent's MCP configuration", || {
        let a = svc
            .agents_live(Principal::User)
            .unwrap()
            .into_iter()
            .find(|a| a.handler == h)?
            .id;
        let text = std::fs::read_to_string(dir.join("out").join(format!("{a}.json"))).ok()?;
        Some((a, serde_json::from_str(&text).ok()?))
    })
    .await
}

fn token_of(config: &Value) -> String {
    config["mcpServers"]["agency"]["headers"]["Authorization"]
        .as_str()
        .unwrap()
        .strip_prefix("Bearer ")
        .unwrap()
        .to_owned()
}

fn nonce_of(config: &Value, server: &str) -> String {
    config["mcpServers"][server]["env"]["AGENCY_LAUNCH_NONCE"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// POST /launch/NAME as a launcher would: status and body.
async fn launch(daemon: &Daemon, name: &str, token: &str, nonce: Option<&str>) -> (u16, String) {
    let mut req = reqwest::Client::new()
        .post(format!("http://{}/launch/{name}", daemon.addr()))
        .bearer_auth(token);
    if let Some(n) = nonce {
        req = req.header("x-agency-launch-nonce", n);
    }
    let resp = req.send().await.unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

/// The root's agent, then a child handler's agent (which holds no
/// capability on any server): both configurations.
async fn root_and_child(
    dir: &std::path::Path,
    svc: &System,
) -> ((AgentId, Value), (AgentId, Value)) {
    let root = svc.root_handler().unwrap().unwrap();
    mail_from_user(svc, root, "go");
    let (ra, rc) = config_of(dir, svc, root).await;
    let child = delegate_new(svc, Principal::agent(root, ra), root, "Work");
    let c = config_of(dir, svc, child).await;
    ((ra, rc), c)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue9_item6_an_agent_token_alone_gets_no_secret_and_a_nonce_works_once() {
    let secret = format!("s3cr3t-{}", uuid::Uuid::new_v4().simple());
    let (dir, home) = files_and_notes_home(&secret);
    let (daemon, svc, root) = start(&home).await;
    grant(&svc, root, "files");
    grant(&svc, root, "notes");
    let ((_, config), (_, child_config)) = root_and_child(dir.path(), &svc).await;
    let token = token_of(&config);
    let child_token = token_of(&child_config);
    assert!(!config.to_string().contains(&secret));
    let files_nonce = nonce_of(&config, "files");
    let notes_nonce = nonce_of(&config, "notes");
    assert_ne!(files_nonce, notes_nonce);
    // The nonce travels in the launcher's environment, not its argv.
    assert_eq!(
        config["mcpServers"]["files"]["args"],
        serde_json::json!(["mcp-launch", "files"])
    );

    // The agent itself, with its own token and no nonce, or a made-up one.
    let (status, body) = launch(&daemon, "files", &token, None).await;
    assert_eq!(status, 403, "{body}");
    assert!(!body.contains(&secret));
    assert!(body.contains("nonce"), "{body}");
    let (status, body) = launch(&daemon, "files", &token, Some("agl_made_up")).await;
    assert_eq!(status, 403, "{body}");

    // Another agent that stole the nonce (it read the configuration file):
    // refused, and the nonce is spent by the theft.
    let (status, body) = launch(&daemon, "files", &child_token, Some(&files_nonce)).await;
    assert_eq!(status, 403, "{body}");
    assert!(!body.contains(&secret));
    let (status, body) = launch(&daemon, "files", &token, Some(&files_nonce)).await;
    assert_eq!(status, 403, "{body}");
    assert!(!body.contains(&secret));

    // A nonce is bound to its server too.
    let (status, _) = launch(&daemon, "files", &token, Some(&notes_nonce)).await;
    assert_eq!(status, 403);
    // notes' nonce was spent by that attempt: nothing is left to replay.
    let (status, body) = launch(&daemon, "notes", &token, Some(&notes_nonce)).await;
    assert_eq!(status, 403, "{body}");
    daemon.stop().await.unwrap();
}

/// Issue 27 (it was issue 9 item 6's "the launcher gets the secret
/// once"): a `command` agent presented its own nonce and got a stdio
/// server's secrets. The launch answers with the daemon's proxy, which
/// runs the server itself; the secret never leaves the daemon, and the
/// nonce is still single use.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue27_a_launch_answers_the_proxy_never_a_secret_and_once() {
    let secret = format!("s3cr3t-{}", uuid::Uuid::new_v4().simple());
    let (dir, home) = files_and_notes_home(&secret);
    let (daemon, svc, root) = start(&home).await;
    grant(&svc, root, "files");
    let notes_cap = grant(&svc, root, "notes");
    let ((_, config), child) = root_and_child(dir.path(), &svc).await;
    // The capability is still checked when the nonce is good: the user
    // revoked it after the spawn.
    svc.revoke(Principal::User, notes_cap).unwrap();
    let (status, body) = launch(
        &daemon,
        "notes",
        &token_of(&config),
        Some(&nonce_of(&config, "notes")),
    )
    .await;
    assert_eq!(status, 403, "{body}");
    assert!(!body.contains(&secret));
    let token = token_of(&config);
    let nonce = nonce_of(&config, "files");
    let (status, body) = launch(&daemon, "files", &token, Some(&nonce)).await;
    assert_eq!(status, 200, "{body}");
    assert!(!body.contains(&secret), "{body}");
    let spec: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(spec["transport"], "proxy", "{spec}");
    assert_eq!(
        spec["url"],
        format!("http://{}/mcp-proxy/files", daemon.addr()).as_str()
    );
    let (status, body) = launch(&daemon, "files", &token, Some(&nonce)).await;
    assert_eq!(status, 403, "replayed: {body}");
    assert!(!body.contains(&secret));

    // The proxy that runs a stdio server checks the capability before it
    // starts anything: not for the revoked `notes`, nor for the child,
    // which holds none (had it started the server, the answer would be a
    // JSON-RPC error about the missing program, with status 200).
    let (_, child_config) = child;
    for (server, token) in [("notes", token.clone()), ("files", token_of(&child_config))] {
        let (status, body) = proxy_initialize(&daemon, server, &token).await;
        assert_eq!(status, 403, "{server}: {body}");
    }
    daemon.stop().await.unwrap();
}

/// POST an `initialize` to `/mcp-proxy/NAME`: status and body.
async fn proxy_initialize(daemon: &Daemon, name: &str, token: &str) -> (u16, String) {
    let resp = reqwest::Client::new()
        .post(format!("http://{}/mcp-proxy/{name}", daemon.addr()))
        .bearer_auth(token)
        .header("accept", "application/json, text/event-stream")
        .json(
            &serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "0"}}}),
        )
        .send()
        .await
        .unwrap();
    (resp.status().as_u16(), resp.text().await.unwrap())
}

/// What the fake HTTP MCP server saw: each request's headers.
type Seen = Arc<Mutex<Vec<http::HeaderMap>>>;

async fn fake_http_server() -> (String, Seen) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    let app = axum::Router::new().route(
        "/mcp",
        axum::routing::post(move |headers: http::HeaderMap, body: String| {
            let s = s.clone();
            async move {
                s.lock().unwrap().push(headers);
                (
                    [
                        ("content-type", "application/json"),
                        ("mcp-session-id", "sess-1"),
                    ],
                    format!("{{\"echo\":{body}}}"),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue9_item6_an_http_servers_secret_headers_stay_in_the_daemon() {
    let secret = format!("s3cr3t-{}", uuid::Uuid::new_v4().simple());
    let (upstream, seen) = fake_http_server().await;
    let (dir, home) = recording_home(|d| {
        std::fs::write(d.join("key"), &secret).unwrap();
        format!(
            "[secrets]\nk = {{ file = {:?} }}\n[mcp_servers.remote]\nurl = {upstream:?}\nheaders = {{ Authorization = \"Bearer ${{secret:k}}\" }}\n",
            d.join("key").display().to_string()
        )
    });
    let (daemon, svc, root) = start(&home).await;
    grant(&svc, root, "remote");
    let ((_, config), (_, child_config)) = root_and_child(dir.path(), &svc).await;
    let token = token_of(&config);

    // The launcher learns only the daemon's proxy, not the URL or headers.
    let (status, body) = launch(
        &daemon,
        "remote",
        &token,
        Some(&nonce_of(&config, "remote")),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        !body.contains(&secret) && !body.contains(&upstream),
        "{body}"
    );
    let spec: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(spec["transport"], "proxy");
    let proxy = spec["url"].as_str().unwrap().to_owned();
    assert_eq!(proxy, format!("http://{}/mcp-proxy/remote", daemon.addr()));

    // Through the proxy with the agent's token: the server gets the secret
    // header (and not the agent's token), the answer comes back.
    let client = reqwest::Client::new();
    let resp = client
        .post(&proxy)
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(resp.headers()["mcp-session-id"], "sess-1");
    // The guard forwards the message it parsed (re-encoded: the server
    // reads what was checked), so compare it as JSON.
    let echoed: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
    assert_eq!(
        echoed,
        serde_json::json!({"echo": {"jsonrpc": "2.0", "id": 1, "method": "ping"}})
    );
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1);
        assert_eq!(
            seen[0]["authorization"],
            format!("Bearer {secret}").as_str()
        );
        assert!(!format!("{:?}", seen[0]).contains(&token));
    }

    // A handler without the capability, or no token: refused, and the
    // server never sees the request.
    for bearer in [token_of(&child_config), "agt_nope".to_owned()] {
        let resp = client
            .post(&proxy)
            .bearer_auth(&bearer)
            .body("{}")
            .send()
            .await
            .unwrap();
        assert!(
            [401, 403].contains(&resp.status().as_u16()),
            "{}",
            resp.status()
        );
    }
    assert_eq!(seen.lock().unwrap().len(), 1);
    daemon.stop().await.unwrap();
}
