//! `agency gc` (issue 9 item 11) through the real binary and daemon: a
//! dry run, a run that removes an old orphan blob, `--json`, and fsck clean
//! afterwards.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

const BIN: &str = env!("CARGO_BIN_EXE_agency");

fn agency(home: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("AGENCY_HOME", home)
        .env("HOME", home.with_file_name("user"))
        .env_remove("RUST_LOG")
        .env("AGENCY_WIDE", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn ok(home: &Path, args: &[&str]) -> String {
    let out = agency(home, args);
    let (stdout, stderr) = (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    );
    assert!(out.status.success(), "agency {args:?}: {stdout}{stderr}");
    stdout
}

/// Kills the daemon if the test fails before it is stopped.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn issue9_item11_agency_gc_removes_an_old_orphan_blob() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    ok(&home, &["init"]);
    // No automatic collection here: this test runs it by hand.
    std::fs::write(
        home.join("agency.toml"),
        "[retention]\ngc_interval_hours = 0\nblob_grace_minutes = 1\n",
    )
    .unwrap();
    // A blob no row points at (a write that failed before its row), old.
    let content = b"orphaned content";
    let hex = blake3::hash(content).to_hex().to_string();
    let orphan = home.join("blobs").join(&hex[..2]).join(&hex[2..]);
    std::fs::create_dir_all(orphan.parent().unwrap()).unwrap();
    std::fs::write(&orphan, content).unwrap();
    std::fs::File::open(&orphan)
        .unwrap()
        .set_modified(SystemTime::now() - Duration::from_secs(3600))
        .unwrap();

    let child = Command::new(BIN)
        .arg("serve")
        .env("AGENCY_HOME", &home)
        .env("HOME", home.with_file_name("user"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _serve = Serve(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(home.join("daemon.json").exists() && agency(&home, &["status"]).status.success()) {
        assert!(Instant::now() < deadline, "the daemon did not start");
        std::thread::sleep(Duration::from_millis(50));
    }

    let dry = ok(&home, &["gc", "--dry-run"]);
    assert!(
        dry.contains("blobs no version points at: would remove 1 (16 bytes)"),
        "{dry}"
    );
    assert!(dry.contains("dry run: nothing was changed"), "{dry}");
    assert!(orphan.exists());

    let run = ok(&home, &["gc"]);
    assert!(
        run.contains("blobs no version points at: removed 1 (16 bytes)"),
        "{run}"
    );
    assert!(run.contains("mail acknowledged before"), "{run}");
    assert!(!orphan.exists());

    let json: serde_json::Value = serde_json::from_str(&ok(&home, &["--json", "gc"])).unwrap();
    assert_eq!(json["blobs_removed"], 0, "{json}");
    assert_eq!(json["dry_run"], false);
    let fsck = ok(&home, &["fsck"]);
    assert!(fsck.contains("no problems"), "{fsck}");
    assert!(!fsck.contains("unreferenced"), "{fsck}");
}
