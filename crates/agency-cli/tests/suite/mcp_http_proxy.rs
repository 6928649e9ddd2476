//! Issue 9 item 6, end to end with real processes: an HTTP extra MCP
//! server whose header carries a secret is reached through the daemon. The
//! agent (a `command` script) records its MCP configuration; the test then
//! runs the launcher entry exactly as the agent's MCP client would
//! (`agency mcp-launch web`, stdio JSON-RPC). The launcher bridges to the
//! daemon's `/mcp-proxy/web`; the server (a Python fixture) receives the
//! secret header, never the agent's token; the secret is in no file of the
//! home and not in the launcher's environment.

#![allow(clippy::unwrap_used)]

use crate::agent_story;
use crate::home;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agent_story::{Story, agency, json};
use home::spawn_piped;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../tests/fixtures/echo_mcp_http.py"
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue9_item6_an_http_server_is_reached_through_the_daemon_with_its_secret_header() {
    let mut server = Command::new("python3")
        .arg(FIXTURE)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut url = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    let url = url.trim().to_owned();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");

    let out = tempfile::tempdir().unwrap();
    let secret = format!("s3cr3t-{}", uuid::Uuid::new_v4().simple());
    let key = out.path().join("key");
    std::fs::write(&key, &secret).unwrap();
    let config_file = out.path().join("mcp.json");
    let script = format!(
        "cp \"$AGENCY_MCP_CONFIG\" {0:?}.tmp; mv {0:?}.tmp {0:?}; exec sleep 300",
        config_file.display().to_string()
    );
    let cfg = format!(
        "[agents]\nruntime = \"command\"\nagency_program = {:?}\n[agents.command]\nprogram = \"sh\"\nargs = [\"-c\", {script:?}]\n[secrets]\nk = {{ file = {:?} }}\n[mcp_servers.web]\nurl = {url:?}\nheaders = {{ X-Echo-Key = \"${{secret:k}}\" }}\n{}",
        agent_story::BIN,
        key.display().to_string(),
        // The agent (confined) copies its MCP configuration out for the test.
        agency_testkit::sandbox::sandbox_toml(&[out.path()])
    );
    let story = Story::start(&cfg, Duration::from_secs(60)).await;
    let root = json(&story.home, &["handlers"])[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (code, _, err) = agency(&story.home, &["grant", &root, "mcp_server:web", "read"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = agency(&story.home, &["send", "go"]);
    assert_eq!(code, 0, "{err}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let config: serde_json::Value = loop {
        if let Ok(t) = std::fs::read_to_string(&config_file) {
            break serde_json::from_str(&t).unwrap();
        }
        assert!(Instant::now() < deadline, "no agent; log:\n{}", story.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(!config.to_string().contains(&secret));
    assert!(
        !config.to_string().contains(&url),
        "the URL stays in the daemon"
    );

    // Run the launcher entry as the agent's MCP client would.
    let entry = &config["mcpServers"]["web"];
    let mut launcher = Command::new(entry["command"].as_str().unwrap());
    launcher
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap());
    for a in entry["args"].as_array().unwrap() {
        launcher.arg(a.as_str().unwrap());
    }
    for (k, v) in entry["env"].as_object().unwrap() {
        launcher.env(k, v.as_str().unwrap());
    }
    let mut child = spawn_piped(&mut launcher);
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut call = |msg: serde_json::Value, answer: bool| -> Option<serde_json::Value> {
        writeln!(stdin, "{msg}").unwrap();
        stdin.flush().unwrap();
        answer.then(|| serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap())
    };
    let init = call(
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}}),
        true,
    )
    .unwrap();
    assert_eq!(
        init["result"]["serverInfo"]["name"], "echo-http-fixture",
        "{init}"
    );
    call(
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        false,
    );
    // Tools are listed (and pinned by the daemon's guard) before a call.
    let listed = call(
        serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}),
        true,
    )
    .unwrap();
    assert_eq!(listed["result"]["tools"][0]["name"], "reveal", "{listed}");
    let reveal = call(
        serde_json::json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "reveal", "arguments": {}}}),
        true,
    )
    .unwrap();
    let report: serde_json::Value =
        serde_json::from_str(reveal["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    let reversed: String = secret.chars().rev().collect();
    assert_eq!(report["reversed_key"], reversed.as_str(), "{reveal}");
    assert_eq!(
        report["authorization_seen"], false,
        "the agent's token was forwarded"
    );
    // The launcher's own environment never held the secret.
    let environ = std::fs::read(format!("/proc/{}/environ", child.id())).unwrap();
    assert!(!String::from_utf8_lossy(&environ).contains(&secret));
    drop(stdin);
    let _ = child.kill();
    let _ = child.wait();

    // A second launch of the same spawn's entry is refused (single use).
    let relaunch = launcher.stdin(Stdio::null()).output().unwrap();
    assert!(!relaunch.status.success());
    assert!(
        String::from_utf8_lossy(&relaunch.stderr).contains("nonce"),
        "{}",
        String::from_utf8_lossy(&relaunch.stderr)
    );
    story.stop();
    let _ = server.kill();
    let _ = server.wait();
}
