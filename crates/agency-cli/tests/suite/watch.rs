//! Issue 30 items 3 and 7: `agency watch` follows the event log live
//! through the real binary against a real daemon — a tool call of an agent
//! that is still connected shows up while it is live; Ctrl-C and a closed
//! pipe end it with status 0; filters and `--no-follow` read the log.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::first_hour::{daemon_addr, mcp_call};
use crate::home::TestHome;

/// Lines of `child`'s stdout, as they come.
pub(crate) fn lines(child: &mut Child) -> mpsc::Receiver<String> {
    let out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines() {
            let Ok(l) = l else { return };
            if tx.send(l).is_err() {
                return;
            }
        }
    });
    rx
}

/// The first line `want` accepts, within a bound.
fn wait_for(rx: &mpsc::Receiver<String>, what: &str, want: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(l) if want(&l) => return l,
            Ok(l) => seen.push(l),
            Err(_) => break,
        }
    }
    panic!("no line with {what}; saw {seen:#?}");
}

fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        assert!(Instant::now() < deadline, "watch did not exit");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn issue30_watch_shows_a_live_agents_tool_call_and_ctrl_c_exits_0() {
    let home = TestHome::new();
    home.init_with("");
    let daemon = home.serve();
    let root = home.root();
    let mut watch = home
        .command(&["--json", "watch"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = lines(&mut watch);
    // The stream is open once it passes on an event: send mail until one
    // arrives (the watch starts at the log's end, so earlier ones are not
    // shown).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        home.ok(&["send", "are you there?"]);
        if let Ok(l) = rx.recv_timeout(Duration::from_millis(500)) {
            let e: Value = serde_json::from_str(&l).unwrap();
            assert!(e["seq"].as_i64().unwrap() > 0, "{e}");
            break;
        }
        assert!(Instant::now() < deadline, "watch shows nothing");
    }

    // An agent connected with a minted token (live until revoked) calls a
    // tool: its call shows while it is live.
    let token = home.mint(&root);
    let addr = daemon_addr(&home);
    mcp_call(&addr, &token, "kb_list", json!({}));
    let line = wait_for(&rx, "a tool.called event for kb_list", |l| {
        serde_json::from_str::<Value>(l)
            .is_ok_and(|e| e["kind"] == "tool.called" && e["data"]["tool"] == "kb_list")
    });
    let e: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(e["handler"], root.as_str());
    assert_eq!(e["data"]["ok"], true);
    let agents = home.json(&["agents"]);
    assert!(
        agents.to_string().contains(e["agent"].as_str().unwrap()),
        "the agent that called is listed: {agents}"
    );

    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(watch.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = wait_exit(&mut watch);
    assert_eq!(status.code(), Some(0), "Ctrl-C ends watch with 0");
    daemon.terminate();
}

#[test]
fn issue30_watch_exits_0_when_its_reader_closes_the_pipe_and_reads_the_log_with_filters() {
    let home = TestHome::new();
    home.init_with("");
    let daemon = home.serve();
    home.ok(&["send", "first"]);

    // `--no-follow`: what is in the log, filtered by family, then exit.
    let listed = home.ok(&["--json", "watch", "--no-follow", "--kind", "mail"]);
    let kinds: Vec<String> = listed
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["kind"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert!(kinds.contains(&"mail.sent".to_owned()), "{kinds:?}");
    assert!(kinds.iter().all(|k| k.starts_with("mail.")), "{kinds:?}");
    // Plain lines: time, handler, kind, what happened.
    let plain = home.ok(&["watch", "--no-follow", "--kind", "mail.sent"]);
    let first = plain.lines().next().unwrap();
    assert!(
        first.contains("mail.sent") && first.contains("first"),
        "{first}"
    );
    assert!(!first.contains('\x1b'), "no colour when piped: {first:?}");

    // A kind that does not exist is refused, not silently empty.
    let bad = home.run(&["watch", "--no-follow", "--kind", "mial"]);
    assert_ne!(bad.code, 0);
    assert!(
        bad.stderr.contains("unknown kind \"mial\""),
        "{}",
        bad.stderr
    );

    // A reader that goes away: watch ends with 0 at its next write.
    let mut watch = home
        .command(&["watch", "--since", "1h"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(watch.stdout.take().unwrap());
    let mut one = String::new();
    out.read_line(&mut one).unwrap();
    assert!(!one.is_empty());
    drop(out);
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        home.ok(&["send", "more"]);
        if let Some(s) = watch.try_wait().unwrap() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "watch kept running after its reader left"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status.code(), Some(0), "a closed pipe is not a failure");
    daemon.terminate();
}

#[test]
fn issue30_the_stream_resumes_after_last_event_id_and_refuses_bad_queries_before_it_starts() {
    let home = TestHome::new();
    home.init_with("");
    let daemon = home.serve();
    for n in 0..3 {
        home.ok(&["send", &format!("message {n}")]);
    }
    let http = reqwest::blocking::Client::builder()
        .unix_socket(home.dir.join("daemon.sock"))
        .build()
        .unwrap();
    let token = std::fs::read_to_string(home.dir.join("admin.token")).unwrap();
    let token = token.trim();
    let page: Value = http
        .get("http://localhost/v1/events?limit=1000")
        .bearer_auth(token)
        .send()
        .unwrap()
        .json()
        .unwrap();
    let seqs: Vec<i64> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_i64().unwrap())
        .collect();
    assert!(seqs.len() >= 6, "{page}");
    let resume_after = seqs[seqs.len() - 3];

    let resp = http
        .get("http://localhost/v1/events/stream")
        .bearer_auth(token)
        .header("Last-Event-ID", resume_after.to_string())
        .send()
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut reader = BufReader::new(resp);
    let mut ids = Vec::new();
    let mut line = String::new();
    while ids.len() < 2 {
        line.clear();
        assert!(reader.read_line(&mut line).unwrap() > 0, "the stream ended");
        if let Some(id) = line.strip_prefix("id:") {
            ids.push(id.trim().parse::<i64>().unwrap());
        }
    }
    assert_eq!(
        ids,
        seqs[seqs.len() - 2..],
        "exactly the events after it, in order"
    );

    // Refusals are plain errors, before any stream.
    for (query, status) in [
        ("kind=mial", 400),
        ("limit=0", 400),
        ("handler=not-a-uuid", 400),
        ("subtree=true", 400),
        ("bogus=1", 400),
    ] {
        let r = http
            .get(format!("http://localhost/v1/events/stream?{query}"))
            .bearer_auth(token)
            .send()
            .unwrap();
        assert_eq!(r.status().as_u16(), status, "{query}");
        let body: Value = r.json().unwrap();
        assert!(
            body["error"]["message"].as_str().is_some(),
            "{query}: {body}"
        );
    }
    let r = http
        .get("http://localhost/v1/events/stream")
        .header("Last-Event-ID", "-3")
        .bearer_auth(token)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    // Without the admin token: nothing.
    let r = http.get("http://localhost/v1/events").send().unwrap();
    assert_eq!(r.status().as_u16(), 401);
    daemon.terminate();
}

/// A runtime's own tool (Claude Code's `Bash`, the built-in loop's
/// `bash`) is seen by Agency only at its policy check: it is logged there,
/// admitted or not.
#[test]
fn issue30_a_runtimes_own_tool_is_logged_at_its_policy_check() {
    let home = TestHome::new();
    home.init_with("");
    let daemon = home.serve();
    let root = home.root();
    let token = home.mint(&root);
    let addr = daemon_addr(&home);
    let http = reqwest::blocking::Client::builder()
        .no_proxy()
        .build()
        .unwrap();
    for args in [
        json!({"command": "ls"}),
        json!({"command": "sudo ls /root"}),
    ] {
        let v: Value = http
            .post(format!("http://{addr}/agent/tool-check"))
            .bearer_auth(&token)
            .json(&json!({"tool": "bash", "args": args}))
            .send()
            .unwrap()
            .json()
            .unwrap();
        assert!(v["decision"].is_string(), "{v}");
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let events = loop {
        let out = home.ok(&["--json", "watch", "--no-follow", "--kind", "tool"]);
        let events: Vec<Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        if events.len() >= 2 || Instant::now() > deadline {
            break events;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(events.len(), 2, "{events:#?}");
    for e in &events {
        assert_eq!(e["data"]["tool"], "bash");
        assert_eq!(e["data"]["stage"], "admitted");
        assert_eq!(e["handler"], root.as_str());
    }
    assert_eq!(events[0]["data"]["ok"], true, "ls is admitted");
    assert_ne!(
        events[0]["data"]["args_digest"], events[1]["data"]["args_digest"],
        "other arguments, another digest"
    );
    assert_eq!(
        events[1]["data"]["ok"], false,
        "rm -rf waits: {}",
        events[1]
    );
    assert_eq!(events[1]["data"]["error_kind"], "pending_approval");

    // How the admitted call ended, as the runtime reports it: a tool.ended
    // with the same digest. A malformed report is refused and logs nothing;
    // a report needs the agent's token.
    let done = |body: Value, token: &str| {
        http.post(format!("http://{addr}/agent/tool-done"))
            .bearer_auth(token)
            .json(&body)
            .send()
            .unwrap()
            .status()
            .as_u16()
    };
    let ok_body = json!({"tool": "bash", "args": {"command": "ls"}, "ok": false,
                         "error": "[exit code 2]", "duration_ms": 12});
    assert_eq!(done(json!({"tool": "bash", "ok": "yes"}), &token), 400);
    assert_eq!(done(json!({"tool": "", "ok": true}), &token), 400);
    assert_eq!(
        done(json!({"tool": "bash", "ok": true, "sneaky": 1}), &token),
        400
    );
    assert_eq!(done(ok_body.clone(), "agt_forged"), 401);
    assert_eq!(done(ok_body, &token), 204);
    let deadline = Instant::now() + Duration::from_secs(20);
    let ended = loop {
        let out = home.ok(&["--json", "watch", "--no-follow", "--kind", "tool.ended"]);
        let ended: Vec<Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        if !ended.is_empty() || Instant::now() > deadline {
            break ended;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(ended.len(), 1, "{ended:#?}");
    let e = &ended[0]["data"];
    assert_eq!(ended[0]["handler"], root.as_str());
    assert_eq!(e["args_digest"], events[0]["data"]["args_digest"], "{e}");
    assert_eq!((&e["ok"], &e["duration_ms"]), (&json!(false), &json!(12)));
    assert_eq!(e["error"], "[exit code 2]");
    daemon.terminate();
}
