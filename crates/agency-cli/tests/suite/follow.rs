//! Issue 30 item 2: live runs are readable while they run. The real binary
//! against a real daemon: `agency transcript RUN --follow` and `agency logs
//! RUN --follow` show a run's tool calls and output while it is live (each
//! run is held live by a gate the test opens once it has seen what it
//! waits for), end with status 0 when it ends, and print an ended run
//! whole. The attacks: an agent's token on the new routes, a transcript
//! the agent swaps for a symlink to a file outside its run directory or
//! for a FIFO, and the run's token in its output.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::first_hour::daemon_addr;
use crate::home::{BIN, TestHome};
use crate::watch::lines;

/// The root's run: reads its inbox, then waits in `mail_wait` for a
/// second message (the gate: the run cannot end before the test sends
/// it), acknowledges both and ends.
const SCRIPT: &str = r#"{
  "scenarios": [{
    "name": "root",
    "match": { "system_contains": "Help the user accomplish all their work" },
    "turns": [
      { "tool_calls": [ { "name": "mail_inbox", "input": {} } ] },
      { "tool_calls": [ { "name": "mail_wait", "input": { "ignore": ["{{result:/messages/0/id}}"], "timeout_ms": 120000 } } ] },
      { "tool_calls": [ { "name": "mail_ack", "input": { "messages": ["{{result:/messages/0/id}}", "{{result[2]:/messages/0/id}}"] } } ] },
      { "text": "Both messages handled." }
    ]
  }],
  "fallback": { "text": "ok" }
}"#;

/// Every line until one `want` accepts (within a bound), that one last.
fn until(rx: &mpsc::Receiver<String>, what: &str, want: impl Fn(&str) -> bool) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(l) => {
                let done = want(&l);
                seen.push(l);
                if done {
                    return seen;
                }
            }
            Err(_) => break,
        }
    }
    panic!("no line with {what}; saw {seen:#?}");
}

/// The rest of the lines, once the follower has exited.
fn rest(rx: &mpsc::Receiver<String>) -> Vec<String> {
    let mut out = Vec::new();
    while let Ok(l) = rx.recv_timeout(Duration::from_secs(10)) {
        out.push(l);
    }
    out
}

/// Its exit status (it must exit within a bound) and its stderr.
fn exited(child: &mut Child) -> (i32, String) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "the follower did not exit");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    if let Some(mut e) = child.stderr.take() {
        e.read_to_string(&mut err).unwrap();
    }
    (status.code().unwrap_or(-1), err)
}

fn follower(home: &TestHome, args: &[&str]) -> (Child, mpsc::Receiver<String>) {
    let mut child = home
        .command(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = lines(&mut child);
    (child, rx)
}

/// The root's live agent, once there is one.
fn live_agent(home: &TestHome) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let agents = home.json(&["agents"]);
        if let Some(a) = agents["live"].as_array().unwrap().first() {
            return a["id"].as_str().unwrap().to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "no agent started: {}",
            home.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn is_live(home: &TestHome, agent: &str) -> bool {
    home.json(&["run", agent])["live"] == true
}

/// `agency model-server --script FILE`, and the URL it prints.
fn model_server(script: &std::path::Path) -> (Child, String) {
    let mut child = Command::new(BIN)
        .args(["model-server", "--script"])
        .arg(script)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut url = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut url)
        .unwrap();
    (child, url.trim().to_owned())
}

/// What following one run of `runtime` showed: the home (its daemon
/// still running), the run's agent and the output its follower printed.
struct Followed {
    home: TestHome,
    daemon: crate::home::Daemon,
    agent: String,
    output: Vec<String>,
}

/// The root's run against the scripted model server (`runtime(URL)`: the
/// `[agents]` lines naming it), followed three ways while the script holds
/// it live in `mail_wait`, then let go.
fn follow_a_run(runtime: impl Fn(&str) -> String) -> (Followed, Child) {
    let home = TestHome::new();
    let script = home.tmp.path().join("script.json");
    std::fs::write(&script, SCRIPT).unwrap();
    let (model, url) = model_server(&script);
    // Not warm: the run ends when the script does.
    home.init_with(&format!(
        "[agents]\nkeep_warm_executive_ms = 0\n{}",
        runtime(&url)
    ));
    std::fs::write(home.dir.join("policy.toml"), "defaults = false\n").unwrap();
    let daemon = home.serve();
    home.ok(&["send", "Please work"]);
    let agent = live_agent(&home);

    let (mut replay, replay_rx) = follower(&home, &["transcript", &agent[..8], "--follow"]);
    let (mut raw, raw_rx) = follower(&home, &["--json", "transcript", &agent, "-f"]);
    let (mut logs, logs_rx) = follower(&home, &["logs", &agent, "--follow"]);

    // The run waits in mail_wait for the test's second message: what the
    // followers show now, they show while it is live. (Claude Code spells
    // Agency's tools `mcp__agency__NAME`.)
    let shown = until(&replay_rx, "the mail_wait call", |l| {
        l.contains("→ ") && l.contains("mail_wait")
    });
    assert!(
        shown
            .iter()
            .any(|l| l.contains("→ ") && l.contains("mail_inbox")),
        "{shown:#?}"
    );
    let events = until(&raw_rx, "the mail_wait call as JSON", |l| {
        l.contains("mail_wait") && serde_json::from_str::<Value>(l).is_ok()
    });
    assert!(
        events
            .iter()
            .all(|l| serde_json::from_str::<Value>(l).is_ok()),
        "one JSON event a line: {events:#?}"
    );
    assert!(is_live(&home, &agent), "the run is still live");
    assert!(replay.try_wait().unwrap().is_none(), "still following");
    assert!(logs.try_wait().unwrap().is_none(), "still following");

    // The gate opens: the run acknowledges, ends, and so do the followers.
    home.ok(&["send", "Second message"]);
    let (code, err) = exited(&mut replay);
    assert_eq!(code, 0, "{err}");
    let tail = rest(&replay_rx);
    assert!(
        tail.iter()
            .any(|l| l.contains("→ ") && l.contains("mail_ack")),
        "{tail:#?}"
    );
    assert!(
        tail.iter().any(|l| l.contains("run ended")),
        "the run's last line: {tail:#?}"
    );
    let (code, err) = exited(&mut raw);
    assert_eq!(code, 0, "{err}");
    let (code, err) = exited(&mut logs);
    assert_eq!(code, 0, "{err}");
    let output = rest(&logs_rx);
    assert!(!is_live(&home, &agent));

    // An ended run: its stored record, then exit 0.
    let stored = home.ok(&["transcript", &agent, "--follow"]);
    assert!(stored.contains("mail_wait"), "{stored}");
    assert!(stored.contains("run ended"), "{stored}");
    (
        Followed {
            home,
            daemon,
            agent,
            output,
        },
        model,
    )
}

#[test]
fn issue30_following_a_builtin_run_shows_its_tool_calls_and_output_live_and_ends_with_it() {
    let (f, mut model) = follow_a_run(|url| {
        format!(
            "runtime = \"builtin\"\nagency_program = {BIN:?}\nsandbox = \"off\"\n\
             [agents.builtin]\napi = \"anthropic\"\nbase_url = {url:?}\nmodel = \"scripted\"\nmax_turns = 20\n"
        )
    });
    let Followed {
        home,
        daemon,
        agent,
        output,
    } = f;
    assert!(
        output.iter().any(|l| l.starts_with("agent ended: ")),
        "the run's output: {output:#?}"
    );
    let stored = home.ok(&["logs", &agent, "--follow"]);
    assert!(stored.contains("agent ended: "), "{stored}");

    // A client attached with a minted token runs no process of Agency's:
    // there is nothing to follow, and the follower says so at once.
    let root = home.root();
    home.mint(&root);
    let attached = live_agent(&home);
    assert_ne!(attached, agent);
    let r = home.run(&["transcript", &attached, "--follow"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("attached with a minted token"),
        "{}",
        r.stderr
    );
    daemon.terminate();
    let _ = model.kill();
    let _ = model.wait();
}

/// Claude Code's transcript is its stream-json output, which the daemon
/// follows the same way.
#[test]
fn issue30_following_a_claude_code_run_shows_its_stream_json_live() {
    let claude = std::fs::canonicalize(crate::agent_story::claude_bin()).unwrap();
    let (f, mut model) = follow_a_run(|url| {
        format!(
            "runtime = \"claude-code\"\n[agents.claude_code]\nprogram = {:?}\nmodel = \"scripted\"\nmax_turns = 20\n\
             [agents.claude_code.env]\nANTHROPIC_BASE_URL = {url:?}\nANTHROPIC_API_KEY = \"test\"\nCLAUDE_CODE_MAX_RETRIES = \"1\"\n",
            claude.to_str().unwrap()
        )
    });
    // Its stdout is the transcript, not the log: none of it is in the
    // followed output.
    assert!(
        !f.output.iter().any(|l| l.contains("\"type\":\"system\"")),
        "{:#?}",
        f.output
    );
    f.daemon.terminate();
    let _ = model.kill();
    let _ = model.wait();
}

/// The `command` runtime's agent: prints (its token too), writes a
/// transcript line, then at each gate attacks its transcript: a symlink to
/// a file outside its run directory, then a FIFO.
const AGENT: &str = r#"#!/bin/sh
t="$(dirname "$AGENCY_PROMPT_FILE")/transcript.jsonl"
printf '%s' "$AGENCY_TOKEN" > "@SEEN@"
echo "hello from the live run"
echo "my token is $AGENCY_TOKEN"
printf '{"event":"tool_call","name":"first_call","input":{}}\n' >> "$t"
while [ ! -e "@GATE@/one" ]; do sleep 0.05; done
rm -f "$t"
ln -s "@SECRET@" "$t"
echo "transcript swapped for a symlink"
while [ ! -e "@GATE@/two" ]; do sleep 0.05; done
rm -f "$t"
mkfifo "$t"
echo "transcript swapped for a FIFO"
while [ ! -e "@GATE@/three" ]; do sleep 0.05; done
echo "bye"
"#;

fn swapped(rx: &mpsc::Receiver<String>, what: &str) {
    until(rx, what, |l| l.contains(what));
}

#[test]
fn issue30_a_followed_transcript_never_leaks_a_file_the_agent_points_it_at_nor_hangs_and_output_hides_the_token()
 {
    let home = TestHome::new();
    let gate = home.tmp.path().join("gate");
    std::fs::create_dir(&gate).unwrap();
    let seen = home.tmp.path().join("seen-token");
    let secret = home.tmp.path().join("secret.txt");
    std::fs::write(&secret, "{\"event\":\"TOP-SECRET-CONTENT\"}\n").unwrap();
    let script = home.tmp.path().join("agent.sh");
    std::fs::write(
        &script,
        AGENT
            .replace("@SEEN@", seen.to_str().unwrap())
            .replace("@GATE@", gate.to_str().unwrap())
            .replace("@SECRET@", secret.to_str().unwrap()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    home.init_with(&format!(
        "[agents]\nruntime = \"command\"\nsandbox = \"off\"\nstall_after_exits = 1\n[agents.command]\nprogram = {:?}\n",
        script.display().to_string()
    ));
    let daemon = home.serve();
    home.ok(&["send", "Please work"]);
    let agent = live_agent(&home);

    let (mut logs, logs_rx) = follower(&home, &["logs", &agent, "--follow"]);
    let (mut early, early_rx) = follower(&home, &["--json", "transcript", &agent, "--follow"]);
    let shown = until(&logs_rx, "the token line", |l| l.starts_with("my token is"));
    assert_eq!(
        shown,
        ["hello from the live run", "my token is [redacted]"],
        "the live output, redacted"
    );
    until(&early_rx, "the first transcript line", |l| {
        l.contains("first_call")
    });
    let token = std::fs::read_to_string(&seen).unwrap();
    assert!(token.len() > 20);

    // An agent's token opens none of the new routes (the admin socket
    // wants the admin token; the agents' listener has no such route).
    let socket = reqwest::blocking::Client::builder()
        .unix_socket(home.dir.join("daemon.sock"))
        .build()
        .unwrap();
    let tcp = reqwest::blocking::Client::builder()
        .no_proxy()
        .build()
        .unwrap();
    let addr = daemon_addr(&home);
    for stream in ["transcript", "log"] {
        let r = socket
            .get(format!("http://localhost/v1/runs/{agent}/{stream}/stream"))
            .bearer_auth(&token)
            .send()
            .unwrap();
        assert_eq!(r.status().as_u16(), 401, "{stream} on the socket");
        let r = tcp
            .get(format!("http://{addr}/v1/runs/{agent}/{stream}/stream"))
            .bearer_auth(&token)
            .send()
            .unwrap();
        assert!(
            matches!(r.status().as_u16(), 401 | 403 | 404),
            "{stream} on TCP: {}",
            r.status()
        );
        let body = r.text().unwrap();
        assert!(!body.contains("hello from the live run"), "{body}");
    }

    // The agent swaps its transcript for a symlink to a file outside its
    // run directory: the follower that had it open stops with the reason,
    // one that starts now is refused; neither shows the file.
    std::fs::write(gate.join("one"), "").unwrap();
    swapped(&logs_rx, "transcript swapped for a symlink");
    let (code, err) = exited(&mut early);
    let after = rest(&early_rx);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("replaced by a symbolic link"), "{err}");
    let (code, out, err) = {
        let r = home.run(&["transcript", &agent, "--follow"]);
        (r.code, r.stdout, r.stderr)
    };
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("is a symbolic link"), "{err}");
    for shown in [after.join("\n"), out, err] {
        assert!(!shown.contains("TOP-SECRET"), "{shown}");
    }

    // Then for a FIFO: refused at once, not waited on.
    std::fs::write(gate.join("two"), "").unwrap();
    swapped(&logs_rx, "transcript swapped for a FIFO");
    let mut fifo = home
        .command(&["transcript", &agent, "--follow"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (code, err) = exited(&mut fifo);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("not a regular file"), "{err}");
    assert!(is_live(&home, &agent), "the run was live throughout");

    // The run ends: the output's follower ends with it, status 0, and the
    // token never reached it.
    std::fs::write(gate.join("three"), "").unwrap();
    let (code, err) = exited(&mut logs);
    assert_eq!(code, 0, "{err}");
    let tail = rest(&logs_rx);
    assert_eq!(tail.last().map(String::as_str), Some("bye"), "{tail:#?}");
    assert!(!tail.join("\n").contains(&token));
    let stored = home.ok(&["logs", &agent]);
    assert!(stored.contains("my token is [redacted]\n"), "{stored}");
    assert!(!stored.contains(&token));
    daemon.terminate();
}
