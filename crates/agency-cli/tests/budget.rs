//! Issue 11 item 3 from the command line: `agency budget set` and
//! `agency budget show` (text and `--json`) against a real `agency serve`;
//! a negative limit is refused naming the handler.

#![allow(clippy::unwrap_used)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agency_daemon::Home;

const BIN: &str = env!("CARGO_BIN_EXE_agency");

fn agency(home: &Home, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .arg("--home")
        .arg(home.dir())
        .args(args)
        .env_remove("AGENCY_HOME")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn ok(home: &Home, args: &[&str]) -> String {
    let (code, out, err) = agency(home, args);
    assert_eq!(code, 0, "agency {args:?} failed: {out}{err}");
    out
}

#[test]
fn budgets_are_set_and_shown_from_the_cli() {
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::new(tmp.path().join("home"));
    home.init().unwrap();
    let root = {
        let svc = home.open_service().unwrap();
        svc.root_handler().unwrap().unwrap()
    };
    let log = std::fs::File::create(tmp.path().join("daemon.log")).unwrap();
    let mut daemon = Command::new(BIN)
        .arg("--home")
        .arg(home.dir())
        .arg("serve")
        .env_remove("AGENCY_HOME")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while agency(&home, &["status"]).0 != 0 {
        assert!(Instant::now() < deadline, "the daemon did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let r8 = &root.to_string()[..8];

    let set = ok(
        &home,
        &[
            "budget", "set", r8, "--tokens", "2000000", "--usd", "5", "--calls", "100",
        ],
    );
    assert!(set.contains("2000000 tokens, $5.0000, 100 calls"), "{set}");
    let shown = ok(&home, &["budget", "show"]);
    assert!(shown.starts_with(r8), "{shown}");
    assert!(
        shown.contains("spent: 0 tokens, $0.0000, 0 calls"),
        "{shown}"
    );
    assert!(
        shown.contains("limit: 2000000 tokens, $5.0000, 100 calls"),
        "{shown}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&ok(&home, &["--json", "budget", "show", r8])).unwrap();
    assert_eq!(v["handler"], root.to_string());
    assert_eq!(v["limits"]["tokens"], 2_000_000);
    assert_eq!(v["limits"]["micro_usd"], 5_000_000);
    assert_eq!(v["limits"]["calls"], 100);
    assert_eq!(v["spent"]["calls"], 0);

    let (code, _, err) = agency(&home, &["budget", "set", r8, "--tokens=-5"]);
    assert_ne!(code, 0);
    assert!(err.contains(&root.to_string()), "{err}");
    assert!(err.contains("negative"), "{err}");
    // The refused change changed nothing.
    let v: serde_json::Value =
        serde_json::from_str(&ok(&home, &["--json", "budget", "show"])).unwrap();
    assert_eq!(v["limits"]["tokens"], 2_000_000);
    let _ = daemon.kill();
    let _ = daemon.wait();
}
