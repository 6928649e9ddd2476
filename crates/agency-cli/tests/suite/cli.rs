//! The real `agency` binary against a real daemon (`agency serve` as a
//! subprocess) in a temporary home, with inline snapshots of what the user
//! sees. Ids, times, ports, pids, paths, hashes and tokens are redacted.

#![allow(clippy::unwrap_used)]

use crate::home;

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use home::{TestHome, spawn_piped};
use insta::assert_snapshot;
use serde_json::Value;

#[test]
fn the_user_drives_a_daemon_from_the_command_line() {
    let home = TestHome::new();
    let _redact = home.settings().bind_to_scope();

    let init = home.ok(&["init"]);
    assert_snapshot!(init, @"
    Initialized Agency home at [TMP]/home
    root handler  [UUID]
    ");
    let root = init.split_whitespace().last().unwrap().to_owned();
    let root8 = &root[..8];
    assert_snapshot!(home.ok(&["init"]), @"
    Agency home at [TMP]/home already exists; nothing changed
    root handler  [UUID]
    ");

    // No daemon yet: commands say so and how to start one.
    let r = home.run(&["handlers"]);
    assert_eq!(r.code, 1);
    assert_eq!(r.stdout, "");
    assert_snapshot!(r.stderr, @"error: no Agency daemon is running for home [TMP]/home; start one with `agency serve` (or `agency --home [TMP]/home serve`)");
    let r = home.run(&["status"]);
    assert_eq!(r.code, 1);
    assert_snapshot!(r.stdout, @"
    daemon  not running
    home    [TMP]/home

    Start one with `agency serve` (or `agency --home [TMP]/home serve`).
    ");

    let daemon = home.serve();
    // The running daemon names the root; the CLI leaves its store alone.
    assert_snapshot!(home.ok(&["init"]), @"
    Agency home at [TMP]/home already exists; nothing changed
    root handler  [UUID]
    ");

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
    assert_snapshot!(home.ok(&["send", "hello"]), @"sent message [UUID] to handler [UUID]");
    assert_snapshot!(home.ok(&["handlers"]), @"
    HANDLER                               STATUS  AGENT  UNACKED  WORK  TITLE
    [UUID]  active  -      1        yes   Help the user accomplish all their work

    UNACKED: delivered messages not yet acknowledged. While a handler has any, Agency
    starts a new agent for it whenever none is running, and each new agent reads them
    again; an agent acknowledges a message with mail_ack once it has processed it.
    ");
    assert_snapshot!(home.ok(&["outcomes"]), @"
    OUTCOME                                   STATUS  PRIORITY  RESPONSIBLE                           TITLE
    [UUID]      open    0         [UUID]  Help the user accomplish all their work
    └── [UUID]  open    100       [UUID]  Process inbox
    ");
    assert_snapshot!(home.ok(&["outcome", "show", root8]), @"
    outcome      [UUID]
    title        Help the user accomplish all their work
    status       open
    priority     0
    kind         perpetual root
    responsible  handler [UUID]
    root of      handler [UUID]
    your access  write
    created      [TIME]
    updated      [TIME]

    Description:
      The perpetual root outcome. The user is its boss; every other outcome serves it.

    Parents:
      (none)

    Children:
      OUTCOME                               STATUS  PRIORITY  TITLE
      [UUID]  open    100       Process inbox

    History:
      TIME                      BY           ACTION          DETAIL
      [TIME]  user/Agency  system:created  bootstrap
    ");
    assert_snapshot!(home.ok(&["kb", "ls"]), @"
    FILE                                  KIND       ACCESS  VERSION  DESCRIPTION
    [UUID]  audit_log  read    2        Audit log of handler [UUID]: Help the user accomplish all their work
    [UUID]  message    read    1        Message from the user to handler [UUID]: hello
    [UUID]  outcome    read    2        Outcome: Help the user accomplish all their work
    [UUID]  outcome    read    1        Outcome: Process inbox
    [UUID]  state      write   1        State document of handler [UUID]: Help the user accomplish all their work
    ");
    assert_snapshot!(home.ok(&["kb", "cat", root8]), @"
    # Outcome: Help the user accomplish all their work

    - id: kb://[UUID]
    - status: open
    - priority: 0
    - perpetual: yes (never completed)

    ## Description

    The perpetual root outcome. The user is its boss; every other outcome serves it.

    ## Why (parents)

    (none)

    ## How (children)

    1 in all: 1 not finished, 0 finished.

    Not finished:

    - kb://[UUID]

    ## History

    - [TIME] system:created by Agency: bootstrap
    ");
    assert_snapshot!(home.ok(&["kb", "log", root8]), @"
    VERSION  CREATED                   SIZE  BY           HASH
    2        [TIME]  482   user/Agency  [HASH]
    1        [TIME]  391   user/Agency  [HASH]
    ");
    assert_snapshot!(home.ok(&["audit", root8]), @"
    TIME                      AGENT  SUMMARY
    [TIME]  -      created as the root handler; the user is its boss
    ");
    assert_snapshot!(home.ok(&["inbox", "--json"]), @"[]");

    let r = home.run(&["token", "mint", "--handler", root8]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_snapshot!(r.stdout, @"[TOKEN]");
    assert_snapshot!(r.stderr, @"minted a token for agent [UUID] of handler [UUID]; it is shown only once. Revoke it with `agency token revoke [UUID]`");
    assert_snapshot!(home.ok(&["agents"]), @"
    AGENT                                 HANDLER                               STATE  STARTED                   ENDED
    [UUID]  [UUID]  live   [TIME]  -
    ");
    let agent = home.json(&["agents"])["live"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_snapshot!(home.ok(&["token", "revoke", &agent[..8]]), @"revoked the token of agent [UUID]; the agent has ended");

    let r = home.run(&["stop", root8]);
    assert_eq!(r.code, 1);
    assert_snapshot!(r.stderr, @"error: failed to force-stop handler [UUID]: it is the root handler, which has no boss to reclaim its outcomes; force-stop its underlings instead");

    let r = home.run(&["outcome", "show", "0000000000"]);
    assert_eq!(r.code, 1);
    assert_snapshot!(r.stderr, @"error: failed to find outcome 0000000000: no such outcome");

    assert_snapshot!(home.ok(&["fsck"]), @"checked 7 versions (7 distinct blobs): no problems");

    let r = home.run(&["tell", root8]);
    assert_eq!(r.code, 2);
    assert_snapshot!(r.stderr, @"
    error: the following required arguments were not provided:
      <TEXT>

    Usage: agency tell <HANDLER> <TEXT>

    For more information, try '--help'.
    ");

    let status = daemon.terminate();
    assert!(status.success(), "serve exited with {status}");
    assert!(
        !home.dir.join("daemon.json").exists(),
        "daemon.json was left behind"
    );
    assert_snapshot!(home.log(), @"
    Agency daemon listening on http://[ADDR] (home [TMP]/home)
    Agency daemon shutting down (SIGTERM)
    Agency daemon stopped
    ");
}

#[test]
fn mcp_stdio_bridges_an_mcp_session() {
    let home = TestHome::new();
    home.ok(&["init"]);
    let r = home.run(&["--json", "status"]);
    assert_eq!(r.code, 1);
    assert_eq!(
        serde_json::from_str::<Value>(&r.stdout).unwrap()["running"],
        false
    );
    let daemon = home.serve();
    let root = home.json(&["status"])["root_handler"]
        .as_str()
        .unwrap()
        .to_owned();
    let token_file = home.dir.with_file_name("token");
    std::fs::write(&token_file, home.ok(&["token", "mint", "--handler", &root])).unwrap();

    let mut bridge = home
        .command(&["mcp-stdio", "--token-file", token_file.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = bridge.stdin.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let stdout = bridge.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let _ = tx.send(line.unwrap());
        }
    });
    let next = |what: &str| -> Value {
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("no {what} on stdout: {e}"));
        serde_json::from_str(&line).unwrap()
    };

    let send = |stdin: &mut std::process::ChildStdin, msg: Value| writeln!(stdin, "{msg}").unwrap();
    send(
        &mut stdin,
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}}),
    );
    let init = next("initialize result");
    assert_eq!(init["id"], 1);
    assert!(init["result"]["protocolVersion"].is_string(), "{init}");
    send(
        &mut stdin,
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    send(
        &mut stdin,
        serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    );
    let list = next("tools/list result");
    assert_eq!(list["id"], 2, "{list}");
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"kb_read"), "{names:?}");

    // The root handler's agent reports to the user, for `inbox` below.
    send(
        &mut stdin,
        serde_json::json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "mail_send",
            "arguments": {"to": "user", "subject": "Report", "text": "All done.\nSee the KB."}}}),
    );
    let sent = next("tools/call result");
    assert_eq!(sent["id"], 3, "{sent}");
    assert_ne!(sent["result"]["isError"], true, "{sent}");

    drop(stdin);
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = bridge.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "mcp-stdio did not exit on stdin EOF"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "mcp-stdio exited with {status}");

    let _redact = home.settings().bind_to_scope();
    assert_snapshot!(home.ok(&["inbox", "--ack"]), @"
    message  [UUID]
    from     handler [UUID]
    date     [TIME]
    subject  Report

      All done.
      See the KB.

    acknowledged 1 message
    ");
    assert_snapshot!(home.ok(&["inbox"]), @"(no messages)");
    assert!(daemon.terminate().success());
}

#[test]
fn a_refused_token_ends_the_bridge_with_exit_1() {
    let home = TestHome::new();
    home.ok(&["init"]);
    let _daemon = home.serve();
    let token_file = home.dir.with_file_name("token");
    std::fs::write(&token_file, "agency_0000\n").unwrap();
    let mut c = home.command(&["mcp-stdio", "--token-file", token_file.to_str().unwrap()]);
    let mut child = spawn_piped(&mut c);
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{}}}}"#
    )
    .unwrap();
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let _redact = home.settings().bind_to_scope();
    assert_snapshot!(String::from_utf8(out.stderr).unwrap(), @"error: failed to authenticate to the Agency daemon with the token in [TMP]/token: failed to authenticate: the bearer token is unknown, revoked, or its agent has ended; mint a new one with `agency token mint --handler <id>`");
}

/// `agency --help` lists the commands in groups and leaves out the
/// plumbing only the daemon and agents' configurations run, which still
/// works and still has its help; no help text names an issue.
#[test]
fn help_groups_the_commands_and_hides_the_daemons_plumbing() {
    let home = TestHome::new();
    let help = home.ok(&["--help"]);
    assert_eq!(home.ok(&["help"]), help);
    let mut at = 0;
    for heading in [
        "Everyday",
        "Organisations",
        "Spend and risk",
        "Records",
        "Plumbing",
    ] {
        let i = help
            .find(&format!("\n{heading}:\n"))
            .unwrap_or_else(|| panic!("no {heading}: {help}"));
        assert!(i > at, "{heading} out of order: {help}");
        at = i;
    }
    assert!(!help.contains("Commands:"), "{help}");
    for (cmd, heading) in [
        ("init", "Everyday"),
        ("up", "Organisations"),
        ("budget", "Spend and risk"),
        ("runs", "Records"),
        ("mcp-stdio", "Plumbing"),
    ] {
        let group = &help[help.find(&format!("\n{heading}:\n")).unwrap()..];
        let group = &group[..group[1..].find("\n\n").unwrap()];
        assert!(group.contains(&format!("\n  {cmd} ")), "{cmd}: {group}");
    }
    let listed: Vec<&str> = help
        .lines()
        .filter_map(|l| l.strip_prefix("  "))
        .filter(|l| !l.starts_with([' ', '-']))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(listed.len() > 40, "{listed:?}");
    let hidden = [
        "agent",
        "mcp-launch",
        "claude-warm",
        "sandbox-exec",
        "sandbox-forward",
        "hook",
        "__complete-ids",
    ];
    for cmd in hidden {
        assert!(!listed.contains(&cmd), "{cmd} listed: {help}");
        let own = home.ok(&["help", cmd]);
        assert!(own.contains(&format!("Usage: agency {cmd}")), "{own}");
    }
    // A hidden command still runs: the completion helper without a daemon.
    assert_eq!(home.ok(&["__complete-ids", "handler"]), "");

    let issue = |text: &str| {
        let lower = text.to_lowercase();
        lower.match_indices("issue").any(|(i, _)| {
            lower[i + 5..]
                .trim_start_matches([' ', '\n', '#'])
                .starts_with(|c: char| c.is_ascii_digit())
        })
    };
    assert!(!issue(&help), "{help}");
    for cmd in listed.iter().chain(&hidden) {
        let own = home.ok(&["help", cmd]);
        assert!(!issue(&own), "agency help {cmd}: {own}");
    }
}
