//! Issue 9 item 9: reading a full inbox does not make the daemon allocate
//! in proportion to it. A boss (the root handler) gets 1,000 messages of
//! the maximum size and reads its whole inbox over MCP from the real
//! `agency serve`; the daemon's peak resident memory (VmHWM) rises by less
//! than a small bound while it does.
//!
//! The maximum file size is set to 1 MiB for this test (the default is
//! 8 MiB): 1,000 distinct 1 MiB bodies are 1 GiB of blobs, written in well
//! under a minute in a debug build on 2 cores, where 8 GiB would take
//! minutes and the disk space of a CI runner. The bound (64 MiB) is far
//! below what inlining the bodies would take (at least 1 GiB for one page
//! of 1,000, or 200 MiB for a default page of 200), so the test still fails
//! if bodies are loaded into a response.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agency_core::{MailTarget, Principal};
use agency_service::MailBody;
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_agency");
const MESSAGES: usize = 1000;
const MAX_FILE: usize = 1024 * 1024;
const BOUND: u64 = 64 * 1024 * 1024;

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn command(tmp: &std::path::Path, home: &std::path::Path, args: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.args(args)
        .env("AGENCY_HOME", home)
        .env("HOME", tmp.join("user"))
        .env_remove("RUST_LOG")
        .env("AGENCY_WIDE", "1")
        .stdin(Stdio::null());
    c
}

fn ok(tmp: &std::path::Path, home: &std::path::Path, args: &[&str]) -> String {
    let out = command(tmp, home, args).output().unwrap();
    assert!(
        out.status.success(),
        "agency {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Peak resident set of a process, in bytes.
fn vm_hwm(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .expect("VmHWM in /proc/PID/status");
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap();
    kb * 1024
}

async fn call(client: &RunningService<RoleClient, ()>, tool: &str, args: Value) -> Value {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(args);
    let r = tokio::time::timeout(Duration::from_secs(60), client.call_tool(params))
        .await
        .expect("tool call timed out")
        .expect("tool call");
    let text: String = r
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect();
    assert_ne!(r.is_error, Some(true), "{tool}: {text}");
    serde_json::from_str(&text).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue9_item9_reading_a_full_inbox_keeps_daemon_memory_bounded() {
    let tmp = tempfile::tempdir().unwrap();
    let home_dir: PathBuf = tmp.path().join("home");
    ok(tmp.path(), &home_dir, &["init"]);
    let cfg_path = home_dir.join("agency.toml");
    let cfg = std::fs::read_to_string(&cfg_path).unwrap();
    let limited = cfg.replace(
        "max_file_bytes = 8388608",
        &format!("max_file_bytes = {MAX_FILE}"),
    );
    assert_ne!(cfg, limited, "the template sets limits.max_file_bytes");
    std::fs::write(&cfg_path, limited).unwrap();

    // Fill the root handler's inbox before the daemon starts: the user
    // writes 1,000 distinct messages of the maximum size.
    let home = agency_config::Home::new(&home_dir);
    let root = tokio::task::spawn_blocking(move || {
        let svc = home.open_service().unwrap();
        let root = match svc.root_handler().unwrap() {
            Some(r) => r,
            None => svc.bootstrap().unwrap(),
        };
        for i in 0..MESSAGES {
            let mut text = format!("message {i:04} of {MESSAGES}\n");
            text.push_str(&"m".repeat(MAX_FILE - text.len()));
            svc.mail_send(
                Principal::User,
                MailTarget::Handler(root),
                &MailBody::Text {
                    subject: None,
                    text,
                },
            )
            .unwrap();
        }
        root
    })
    .await
    .unwrap();

    let log = std::fs::File::create(tmp.path().join("serve.log")).unwrap();
    let child = command(tmp.path(), &home_dir, &["serve"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let daemon = Daemon(child);
    let deadline = Instant::now() + Duration::from_secs(120);
    while !home_dir.join("daemon.json").exists()
        || !command(tmp.path(), &home_dir, &["status"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap()
            .success()
    {
        assert!(Instant::now() < deadline, "the daemon did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let info: Value =
        serde_json::from_str(&std::fs::read_to_string(home_dir.join("daemon.json")).unwrap())
            .unwrap();
    let url = format!("http://{}/mcp", info["addr"].as_str().unwrap());
    let token = ok(
        tmp.path(),
        &home_dir,
        &["token", "mint", "--handler", &root.to_string()],
    )
    .trim()
    .to_owned();
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token);
    let client = ().serve(StreamableHttpClientTransport::from_config(config)).await.unwrap();

    // Baseline: the daemon running, connected, having served one page.
    let first = call(&client, "mail_inbox", json!({ "limit": 1 })).await;
    assert_eq!(first["messages"].as_array().unwrap().len(), 1);
    let pid = daemon.0.id();
    let baseline = vm_hwm(pid);

    // The boss reads its whole inbox, pages as large as it may ask for.
    let mut seen = BTreeSet::new();
    let mut after: Option<String> = None;
    let mut pages = 0;
    loop {
        let mut args = json!({ "limit": 1000 });
        if let Some(a) = &after {
            args["after"] = json!(a);
        }
        let page = call(&client, "mail_inbox", args).await;
        for m in page["messages"].as_array().unwrap() {
            assert_eq!(m["body_truncated"], true, "{m}");
            assert_eq!(m["body_size"], MAX_FILE, "{m}");
            assert!(m["body"].is_null(), "a 1 MiB body is never inline");
            assert!(
                seen.insert(m["id"].as_str().unwrap().to_owned()),
                "listed twice"
            );
        }
        pages += 1;
        match page["next_after"].as_str() {
            Some(n) => after = Some(n.to_owned()),
            None => break,
        }
    }
    assert_eq!(seen.len(), MESSAGES);
    assert!(
        pages >= 2,
        "a page is bounded in bytes, so 1,000 envelopes take more than one"
    );

    // A body given as a reference is read on its own.
    let page = call(&client, "mail_inbox", json!({ "limit": 1 })).await;
    let file = page["messages"][0]["file"].as_str().unwrap().to_owned();
    let body = call(&client, "kb_read", json!({ "file": file })).await;
    assert!(body["content"].as_str().unwrap().starts_with("message "));

    let peak = vm_hwm(pid);
    let grew = peak.saturating_sub(baseline);
    assert!(
        grew < BOUND,
        "the daemon's peak memory grew by {} MiB (from {} MiB) reading {MESSAGES} messages of {} MiB",
        grew >> 20,
        baseline >> 20,
        MAX_FILE >> 20
    );
    client.cancel().await.unwrap();
}
