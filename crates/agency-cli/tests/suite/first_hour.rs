//! Issue 9 items 7–8 and issue 14 (a new user's first hour): the admin API
//! on the home's Unix socket only, agent-written text made harmless for the
//! terminal, and the CLI's ergonomics — each through the real binary
//! against a real daemon in a temporary home.

#![allow(clippy::unwrap_used)]

use crate::home;

use std::io::Read;
use std::net::TcpListener;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use home::TestHome;
use insta::assert_snapshot;
use serde_json::{Value, json};

/// One MCP tool call as an external agent (plain JSON over HTTP: the
/// streamable HTTP transport answers a POST with JSON or one SSE event).
pub(crate) fn mcp_call(addr: &str, token: &str, tool: &str, args: Value) -> Value {
    let http = reqwest::blocking::Client::new();
    let url = format!("http://{addr}/mcp");
    let post = |body: Value, session: Option<&str>| {
        let mut r = http
            .post(&url)
            .bearer_auth(token)
            .header("Accept", "application/json, text/event-stream")
            .json(&body);
        if let Some(s) = session {
            r = r.header("Mcp-Session-Id", s);
        }
        r.send().unwrap()
    };
    let init = post(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"}}}),
        None,
    );
    // The endpoint is stateless (issue 15): a session id only if given.
    let session = init
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    let _ = init.text();
    let _ = post(
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        session.as_deref(),
    )
    .text();
    let text = post(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
               "params": {"name": tool, "arguments": args}}),
        session.as_deref(),
    )
    .text()
    .unwrap();
    // An SSE reply may open with an empty priming event.
    let data = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .find(|d| !d.is_empty())
        .unwrap_or(text.as_str());
    let v: Value = serde_json::from_str(data).unwrap();
    assert_ne!(v["result"]["isError"], true, "{tool}: {v}");
    serde_json::from_str(v["result"]["content"][0]["text"].as_str().unwrap()).unwrap()
}

pub(crate) fn daemon_addr(home: &TestHome) -> String {
    let info: Value =
        serde_json::from_str(&std::fs::read_to_string(home.dir.join("daemon.json")).unwrap())
            .unwrap();
    info["addr"].as_str().unwrap().to_owned()
}

/// A listener that records every byte sent to it (and answers nothing).
fn recording_listener() -> (u16, Arc<Mutex<Vec<u8>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut conn) = conn else { return };
            let s = s.clone();
            std::thread::spawn(move || {
                let _ = conn.set_read_timeout(Some(Duration::from_secs(5)));
                let mut buf = [0u8; 4096];
                while let Ok(n) = conn.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    s.lock().unwrap().extend_from_slice(&buf[..n]);
                }
            });
        }
    });
    (port, seen)
}

#[test]
fn issue9_item7_a_stale_daemon_json_never_gets_the_admin_token() {
    let home = TestHome::new();
    home.init_with("");
    let token = std::fs::read_to_string(home.dir.join("admin.token")).unwrap();
    let token = token.trim();
    // A crashed daemon's address file, naming a port someone else holds.
    let (port, seen) = recording_listener();
    std::fs::write(
        home.dir.join("daemon.json"),
        format!(r#"{{"addr": "127.0.0.1:{port}", "pid": 1}}"#),
    )
    .unwrap();
    for args in [
        &["status"][..],
        &["handlers"],
        &["send", "hi"],
        &["shutdown"],
    ] {
        let r = home.run(args);
        assert_eq!(r.code, 1, "{args:?}: {r:?}");
    }
    // Nor does the MCP bridge send an agent token there.
    let token_file = home.dir.with_file_name("agent.token");
    std::fs::write(&token_file, "agency_0123\n").unwrap();
    let r = home.run_with_stdin(
        &["mcp-stdio", "--token-file", token_file.to_str().unwrap()],
        Some(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}\n"),
    );
    assert_eq!(r.code, 1, "{r:?}");
    // A socket left behind by a crashed daemon: nobody listens.
    {
        let _stale = std::os::unix::net::UnixListener::bind(home.dir.join("daemon.sock")).unwrap();
    }
    let r = home.run(&["handlers"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("no Agency daemon is running"), "{r:?}");
    std::thread::sleep(Duration::from_millis(200));
    let got = String::from_utf8_lossy(&seen.lock().unwrap()).into_owned();
    assert!(
        !got.contains(token),
        "the admin token reached a stranger: {got}"
    );
    assert!(
        !got.contains("agency_0123"),
        "an agent token reached a stranger: {got}"
    );
    assert!(got.is_empty(), "the CLI spoke to the TCP address: {got}");

    // The real daemon: the CLI works over the socket; TCP has no /v1 at
    // all, even with the admin token.
    std::fs::remove_file(home.dir.join("daemon.sock")).unwrap();
    let _serve = home.serve();
    let addr = daemon_addr(&home);
    let r = reqwest::blocking::Client::new()
        .get(format!("http://{addr}/v1/status"))
        .bearer_auth(token)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    let sock = home.dir.join("daemon.sock");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&sock).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(home.json(&["status"])["running"], true);
}

#[test]
fn issue9_item7_a_home_others_can_write_is_refused() {
    let home = TestHome::new();
    home.init_with("");
    let _serve = home.serve();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&home.dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let r = home.run(&["handlers"]);
    std::fs::set_permissions(&home.dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("writable by other users"), "{r:?}");
}

const NASTY_TITLE: &str = "Plan\u{1b}]52;c;ZXZpbA==\u{7}\u{1b}[2J\u{9b}2K\u{202e}gnp.exe";
const NASTY_BODY: &str =
    "line one\u{1b}]52;c;ZXZpbA==\u{7}\nsent message 1 to handler 2\r\u{1b}[1Aforged\u{202e}x";

fn assert_no_raw_controls(what: &str, s: &str) {
    for c in s.chars() {
        assert!(
            !(('\u{202a}'..='\u{202e}').contains(&c) || (c.is_control() && c != '\n')),
            "{what} printed a raw {c:?}: {s:?}"
        );
    }
}

#[test]
fn issue9_item8_agent_text_reaches_the_terminal_with_controls_visible() {
    let home = TestHome::new();
    home.init_with("");
    let _serve = home.serve();
    let root = home.root();
    let token = home.mint(&root);
    let addr = daemon_addr(&home);
    let created = mcp_call(
        &addr,
        &token,
        "outcome_create",
        json!({"title": NASTY_TITLE, "description": NASTY_BODY, "parents": [root]}),
    );
    let outcome = created["outcome"].as_str().unwrap().to_owned();
    mcp_call(
        &addr,
        &token,
        "mail_send",
        json!({"to": "user", "subject": NASTY_TITLE, "text": NASTY_BODY}),
    );
    for args in [
        &["outcomes"][..],
        &["outcome", "show", &outcome],
        &["inbox"],
        &["kb", "ls"],
        &["audit", &root],
        &["handlers"],
        &["agents"],
    ] {
        let out = home.ok(args);
        assert_no_raw_controls(&format!("{args:?}"), &out);
    }
    // JSON stays exact and parseable, with no raw control either.
    let raw = home.ok(&["--json", "inbox"]);
    assert_no_raw_controls("--json inbox", &raw);
    let v: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(v[0]["subject"], NASTY_TITLE);
    assert_eq!(v[0]["body"], NASTY_BODY);
    // The body's lines stay indented, so none looks like the CLI's own.
    let _redact = home.settings().bind_to_scope();
    assert_snapshot!(home.ok(&["inbox"]), @r"
    message  [UUID]
    from     handler [UUID]
    date     [TIME]
    subject  Plan\u{1b}]52;c;ZXZpbA==\u{7}\u{1b}[2J\u{9b}2K\u{202e}gnp.exe

      line one\u{1b}]52;c;ZXZpbA==\u{7}
      sent message 1 to handler 2\u{d}\u{1b}[1Aforged\u{202e}x
    ");
    // Errors quoting agent text are escaped as well.
    let r = home.run(&["outcome", "show", "\u{1b}[2J"]);
    assert_no_raw_controls("an error", &r.stderr);
}

#[test]
fn issue14_item3_rest_accepts_what_max_file_bytes_allows_and_says_why_not() {
    let home = TestHome::new();
    home.init_with("");
    let _serve = home.serve();
    let file = home.dir.with_file_name("big.txt");
    // 3 MiB: over axum's 2 MiB default, under the 8 MiB max_file_bytes.
    std::fs::write(&file, "x".repeat(3 << 20)).unwrap();
    let r = home.run(&["send", "--file", file.to_str().unwrap()]);
    assert_eq!(r.code, 0, "{r:?}");
    // Over the configured limit: the service's own message.
    std::fs::write(&file, "y".repeat((8 << 20) + 1)).unwrap();
    let r = home.run(&["send", "--file", file.to_str().unwrap()]);
    assert_eq!(r.code, 1);
    assert!(!r.stderr.contains("Failed to buffer"), "{r:?}");
    assert!(r.stderr.contains("8388608"), "{r:?}");
    // Far over: refused by the transport, in Agency's words. The daemon
    // answers before reading the whole body and closes the connection, so
    // the CLI may lose that answer in the race with its own write (under
    // load it once exited 0 in silence, taking the broken pipe on the
    // socket for a closed stdout); then it says what happened instead.
    std::fs::write(&file, "z".repeat(20 << 20)).unwrap();
    let r = home.run(&["send", "--file", file.to_str().unwrap()]);
    assert_eq!(r.code, 1, "{r:?}");
    let answered = "error: failed to read the request: its body is larger than 17825792 bytes, the limit that follows from limits.max_file_bytes = 8388608 in agency.toml; send less, or raise that limit\n";
    let lost = " bytes), which it does when a body is larger than the limit that follows from limits.max_file_bytes in agency.toml; send less, or raise that limit\n";
    assert!(
        r.stderr == answered
            || (r
                .stderr
                .starts_with("error: failed to send the request to the Agency daemon at ")
                && r.stderr.ends_with(lost)),
        "{r:?}"
    );
}

#[test]
fn issue14_item4_grants_on_undeclared_servers_and_repos_are_refused() {
    let home = TestHome::new();
    home.init_with(
        "[mcp_servers.files]\ncommand = \"mcp-files\"\n[mcp_servers.web]\nurl = \"http://127.0.0.1:9/mcp\"\n[repos]\nsite = \"/srv/site.git\"\n",
    );
    let _serve = home.serve();
    let root = home.root();
    let r = home.run(&["grant", &root, "mcp_server:github", "read"]);
    assert_eq!(r.code, 1);
    assert_snapshot!(r.stderr, @"error: failed to grant mcp_server:github: no such server in agency.toml (declared: files, web)");
    let r = home.run(&["grant", &root, "repo:other", "read"]);
    assert_eq!(r.code, 1);
    assert_snapshot!(r.stderr, @"error: failed to grant repo:other: no such repo in agency.toml (declared: site)");
    home.ok(&["grant", &root, "mcp_server:files", "read"]);
    home.ok(&["grant", &root, "repo:site", "read"]);
}

#[test]
fn issue10_item4_egress_is_granted_by_pattern_from_the_command_line() {
    let home = TestHome::new();
    home.init_with("");
    let _serve = home.serve();
    let root = home.root();
    home.ok(&["grant", &root, "egress:API.GitHub.com.", "read"]);
    home.ok(&["grant", &root, "egress:[::1]:8080", "read"]);
    let caps = home.ok(&["caps", &root]);
    assert!(caps.contains("egress:api.github.com"), "{caps}");
    assert!(caps.contains("egress:[::1]:8080"), "{caps}");
    let r = home.run(&["grant", &root, "egress:https://api.github.com", "read"]);
    assert_eq!(r.code, 1);
    assert_snapshot!(r.stderr, @r#"error: failed to grant: failed to parse egress pattern "https://api.github.com": write the host without a scheme, e.g. api.github.com or api.github.com:8443"#);
    let r = home.run(&["grant", &root, "egress:*", "read"]);
    assert_eq!(r.code, 1);
    assert_snapshot!(r.stderr, @r#"error: failed to grant: failed to parse egress pattern "*": a pattern for every host is not allowed; name the hosts, e.g. *.github.com"#);
}

#[test]
fn issue14_item5_empty_ids_are_usage_errors() {
    let home = TestHome::new();
    home.init_with("");
    for args in [
        &["tell", "", "x"][..],
        &["outcome", "show", ""],
        &["kb", "cat", ""],
        &["stop", ""],
        &["grant", "", "repo:x", "read"],
        &["token", "revoke", ""],
    ] {
        let r = home.run(args);
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        assert!(r.stderr.contains("a value is required"), "{args:?}: {r:?}");
        assert!(!r.stderr.contains("no such route"), "{args:?}: {r:?}");
    }
}

#[test]
fn issue14_item6_a_port_clash_prints_the_os_error_once() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let home = TestHome::new();
    home.init_with(&format!("[server]\nport = {port}\n"));
    let r = home.run(&["serve"]);
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stderr.matches("Address already in use").count(),
        1,
        "{r:?}"
    );
}

#[test]
fn issue14_item7_with_no_runtime_status_send_and_tell_say_no_agent_will_answer() {
    let home = TestHome::new();
    home.init_with("");
    let _serve = home.serve();
    let root = home.root();
    let _redact = home.settings().bind_to_scope();
    assert_snapshot!(home.ok(&["status"]), @r#"
    daemon            running
    address           http://[ADDR]
    pid               [PID]
    home              [TMP]/home
    version           0.1.0
    agent runtime     none (no agent will answer mail)
    agent sandbox     on
    root handler      [UUID]
    active handlers   1
    stalled handlers  0
    paused budgets    0
    live agents       0
    open outcomes     1
    KB files          3

    note: no agent will answer: agents.runtime is "none" in [TMP]/home/agency.toml, so the daemon starts no agents.
    Set runtime = "builtin" (an LLM API; see [agents.builtin]), "claude-code" or "command" under [agents]
    and restart the daemon (README.md, "Offline quickstart", needs no API key), or attach an MCP client
    with `agency token mint`.
    "#);
    assert_eq!(home.json(&["status"])["runtime"], "none");
    for args in [&["send", "hi"][..], &["tell", &root, "hi"]] {
        let r = home.run(args);
        assert_eq!(r.code, 0);
        assert!(r.stdout.starts_with("sent message"), "{r:?}");
        assert!(r.stderr.contains("no agent will answer"), "{r:?}");
    }
}

#[test]
fn issue14_item7_with_a_runtime_there_is_no_hint() {
    let home = TestHome::new();
    home.init_with("[agents]\nruntime = \"command\"\n[agents.command]\nprogram = \"true\"\n");
    let _serve = home.serve();
    let r = home.run(&["send", "hi"]);
    assert_eq!(r.code, 0);
    assert!(!r.stderr.contains("no agent will answer"), "{r:?}");
    assert!(home.ok(&["status"]).contains("agent runtime     command"));
}

#[test]
fn issue14_item8_a_stalled_handler_shows_stalled() {
    let home = TestHome::new();
    // An agent that exits at once, without progress: stalled after 2.
    home.init_with(
        "[agents]\nruntime = \"command\"\nstall_after_exits = 2\nrespawn_backoff_ms = 10\nmax_backoff_ms = 20\n[agents.command]\nprogram = \"true\"\n",
    );
    let _serve = home.serve();
    home.ok(&["send", "hi"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while home.json(&["handlers"])[0]["stalled"].is_null() {
        assert!(Instant::now() < deadline, "the handler never stalled");
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = home.ok(&["handlers"]);
    assert!(out.lines().nth(1).unwrap().contains(" stalled "), "{out}");
    assert!(out.contains("gets no agent until it has new mail"), "{out}");
    assert!(home.ok(&["status"]).contains("stalled handlers  1"));
}

#[test]
fn issue14_item9_shutdown_stops_the_daemon_gracefully() {
    let home = TestHome::new();
    home.init_with("");
    let mut serve = home.serve();
    let _redact = home.settings().bind_to_scope();
    let r = home.run(&["shutdown"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert_snapshot!(r.stdout, @"Agency daemon stopped (pid [PID])");
    // It has stopped when `shutdown` returns: nothing left behind.
    assert!(!home.dir.join("daemon.json").exists());
    assert!(!home.dir.join("daemon.sock").exists());
    assert!(serve.wait_exit().success());
    let log = std::fs::read_to_string(home.dir.with_file_name("serve.log")).unwrap();
    assert!(log.contains("shutting down (agency shutdown)"), "{log}");
    let r = home.run(&["shutdown"]);
    assert_eq!(r.code, 1);
    assert!(r.stderr.contains("no Agency daemon is running"), "{r:?}");
}

#[test]
fn issue14_item10_send_and_tell_read_text_from_a_file_or_stdin() {
    let home = TestHome::new();
    home.init_with("");
    let _serve = home.serve();
    let root = home.root();
    // Over the OS's 128 KiB limit on one argument.
    let big = "é".repeat(100_000);
    let r = home.run_with_stdin(
        &["send", "-", "--subject", "from stdin"],
        Some(big.as_bytes()),
    );
    assert_eq!(r.code, 0, "{r:?}");
    let file = home.dir.with_file_name("m.txt");
    std::fs::write(&file, "from a file\n").unwrap();
    home.ok(&[
        "tell",
        &root,
        "--file",
        file.to_str().unwrap(),
        "--subject",
        "file",
    ]);
    let kb = home.json(&["kb", "ls"]);
    let descriptions: Vec<&str> = kb
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f["description"].as_str())
        .collect();
    assert!(
        descriptions.iter().any(|d| d.ends_with("from stdin")),
        "{descriptions:?}"
    );
    assert!(
        descriptions.iter().any(|d| d.ends_with(": file")),
        "{descriptions:?}"
    );
    let r = home.run(&["send", "x", "--file", file.to_str().unwrap()]);
    assert_eq!(r.code, 2, "{r:?}");
    let r = home.run(&["send"]);
    assert_eq!(r.code, 2, "{r:?}");
}

#[test]
fn issue14_item11_tools_lists_every_mcp_tool_with_its_arguments() {
    let home = TestHome::new();
    let text = home.ok(&["tools"]);
    assert!(text.contains("kb_read\n"), "{text}");
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("file ") && l.contains("required")),
        "{text}"
    );
    let v: Value = serde_json::from_str(&home.ok(&["tools", "--json"])).unwrap();
    let tools = v.as_array().unwrap();
    assert!(tools.len() >= 20, "{v}");
    let read = tools.iter().find(|t| t["name"] == "kb_read").unwrap();
    assert_eq!(read["input_schema"]["type"], "object");
    // Issue 31's typed calls, with their arguments.
    assert!(
        text.contains("agent_call\n") && text.contains("agent_reply\n"),
        "{text}"
    );
    let required = |name: &str| -> Vec<String> {
        let t = tools.iter().find(|t| t["name"] == name).unwrap();
        let mut r: Vec<String> = t["input_schema"]["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect();
        r.sort();
        r
    };
    assert_eq!(required("agent_call"), ["input", "target", "verb"]);
    assert_eq!(required("agent_reply"), ["request_id"]);
    let call = tools.iter().find(|t| t["name"] == "agent_call").unwrap();
    for arg in ["wait", "steps", "within"] {
        assert!(
            call["input_schema"]["properties"][arg].is_object(),
            "{call}"
        );
    }
    let wait = tools.iter().find(|t| t["name"] == "mail_wait").unwrap();
    assert!(
        wait["input_schema"]["properties"]["conversation"].is_object(),
        "{wait}"
    );
    let format = home.ok(&["model-server", "--help-format"]);
    assert!(format.starts_with("# Script format"), "{format}");
    assert!(format.contains("\"scenarios\""), "{format}");
}

#[test]
fn issue14_item13_global_options_only_where_they_mean_something() {
    let home = TestHome::new();
    for (cmd, home_shown, json_shown) in [
        ("model-server", false, false),
        ("agent", false, false),
        ("mcp-launch", false, false),
        ("mcp-stdio", true, false),
        ("tools", false, true),
        ("status", true, true),
    ] {
        let help = home.ok(&[cmd, "--help"]);
        assert_eq!(help.contains("--home"), home_shown, "{cmd}: {help}");
        assert_eq!(help.contains("--json"), json_shown, "{cmd}: {help}");
    }
    let demo = home.ok(&["demo", "--help"]);
    assert!(!demo.contains("$AGENCY_HOME, else"), "{demo}");
    assert!(demo.contains("fresh temporary directory"), "{demo}");
    let r = home.run(&["--json", "model-server", "--help-format"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(r.stderr.contains("--json means nothing"), "{r:?}");
}

/// The README's offline quickstart, as written there: its script, its
/// `[agents.builtin]` block, `send`, and an answer in the inbox.
#[test]
fn issue14_item11_the_readme_offline_quickstart_answers() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let section = &readme[readme.find("### Offline quickstart").unwrap()..];
    let block = |lang: &str| -> String {
        let start = section.find(&format!("```{lang}\n")).unwrap() + lang.len() + 4;
        let end = start + section[start..].find("```").unwrap();
        section[start..end].to_owned()
    };
    let home = TestHome::new();
    home.ok(&["init"]);
    let script = home.dir.with_file_name("hello.json");
    std::fs::write(&script, block("json")).unwrap();
    let mut model = home
        .command(&["model-server", "--script", script.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut url = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(model.stdout.take().unwrap()),
        &mut url,
    )
    .unwrap();
    let toml = block("toml").replace("http://127.0.0.1:40123", url.trim());
    std::fs::write(home.dir.join("agency.toml"), toml).unwrap();
    let serve = home.serve();
    home.ok(&["send", "hello"]);
    let deadline = Instant::now() + Duration::from_secs(120);
    let inbox = loop {
        let v = home.json(&["inbox"]);
        if !v.as_array().unwrap().is_empty() {
            break v;
        }
        assert!(Instant::now() < deadline, "no answer in the inbox");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(inbox[0]["body"], "You wrote: hello");
    drop(serve);
    let _ = model.kill();
    let _ = model.wait();
}
