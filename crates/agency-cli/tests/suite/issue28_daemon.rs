//! Issue 28, the daemon's part, with the real binary against a real
//! daemon (`agency serve` as a subprocess): `agency reload` and SIGHUP
//! apply what applies live and name what needs a restart, invalid files
//! change nothing, and only the admin token may ask; `agency init` pins a
//! TCP port that restarts keep; `agency fsck` and `agency gc` know run
//! records' blobs.

#![allow(clippy::unwrap_used)]

use crate::home;

use std::io::{Read, Write};
use std::time::{Duration, Instant, SystemTime};

use home::TestHome;
use serde_json::{Value, json};

/// Polls `f` every 50 ms until it yields, failing after 60 s.
fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn daemon_addr(home: &TestHome) -> String {
    let info: Value =
        serde_json::from_slice(&std::fs::read(home.dir.join("daemon.json")).unwrap()).unwrap();
    info["addr"].as_str().unwrap().to_owned()
}

/// What the policy says of `bash` running `command` for the agent whose
/// token is `token` (`/agent/tool-check`, as the runtimes ask it).
fn bash_verdict(addr: &str, token: &str, command: &str) -> String {
    let r = reqwest::blocking::Client::new()
        .post(format!("http://{addr}/agent/tool-check"))
        .bearer_auth(token)
        .json(&json!({ "tool": "bash", "args": { "command": command } }))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let v: Value = r.json().unwrap();
    v["decision"].as_str().unwrap().to_owned()
}

/// `POST /v1/reload` on the home's Unix socket with `token`: the status.
fn reload_on_socket(home: &TestHome, token: &str) -> u16 {
    let mut s = std::os::unix::net::UnixStream::connect(home.dir.join("daemon.sock")).unwrap();
    write!(
        s,
        "POST /v1/reload HTTP/1.1\r\nHost: agency\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status in {answer:?}"))
}

fn keep_warm_default(home: &TestHome, root: &str) -> u64 {
    let v = home.json(&["keep-warm", root]);
    assert_eq!(v["source"], "default", "{v}");
    v["effective_ms"].as_u64().unwrap()
}

const BASE: &str = "[agents]\nkeep_warm_ms = 0\n";

#[test]
fn issue28_reload_applies_live_settings_names_restarts_and_refuses_bad_files() {
    let home = TestHome::new();
    home.init_with(BASE);
    std::fs::write(home.dir.join("policy.toml"), "defaults = false\n").unwrap();
    let _daemon = home.serve();
    let root = home.root();
    let addr = daemon_addr(&home);
    let agent_token = home.mint(&root);
    assert_eq!(bash_verdict(&addr, &agent_token, "ls"), "allow");
    assert_eq!(keep_warm_default(&home, &root), 0);

    // Nothing changed: said so.
    let out = home.ok(&["reload"]);
    assert!(out.contains("nothing changed"), "{out}");

    // An MCP server agency.toml does not declare cannot be granted.
    let r = home.run(&["grant", &root, "mcp_server:files", "read"]);
    assert_eq!(r.code, 1, "{r:?}");

    // Live settings, a policy rule and a setting read only at start.
    std::fs::write(
        home.dir.join("agency.toml"),
        "[agents]\nkeep_warm_ms = 90000\nkeep_warm_executive_ms = 1000\n[server]\nport = 1\n[mcp_servers.files]\ncommand = \"mcp-server-files\"\n",
    )
    .unwrap();
    std::fs::write(
        home.dir.join("policy.toml"),
        "defaults = false\n[[rule]]\ntool = \"bash\"\nverdict = \"deny\"\nreason = \"no shell today\"\n",
    )
    .unwrap();
    let out = home.ok(&["reload"]);
    let line = |setting: &str| {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(setting))
            .unwrap_or_else(|| panic!("no line for {setting}: {out}"))
            .to_owned()
    };
    assert!(line("policy.toml").contains("applied"), "{out}");
    assert!(line("agents.keep_warm_ms").contains("applied"), "{out}");
    assert!(
        line("agents.keep_warm_executive_ms").contains("applied"),
        "{out}"
    );
    assert!(line("mcp_servers.files").contains("applied"), "{out}");
    assert!(line("server.port").contains("needs a restart"), "{out}");
    assert_eq!(out.lines().count(), 5, "{out}");
    // Applied: the running daemon uses them.
    assert_eq!(bash_verdict(&addr, &agent_token, "ls"), "deny");
    assert_eq!(keep_warm_default(&home, &root), 90_000);
    home.ok(&["grant", &root, "mcp_server:files", "read"]);
    // Not applied: the daemon still listens where it did, and says so
    // again at the next reload.
    assert_eq!(daemon_addr(&home), addr);
    let v = home.json(&["reload"]);
    assert_eq!(
        v["changes"],
        json!([{
            "setting": "server.port",
            "status": "needs a restart",
            "note": "read only at start: restart the daemon (`agency shutdown`, then `agency serve`)"
        }]),
        "{v}"
    );

    // An invalid agency.toml changes nothing, and the error names the
    // file and the line.
    std::fs::write(
        home.dir.join("agency.toml"),
        "[agents]\nkeep_warm_ms = 5000\n[retention\n",
    )
    .unwrap();
    std::fs::write(home.dir.join("policy.toml"), "defaults = false\n").unwrap();
    let r = home.run(&["reload"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("agency.toml"), "{r:?}");
    assert!(r.stderr.contains("line 3"), "{r:?}");
    assert!(r.stderr.contains("nothing was changed"), "{r:?}");
    assert_eq!(keep_warm_default(&home, &root), 90_000);
    assert_eq!(bash_verdict(&addr, &agent_token, "ls"), "deny");
    // So does an invalid policy.toml, named with its line.
    std::fs::write(home.dir.join("agency.toml"), BASE).unwrap();
    std::fs::write(
        home.dir.join("policy.toml"),
        "defaults = false\n[[rule]]\ntool = \"bash\"\nverdict = \"maybe\"\n",
    )
    .unwrap();
    let r = home.run(&["reload"]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(r.stderr.contains("policy.toml:"), "{r:?}");
    assert!(r.stderr.contains("nothing was changed"), "{r:?}");
    assert_eq!(keep_warm_default(&home, &root), 90_000);
    assert_eq!(bash_verdict(&addr, &agent_token, "ls"), "deny");

    // Attack: an agent's token may not reload, on the socket or on TCP
    // (where /v1 does not exist); the admin token may.
    assert_eq!(reload_on_socket(&home, &agent_token), 401);
    let r = reqwest::blocking::Client::new()
        .post(format!("http://{addr}/v1/reload"))
        .bearer_auth(&agent_token)
        .json(&json!({}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 404);
    std::fs::write(home.dir.join("policy.toml"), "defaults = false\n").unwrap();
    let admin = std::fs::read_to_string(home.dir.join("admin.token")).unwrap();
    assert_eq!(reload_on_socket(&home, admin.trim()), 200);
    assert_eq!(bash_verdict(&addr, &agent_token, "ls"), "allow");
    assert_eq!(keep_warm_default(&home, &root), 0);
}

#[test]
fn issue28_sighup_to_agency_serve_reloads() {
    let home = TestHome::new();
    home.init_with(BASE);
    let daemon = home.serve();
    let root = home.root();
    assert_eq!(keep_warm_default(&home, &root), 0);
    std::fs::write(
        home.dir.join("agency.toml"),
        "[agents]\nkeep_warm_ms = 7000\n",
    )
    .unwrap();
    let info: Value =
        serde_json::from_slice(&std::fs::read(home.dir.join("daemon.json")).unwrap()).unwrap();
    let pid = info["pid"].as_u64().unwrap().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-HUP", &pid])
            .status()
            .unwrap()
            .success()
    );
    // It says what it applied (on its standard error) …
    wait_for("the reload on SIGHUP", || {
        home.log()
            .lines()
            .any(|l| l.starts_with("agents.keep_warm_ms") && l.contains("applied"))
            .then_some(())
    });
    // … and still serves, with the new value.
    assert_eq!(keep_warm_default(&home, &root), 7000);
    assert!(daemon.terminate().success());
}

fn pinned_port(home: &TestHome) -> u16 {
    let text = std::fs::read_to_string(home.dir.join("agency.toml")).unwrap();
    let at = text.find("[server]").unwrap();
    let line = text[at..]
        .lines()
        .find(|l| l.starts_with("port = "))
        .unwrap();
    line["port = ".len()..].trim().parse().unwrap()
}

#[test]
fn issue28_init_pins_a_free_port_that_restarts_keep() {
    let home = TestHome::new();
    home.ok(&["init"]);
    let port = pinned_port(&home);
    assert_ne!(port, 0, "init left the port to chance");
    let before = std::fs::read(home.dir.join("agency.toml")).unwrap();
    // An existing home is left as it is.
    home.ok(&["init"]);
    assert_eq!(std::fs::read(home.dir.join("agency.toml")).unwrap(), before);

    let daemon = home.serve();
    assert_eq!(daemon_addr(&home), format!("127.0.0.1:{port}"));
    assert!(daemon.terminate().success());
    let daemon = home.serve();
    assert_eq!(daemon_addr(&home), format!("127.0.0.1:{port}"));
    assert!(daemon.terminate().success());

    // Taken by something else: the error names the port, the setting and
    // the ways out.
    let _holder = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    let r = home.run(&["serve"]);
    assert_ne!(r.code, 0, "{r:?}");
    assert!(
        r.stderr.contains(&format!("127.0.0.1:{port}")),
        "{}",
        r.stderr
    );
    assert!(r.stderr.contains("[server] port"), "{}", r.stderr);
    assert!(r.stderr.contains("agency.toml"), "{}", r.stderr);
}

/// An agent of the `command` runtime that prints and exits: its run
/// record keeps the output as a blob no KB version points at.
const RUN_CONFIG: &str = "[agents]\nruntime = \"command\"\nsandbox = \"off\"\nstall_after_exits = 1\n[agents.command]\nprogram = \"sh\"\nargs = [\"-c\", \"echo output of the run\"]\n[retention]\ngc_interval_hours = 0\nblob_grace_minutes = 1\n";

#[test]
fn issue28_fsck_and_gc_know_run_records_blobs() {
    let home = TestHome::new();
    home.init_with(RUN_CONFIG);
    let _daemon = home.serve();
    home.ok(&["send", "Please work"]);
    let agent = wait_for("the agent's run to be recorded", || {
        let v = home.json(&["agents"]);
        v["recent"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| !a["ended_at"].is_null())
            .map(|a| a["id"].as_str().unwrap().to_owned())
    });
    assert!(
        home.ok(&["logs", &agent]).contains("output of the run"),
        "the run kept its output"
    );
    let fsck = home.json(&["fsck"]);
    assert_eq!(fsck["unreferenced_blobs"], json!([]), "{fsck}");
    assert!(!home.ok(&["fsck"]).contains("unreferenced"));

    // A blob nobody points at is still reported; every blob is made old.
    let content = b"orphaned content";
    let hex = blake3::hash(content).to_hex().to_string();
    let orphan = home.dir.join("blobs").join(&hex[..2]).join(&hex[2..]);
    std::fs::create_dir_all(orphan.parent().unwrap()).unwrap();
    std::fs::write(&orphan, content).unwrap();
    let fsck = home.json(&["fsck"]);
    assert_eq!(
        fsck["unreferenced_blobs"],
        json!([format!("blake3:{hex}")]),
        "{fsck}"
    );
    let old = SystemTime::now() - Duration::from_secs(3600);
    for shard in std::fs::read_dir(home.dir.join("blobs")).unwrap() {
        let shard = shard.unwrap().path();
        if !shard.is_dir() {
            continue;
        }
        for blob in std::fs::read_dir(&shard).unwrap() {
            std::fs::File::open(blob.unwrap().path())
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
    }
    // gc removes the orphan and keeps the run's blobs.
    let gc = home.json(&["gc"]);
    assert_eq!(gc["blobs_removed"], 1, "{gc}");
    assert!(!orphan.exists());
    assert!(home.ok(&["logs", &agent]).contains("output of the run"));
    let fsck = home.json(&["fsck"]);
    assert_eq!(fsck["unreferenced_blobs"], json!([]), "{fsck}");
    assert_eq!(fsck["problems"], json!([]), "{fsck}");
}
