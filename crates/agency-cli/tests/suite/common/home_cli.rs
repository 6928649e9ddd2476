//! The real `agency` binary run against an `agency_config::Home` made by
//! the test itself (the home's directory and nothing of the caller's
//! environment that could change its behaviour): exit code and output, a
//! run that must succeed, `--json` output parsed, and `agency serve`
//! started on the home (waiting until it answers) and shut down.
//! Included by the test binaries with `#[path = "common/home_cli.rs"] mod home_cli;`.

// Shared by several test binaries, each of which uses only part of it.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agency_config::Home;

pub const BIN: &str = env!("CARGO_BIN_EXE_agency");

/// Run `agency --home HOME ARGS…`: (exit code, stdout, stderr).
pub fn agency(home: &Home, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .arg("--home")
        .arg(home.dir())
        .args(args)
        .env_remove("AGENCY_HOME")
        // Tables whole (full ids, RFC 3339 times), as these tests were
        // written for; the default layout has its own tests (issue 28).
        .env("AGENCY_WIDE", "1")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// Run it and insist on success; its stdout.
pub fn ok(home: &Home, args: &[&str]) -> String {
    let (code, out, err) = agency(home, args);
    assert_eq!(code, 0, "agency {args:?} failed: {out}{err}");
    out
}

/// Run it with `--json` first and parse what it prints.
pub fn json(home: &Home, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    serde_json::from_str(&ok(home, &all)).unwrap()
}

/// Start `agency serve` on the home, its stderr in `log`, and wait until
/// `agency status` answers (at most 30 s).
pub fn serve(home: &Home, log: &Path) -> Child {
    let log = std::fs::File::create(log).unwrap();
    let daemon = Command::new(BIN)
        .arg("--home")
        .arg(home.dir())
        .arg("serve")
        .env_remove("AGENCY_HOME")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while agency(home, &["status"]).0 != 0 {
        assert!(Instant::now() < deadline, "the daemon did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    daemon
}

/// Shut the daemon down (`agency shutdown`) and reap it.
pub fn stop(home: &Home, mut daemon: Child) {
    ok(home, &["shutdown"]);
    let _ = daemon.wait();
}
