//! Issue 11 item 5, the manifest's `egress` enforced, end to end with real
//! processes: the daemon, the launcher `agency mcp-launch NAME` run as the
//! agent's MCP client runs it, and a Python server
//! (`tests/fixtures/fetch_mcp.py`) whose `fetch` tool GETs a URL through
//! the proxy its environment names. Two loopback HTTP servers stand for
//! the internet: `allowed` (in the manifest's `egress`) and `other` (in
//! the agent's own `egress` grant only).
//!
//! - The server reaches `allowed` through the daemon's egress proxy with
//!   its own key; `other` is refused (403) and never sees a connection,
//!   though the agent's handler holds `egress:` for it; both are in the
//!   handler's audit log, naming the server.
//! - Attacks: the agent reads the server's key from its environment and
//!   uses it — it reaches the manifest's hosts and nothing else; a made-up
//!   key, or the agent's token presented as a server's, gets 407; the
//!   agent's token still reaches only the agent's own grants.
//! - A declared name that resolves to a local address is refused.
//! - A server without a manifest `egress` list gets no proxy at all.

#![allow(clippy::unwrap_used)]

use crate::agent_story;
use crate::mcp_stdio;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_story::{Story, agency, json};
use base64::Engine as _;
use mcp_stdio::Client;
use serde_json::{Value, json};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/fetch_mcp.py"
);

/// A loopback HTTP server standing for a host on the internet: counts
/// connections, keeps each request head, answers 200 `seen PATH`.
#[derive(Clone, Default)]
struct External {
    connections: Arc<AtomicUsize>,
    heads: Arc<Mutex<Vec<String>>>,
}

impl External {
    fn start() -> (External, u16) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let ext = External::default();
        let e = ext.clone();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { continue };
                e.connections.fetch_add(1, Ordering::SeqCst);
                let mut head = Vec::new();
                let mut b = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && s.read(&mut b).unwrap_or(0) == 1 {
                    head.push(b[0]);
                }
                let head = String::from_utf8_lossy(&head).into_owned();
                let path = head.split(' ').nth(1).unwrap_or("").to_owned();
                e.heads.lock().unwrap().push(head);
                let body = format!("seen {path}");
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        (ext, port)
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// Start the launcher entry `name` and list its tools (which pins them),
/// as the agent's MCP client would.
fn launch(config: &Value, name: &str) -> (std::process::Child, Client) {
    let (child, mut c) = mcp_stdio::launch(config, name);
    let tools = c.tools();
    assert_eq!(tools.len(), 2, "{tools:?}");
    (child, c)
}

/// A tool call's structured result.
fn call(c: &mut Client, tool: &str, args: Value) -> Value {
    c.call(tool, args)["structuredContent"].clone()
}

/// The one fixture server running (the daemon runs it, issue 27): its
/// environment, as the test (root, unconfined) reads it. The agent cannot
/// (`daemon_walls.rs`).
fn server_env() -> Vec<(String, String)> {
    let pid = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .find(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains("fetch_mcp.py"))
        })
        .expect("the daemon runs the server");
    std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap()
        .split(|b| *b == 0)
        .filter_map(|kv| {
            let kv = String::from_utf8_lossy(kv);
            let (k, v) = kv.split_once('=')?;
            Some((k.to_owned(), v.to_owned()))
        })
        .collect()
}

/// GET `url` through the proxy at `proxy` with Basic `user:pass`: the
/// status.
fn via_proxy(proxy: &str, user: &str, pass: &str, url: &str) -> u16 {
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
    let mut s = TcpStream::connect(proxy).unwrap();
    write!(
        s,
        "GET {url} HTTP/1.1\r\nHost: x\r\nProxy-Authorization: Basic {auth}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.split(' ').nth(1).unwrap().parse().unwrap()
}

/// The summaries of the handler's audit log that record egress.
fn egress_log(story: &Story, handler: &str) -> Vec<String> {
    json(&story.home, &["audit", &handler[..8]])
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["summary"].as_str())
        .filter(|s| s.starts_with("egress to "))
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue11_item5_a_servers_manifest_egress_is_its_only_way_out() {
    let (allowed, a_port) = External::start();
    let (other, o_port) = External::start();
    let out = tempfile::tempdir().unwrap();
    let config_file = out.path().join("mcp.json");
    let script = format!(
        "cp \"$AGENCY_MCP_CONFIG\" {0:?}.tmp; mv {0:?}.tmp {0:?}; exec sleep 300",
        config_file.display().to_string()
    );
    let cfg = format!(
        r#"[agents]
runtime = "command"
agency_program = {:?}
[agents.command]
program = "sh"
args = ["-c", {script:?}]
[mcp_servers.web]
command = "python3"
args = [{FIXTURE:?}]
[mcp_servers.web.manifest]
allow_unlisted = true
egress = ["127.0.0.1:{a_port}", "localhost:{a_port}"]
[mcp_servers.plain]
command = "python3"
args = [{FIXTURE:?}]
{}"#,
        agent_story::BIN,
        agency_testkit::sandbox::sandbox_toml(&[out.path()])
    );
    let story = Story::start_with_policy(
        &cfg,
        Duration::from_secs(60),
        Some(agent_story::WALLS_ONLY_POLICY),
    )
    .await;
    let root = json(&story.home, &["handlers"])[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    // The agent's own grant: `other`, which the server must not reach.
    for (resource, level) in [
        ("mcp_server:web", "read"),
        ("mcp_server:plain", "read"),
        (&format!("egress:127.0.0.1:{o_port}") as &str, "read"),
    ] {
        let (code, _, err) = agency(&story.home, &["grant", &root, resource, level]);
        assert_eq!(code, 0, "{err}");
    }
    let (code, _, err) = agency(&story.home, &["send", "go"]);
    assert_eq!(code, 0, "{err}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let config = loop {
        if let Ok(t) = std::fs::read_to_string(&config_file)
            && let Ok(v) = serde_json::from_str::<Value>(&t)
            && v["mcpServers"]["plain"].is_object()
        {
            break v;
        }
        assert!(Instant::now() < deadline, "no agent; log:\n{}", story.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let token = config["mcpServers"]["web"]["env"]["AGENCY_TOKEN"]
        .as_str()
        .unwrap()
        .to_owned();

    let (mut web, mut c) = tokio::task::block_in_place(|| launch(&config, "web"));
    // The manifest's host: reached, through the proxy, which removed the
    // server's credential on the way.
    let a_url = format!("http://127.0.0.1:{a_port}/data");
    let got = tokio::task::block_in_place(|| call(&mut c, "fetch", json!({ "url": a_url })));
    assert_eq!(got["status"], 200, "{got}");
    assert_eq!(got["body"], "seen /data", "{got}");
    let head = allowed.heads.lock().unwrap()[0].to_ascii_lowercase();
    assert!(!head.contains("proxy-authorization"), "{head}");
    // Another port: refused, though the agent's handler holds it.
    let o_url = format!("http://127.0.0.1:{o_port}/leak");
    let got = tokio::task::block_in_place(|| call(&mut c, "fetch", json!({ "url": o_url })));
    assert_eq!(got["status"], 403, "{got}");
    assert!(
        got["body"]
            .as_str()
            .unwrap()
            .contains("manifest of MCP server web declares no egress"),
        "{got}"
    );
    assert_eq!(other.connections(), 0, "the refused host saw nothing");
    let log = egress_log(&story, &root);
    assert_eq!(log.len(), 2, "{log:?}");
    assert_eq!(
        log[0],
        format!(
            "egress to 127.0.0.1:{a_port} by MCP server web allowed by its manifest (egress 127.0.0.1:{a_port})"
        )
    );
    assert!(
        log[1].starts_with(&format!("egress to 127.0.0.1:{o_port} refused: "))
            && log[1].contains("MCP server web"),
        "{log:?}"
    );

    // The server's proxy variables.
    let env = server_env();
    let var = |k: &str| {
        env.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let url = var("HTTPS_PROXY");
    for k in ["HTTP_PROXY", "http_proxy", "https_proxy"] {
        assert_eq!(var(k), url, "{k}");
    }
    assert_eq!(var("NO_PROXY"), "127.0.0.1,localhost,::1");
    assert!(
        !url.contains(&token),
        "the agent's token is not the server's"
    );
    let rest = url.strip_prefix("http://mcp:").unwrap();
    let (key, proxy) = rest.split_once('@').unwrap();
    assert!(key.starts_with("age_"), "{url}");

    // Were the key to leak to the agent, it would reach what the server
    // may, and nothing more.
    let status = |user: &str, pass: &str, url: &str| {
        tokio::task::block_in_place(|| via_proxy(proxy, user, pass, url))
    };
    assert_eq!(status("mcp", key, &o_url), 403);
    assert_eq!(other.connections(), 0);
    assert_eq!(status("mcp", key, &a_url), 200);
    // A made-up key, or the agent's token as a server's: no credential.
    assert_eq!(status("mcp", "age_made_up", &a_url), 407);
    assert_eq!(status("mcp", &token, &o_url), 407);
    // The key as an agent token: not one.
    assert_eq!(status("agent", key, &a_url), 407);
    // The agent's token: its own grants, not the manifest's.
    assert_eq!(status("agent", &token, &a_url), 403);
    assert_eq!(status("agent", &token, &o_url), 200);
    assert_eq!(other.connections(), 1);
    let log = egress_log(&story, &root);
    assert_eq!(log.len(), 6, "{log:?}");
    assert!(
        log[4].contains("refused: no egress capability matches"),
        "{log:?}"
    );
    assert!(log[5].contains("allowed by capability"), "{log:?}");

    // A declared host *name* that resolves to a local address is refused,
    // as a granted one is; the address as written (above) is not.
    let local = format!("http://localhost:{a_port}/db");
    let got = tokio::task::block_in_place(|| call(&mut c, "fetch", json!({ "url": local })));
    assert_eq!(got["status"], 403, "{got}");
    assert!(
        got["body"].as_str().unwrap().contains("a local address"),
        "{got}"
    );
    assert_eq!(allowed.connections(), 2, "{:?}", allowed.heads);
    let log = egress_log(&story, &root);
    assert!(
        log[6].starts_with(&format!(
            "egress to localhost:{a_port} refused: localhost resolves to"
        )),
        "{log:?}"
    );

    drop(c);
    let _ = tokio::task::block_in_place(|| web.wait());

    // A server without a manifest egress list gets no proxy.
    let (mut plain, mut c) = tokio::task::block_in_place(|| launch(&config, "plain"));
    let got = tokio::task::block_in_place(|| call(&mut c, "proxy", json!({})));
    assert_eq!(got["proxy"], Value::Null, "{got}");
    drop(c);
    let _ = tokio::task::block_in_place(|| plain.wait());
    story.stop();
}
