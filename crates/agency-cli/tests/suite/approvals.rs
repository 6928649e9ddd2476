//! Issue 11 items 4 and 7 from the command line, against a real `agency
//! serve`: a destructive Claude Code Bash call (through `agency hook
//! pre-tool-use`, as Claude Code runs it) becomes a pending approval
//! request; `agency approvals` shows it; `agency approve` lets the same
//! call through exactly once — across a `kill -9` of the daemon between the
//! approval and the retried call; `--always` keeps allowing it; `agency
//! deny` tells the agent why; an agent cannot reach the approval routes;
//! the hook fails closed when the daemon is down; a bad `policy.toml` stops
//! the daemon naming `file:line`.

#![allow(clippy::unwrap_used)]

use crate::home;

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use home::TestHome;
use serde_json::{Value, json};

/// `agency serve` we can SIGKILL.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve(h: &TestHome) -> Serve {
    let log = std::fs::File::options()
        .create(true)
        .append(true)
        .open(h.log_path())
        .unwrap();
    let child = h
        .command(&["serve"])
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let s = Serve(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    while h.run(&["status"]).code != 0 {
        assert!(Instant::now() < deadline, "no daemon: {}", h.log());
        std::thread::sleep(Duration::from_millis(50));
    }
    s
}

/// Run the hook as Claude Code would, as the agent holding `token`.
fn hook(h: &TestHome, mcp_url: &str, token: &str, input: &Value) -> home::Run {
    let mut c = h.command(&["hook", "pre-tool-use"]);
    c.env("AGENCY_MCP_URL", mcp_url)
        .env("AGENCY_TOKEN", token)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(Stdio::piped());
    let mut child = c.spawn().unwrap();
    {
        use std::io::Write;
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(input.to_string().as_bytes()).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    home::Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

fn bash(command: &str) -> Value {
    json!({
        "session_id": "s",
        "hook_event_name": "PreToolUse",
        "tool_name": "Bash",
        "tool_input": { "command": command, "description": "x" },
        "tool_use_id": "toolu_1"
    })
}

/// The hook's decision: `None` when it let the call through.
fn decision(r: &home::Run) -> Option<(String, String)> {
    if r.stdout.trim().is_empty() {
        assert_eq!(r.code, 0, "{r:?}");
        return None;
    }
    let v: Value = serde_json::from_str(r.stdout.trim()).unwrap();
    let o = &v["hookSpecificOutput"];
    assert_eq!(o["hookEventName"], "PreToolUse");
    Some((
        o["permissionDecision"].as_str().unwrap().to_owned(),
        o["permissionDecisionReason"].as_str().unwrap().to_owned(),
    ))
}

fn pending_id(reason: &str) -> String {
    let rest = reason
        .strip_prefix("pending approval ")
        .unwrap_or_else(|| panic!("not pending: {reason}"));
    rest.split(':').next().unwrap().to_owned()
}

const RISKY: &str = "rm -rf /tmp/agency-approvals-cli-test";

#[test]
fn issue11_item7_approval_exactly_once_across_kill9() {
    let h = TestHome::new();
    h.init_with("");
    let mut daemon = serve(&h);
    let root = h.root();
    let token = h.mint(&root);
    let addr = h.json(&["status"])["addr"].as_str().unwrap().to_owned();
    let mcp_url = format!("http://{addr}/mcp");

    // A harmless command: no decision, Claude Code's own rules apply.
    assert_eq!(decision(&hook(&h, &mcp_url, &token, &bash("ls -la"))), None);
    // A destructive one: refused as pending, with the request's id.
    let (d, reason) = decision(&hook(&h, &mcp_url, &token, &bash(RISKY))).unwrap();
    assert_eq!(d, "deny");
    assert!(reason.contains("outside the workspace"), "{reason}");
    assert!(reason.contains("go on with other work"), "{reason}");
    let id = pending_id(&reason);
    // Asked again: the same request.
    let (_, again) = decision(&hook(&h, &mcp_url, &token, &bash(RISKY))).unwrap();
    assert_eq!(pending_id(&again), id);
    // A credential read is denied outright, no request.
    let (d, why) = decision(&hook(&h, &mcp_url, &token, &bash("cat ~/.ssh/id_rsa"))).unwrap();
    assert_eq!(d, "deny");
    assert!(why.contains("SSH"), "{why}");

    // The user sees it: text and JSON.
    let listed = h.ok(&["approvals"]);
    assert!(
        listed.contains(&format!("#{id} pending claude:Bash")),
        "{listed}"
    );
    assert!(listed.contains(RISKY), "{listed}");
    assert!(listed.contains("agency approve ID"), "{listed}");
    let v = h.json(&["approvals"]);
    assert_eq!(v.as_array().unwrap().len(), 1);
    assert_eq!(v[0]["tool"], "claude:Bash");
    assert_eq!(v[0]["status"], "pending");
    // And the mail in the user's inbox names the tool, arguments and how.
    let inbox = h.ok(&["inbox"]);
    assert!(inbox.contains("Approval needed: claude:Bash"), "{inbox}");

    // Attack: the agent's token on the daemon's TCP listener cannot reach
    // the approval routes (they are on the admin socket only).
    let http = reqwest::blocking::Client::builder()
        .no_proxy()
        .build()
        .unwrap();
    let r = http
        .post(format!("http://{addr}/v1/approvals/{id}/approve"))
        .bearer_auth(&token)
        .json(&json!({"always": true}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    assert_eq!(h.json(&["approvals"])[0]["status"], "pending");

    // Nor is there an MCP tool that decides a request.
    let tools = h.ok(&["tools"]);
    assert!(tools.contains("repo_push"), "{tools}");
    assert!(!tools.to_lowercase().contains("approv"), "{tools}");

    let approved = h.ok(&["approve", &id]);
    assert!(
        approved.contains(&format!("approved request {id}")),
        "{approved}"
    );
    // Approving twice is refused.
    let twice = h.run(&["approve", &id]);
    assert_eq!(twice.code, 1);
    assert!(
        twice.stderr.contains("already approved"),
        "{}",
        twice.stderr
    );

    // kill -9 between the approval and the retried call.
    daemon.0.kill().unwrap();
    daemon.0.wait().unwrap();
    let _daemon = serve(&h);
    let addr = h.json(&["status"])["addr"].as_str().unwrap().to_owned();
    let mcp_url = format!("http://{addr}/mcp");
    // An external agent's token outlives the restart only if the agent
    // does; mint a fresh one for the same handler (the binding is the
    // handler, not the agent).
    let token = match decision(&hook(&h, &mcp_url, &token, &bash("ls"))) {
        None => token,
        Some(_) => h.mint(&root),
    };
    // Exactly once.
    assert_eq!(decision(&hook(&h, &mcp_url, &token, &bash(RISKY))), None);
    let (_, reason) = decision(&hook(&h, &mcp_url, &token, &bash(RISKY))).unwrap();
    let second = pending_id(&reason);
    assert_ne!(second, id);
    let all = h.json(&["approvals", "--all"]);
    let first = all
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"].as_i64().map(|n| n.to_string()).as_deref() == Some(id.as_str()))
        .unwrap();
    assert_eq!(first["status"], "consumed");

    // --always: every identical call.
    h.ok(&["approve", &second, "--always"]);
    for _ in 0..2 {
        assert_eq!(decision(&hook(&h, &mcp_url, &token, &bash(RISKY))), None);
    }
    // Changed arguments ask again; a denial is explained.
    let (_, reason) = decision(&hook(&h, &mcp_url, &token, &bash("sudo reboot-now"))).unwrap();
    let third = pending_id(&reason);
    let no_reason = h.run(&["deny", &third]);
    assert_eq!(no_reason.code, 2, "clap requires --reason");
    h.ok(&["deny", &third, "--reason", "no root for agents"]);
    let (d, why) = decision(&hook(&h, &mcp_url, &token, &bash("sudo reboot-now"))).unwrap();
    assert_eq!(d, "deny");
    assert!(why.contains("no root for agents"), "{why}");
    assert!(
        h.ok(&["approvals"])
            .contains("no pending approval requests")
    );
}

#[test]
fn issue11_item7_the_hook_fails_closed() {
    let h = TestHome::new();
    h.init_with("");
    // No daemon at that address.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let r = hook(
        &h,
        &format!("http://127.0.0.1:{port}/mcp"),
        "agency_x",
        &bash("ls"),
    );
    assert_eq!(r.code, 2, "{r:?}");
    let (d, why) = decision(&home::Run { code: 0, ..r }).unwrap();
    assert_eq!(d, "deny");
    assert!(why.contains("refused until the check works"), "{why}");

    // A daemon that refuses the token: denied too.
    let _daemon = serve(&h);
    let addr = h.json(&["status"])["addr"].as_str().unwrap().to_owned();
    let r = hook(
        &h,
        &format!("http://{addr}/mcp"),
        "agency_forged",
        &bash("ls"),
    );
    assert_eq!(r.code, 2, "{r:?}");
    // Unreadable input: denied.
    let mut c = h.command(&["hook", "pre-tool-use"]);
    c.env("AGENCY_MCP_URL", format!("http://{addr}/mcp"))
        .env("AGENCY_TOKEN", h.mint(&h.root()))
        .stdin(Stdio::null());
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn issue11_item4_a_bad_policy_file_stops_the_daemon_naming_the_line() {
    let h = TestHome::new();
    h.init_with("");
    std::fs::write(
        h.dir.join("policy.toml"),
        "# my rules\n[[rule]]\ntool = \"bash\"\nverdict = \"perhaps\"\n",
    )
    .unwrap();
    let out = h.command(&["serve"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("policy.toml:4"), "{err}");
    assert!(err.contains("unknown verdict \"perhaps\""), "{err}");
}

/// `agency grant … --approval each_use`: every call of the server's tools
/// asks, as `POST /agent/tool-check` answers (the shared interface's JSON).
#[test]
fn issue11_item4_each_use_grant_from_the_cli() {
    let h = TestHome::new();
    h.init_with("[mcp_servers.mail]\ncommand = \"true\"\n");
    let _daemon = serve(&h);
    let root = h.root();
    let out = h.ok(&[
        "grant",
        &root,
        "mcp_server:mail",
        "read",
        "--approval",
        "each_use",
    ]);
    assert!(out.starts_with("granted read mcp_server:mail"), "{out}");
    let bad = h.run(&[
        "grant",
        &root,
        "mcp_server:mail",
        "read",
        "--approval",
        "often",
    ]);
    assert_eq!(bad.code, 2, "{bad:?}");
    let token = h.mint(&root);
    let addr = h.json(&["status"])["addr"].as_str().unwrap().to_owned();
    let http = reqwest::blocking::Client::builder()
        .no_proxy()
        .build()
        .unwrap();
    let check = |body: Value| -> Value {
        http.post(format!("http://{addr}/agent/tool-check"))
            .bearer_auth(&token)
            .json(&body)
            .send()
            .unwrap()
            .json()
            .unwrap()
    };
    let v = check(json!({"tool": "mcp:mail/search", "args": {"q": "x"}, "read_only": true}));
    assert_eq!(v["decision"], "pending", "{v}");
    assert!(v["approval"].is_i64(), "{v}");
    assert!(v["reason"].as_str().unwrap().contains("each_use"), "{v}");
    assert!(
        v["message"]
            .as_str()
            .unwrap()
            .starts_with("pending approval "),
        "{v}"
    );
    let v = check(json!({"tool": "bash", "args": {"command": "ls"}}));
    assert_eq!(
        v,
        json!({"decision": "allow", "approval": null, "reason": "", "message": ""})
    );
    let v = check(json!({"tool": "bash", "args": {"command": "printenv"}}));
    assert_eq!(v["decision"], "deny", "{v}");
    // No token, no answer.
    let r = http
        .post(format!("http://{addr}/agent/tool-check"))
        .json(&json!({"tool": "bash", "args": {}}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
}
