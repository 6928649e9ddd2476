//! Issue 9 item 16, end to end with the real binary: `agency serve` writes
//! its log to `logs/daemon.log` in the home (the level from `agency.toml`),
//! with a span per HTTP request and per service operation, rmcp's warnings
//! included and never a token; an agent's stdout/stderr is kept with its
//! run, bounded, redacted and shown escaped by `agency logs`.

#![allow(clippy::unwrap_used)]

use crate::agent_story;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

use agent_story::{agency, init_home, json, serve_command, terminate};
use serde_json::Value;

/// A daemon on a fresh home with `config` as its `agency.toml`, started
/// without `RUST_LOG` so the configured level decides.
struct Served {
    _tmp: tempfile::TempDir,
    home: PathBuf,
    serve: Child,
}

impl Served {
    fn start(config: &str) -> Served {
        let (tmp, home) = init_home(config);
        let stderr = std::fs::File::create(tmp.path().join("serve.stderr")).unwrap();
        let serve = serve_command(&home, stderr)
            .env_remove("RUST_LOG")
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !home.join("daemon.json").exists() {
            assert!(Instant::now() < deadline, "the daemon did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Served {
            _tmp: tmp,
            home,
            serve,
        }
    }

    fn addr(&self) -> String {
        let info: Value =
            serde_json::from_slice(&std::fs::read(self.home.join("daemon.json")).unwrap()).unwrap();
        info["addr"].as_str().unwrap().to_owned()
    }

    fn stop(&mut self) {
        terminate(&mut self.serve);
    }

    fn daemon_log(&self) -> String {
        std::fs::read_to_string(self.home.join("logs/daemon.log")).unwrap()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.serve.kill();
        let _ = self.serve.wait();
    }
}

/// Every file under `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            found.extend(files_containing(&p, needle));
        } else if std::fs::read(&p).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle)) {
            found.push(p.display().to_string());
        }
    }
    found
}

#[test]
fn issue9_item16_the_daemon_logs_requests_operations_and_rmcp_warnings_never_a_token() {
    let mut d = Served::start("[log]\nlevel = \"info,agency_service=debug\"\n");
    let (code, _, err) = agency(&d.home, &["send", "Hello, root"]);
    assert_eq!(code, 0, "{err}");
    let root = json(&d.home, &["status"])["root_handler"]
        .as_str()
        .unwrap()
        .to_owned();
    let (code, agent_token, err) = agency(&d.home, &["token", "mint", "--handler", &root]);
    assert_eq!(code, 0, "{err}");
    let agent_token = agent_token.trim().to_owned();

    // An MCP client whose protocol-version header contradicts its
    // initialize request: rmcp refuses it and warns.
    let res = reqwest::blocking::Client::new()
        .post(format!("http://{}/mcp", d.addr()))
        .bearer_auth(&agent_token)
        .header("Accept", "application/json, text/event-stream")
        .header("Content-Type", "application/json")
        .header("MCP-Protocol-Version", "2024-11-05")
        .body(
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        )
        .send()
        .unwrap();
    assert!(res.status().is_client_error(), "{}", res.status());
    d.stop();

    let log = d.daemon_log();
    let line = |needles: &[&str]| {
        log.lines()
            .find(|l| needles.iter().all(|n| l.contains(n)))
            .unwrap_or_else(|| panic!("no line with {needles:?} in the log:\n{log}"))
            .to_owned()
    };
    line(&["INFO", "daemon listening"]);
    // The request's span, with its status and latency.
    line(&[
        "http{method=POST path=/v1/mail}",
        "request finished",
        "status=200",
        "latency_us=",
    ]);
    // The service operation's span, inside the request's.
    line(&[
        "DEBUG http{method=GET path=/v1/status}:op{name=root_handler kind=read}",
        "done",
    ]);
    // rmcp's warning, which used to vanish.
    line(&["WARN", "rmcp", "MCP-Protocol-Version header does not match"]);
    // The token check is an operation of that request.
    line(&["http{method=POST path=/mcp}:op{name=token_authenticate kind=read}"]);
    // The refused MCP request is in the log too, without its headers.
    line(&["http{method=POST path=/mcp}", "status=4"]);
    let admin = std::fs::read_to_string(d.home.join("admin.token")).unwrap();
    for (what, token) in [("admin", admin.trim()), ("agent", agent_token.as_str())] {
        assert!(token.len() > 20);
        assert!(!log.contains(token), "the {what} token is in the log");
    }
}

/// The `command` runtime's agent: prints to stdout and stderr (a terminal
/// escape, its own token), floods, and exits without progress.
const AGENT: &str = r#"#!/bin/sh
echo "hello from stdout"
printf 'evil \033]52;c;ZXZpbA==\007 \033[2J done\n' >&2
echo "my token is $AGENCY_TOKEN"
printf '%s' "$AGENCY_TOKEN" > "$SEEN_TOKEN"
i=0
while [ $i -lt 20000 ]; do
  echo "filler line $i"
  i=$((i+1))
done
echo "the end, on stderr" >&2
exit 3
"#;

#[test]
fn issue9_item16_agent_output_is_kept_with_its_run_bounded_redacted_and_shown_escaped() {
    // Apart from the home: the confined agent writes `seen-token` there.
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("agent.sh");
    let seen = tmp.path().join("seen-token");
    std::fs::write(
        &script,
        AGENT.replace("$SEEN_TOKEN", seen.to_str().unwrap()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = format!(
        "[agents]\nruntime = \"command\"\nstall_after_exits = 1\n[agents.command]\nprogram = \"{}\"\n[log]\nagent_log_head_bytes = 1024\nagent_log_tail_bytes = 4096\n{}",
        script.display(),
        agency_testkit::sandbox::sandbox_toml(&[tmp.path()])
    );
    let mut d = Served::start(&config);
    let (code, _, err) = agency(&d.home, &["send", "Please work"]);
    assert_eq!(code, 0, "{err}");
    let deadline = Instant::now() + Duration::from_secs(60);
    let agent = loop {
        let agents = json(&d.home, &["agents"]);
        if let Some(a) = agents["recent"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| !a["ended_at"].is_null())
        {
            break a["id"].as_str().unwrap().to_owned();
        }
        assert!(Instant::now() < deadline, "the agent did not end: {agents}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let token = std::fs::read_to_string(&seen).unwrap();
    assert!(token.len() > 20);

    let (code, out, err) = agency(&d.home, &["logs", &agent[..8]]);
    assert_eq!(code, 0, "{err}");
    // Both streams, in order; the flood cut in the middle, and marked.
    assert!(out.starts_with("hello from stdout\n"), "{out}");
    assert!(
        out.contains("evil \\u{1b}]52;c;ZXZpbA==\\u{7} \\u{1b}[2J done\n"),
        "{out}"
    );
    assert!(
        !out.contains('\x1b') && !out.contains('\x07'),
        "raw escapes reach the terminal"
    );
    assert!(out.contains("my token is [redacted]\n"), "{out}");
    assert!(out.contains(" bytes of output cut here"), "{out}");
    assert!(
        out.contains("filler line 19999\nthe end, on stderr\n"),
        "{out}"
    );
    assert!(!out.contains("filler line 10000\n"), "the middle is cut");
    assert!(
        out.len() < 1024 + 4096 + 200,
        "bounded: {} bytes",
        out.len()
    );

    let v = json(&d.home, &["logs", &agent]);
    assert_eq!(v["agent"], agent.as_str());
    assert_eq!(v["captured"], true);
    assert!(
        v["text"].as_str().unwrap().contains("\u{1b}]52;"),
        "JSON keeps the bytes"
    );

    d.stop();
    // The run's token is nowhere in the home: not in the stored log, not
    // in the daemon's log.
    let leaks = files_containing(&d.home, token.as_bytes());
    assert!(leaks.is_empty(), "the agent's token is in {leaks:?}");
    assert!(d.daemon_log().contains("agent ended"));
}
