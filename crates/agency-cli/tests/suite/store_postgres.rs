//! The store on PostgreSQL, through the real binary: the main job runs on
//! it with no SQLite file in the home, and `agency store migrate` copies a
//! SQLite home into an empty database that a daemon then serves, showing
//! what the SQLite daemon showed.

use std::process::Command;

use agency_postgres::scratch::{ScratchDb, admin_url};

use crate::home::TestHome;

fn scratch() -> ScratchDb {
    let admin = admin_url().expect("AGENCY_TEST_POSTGRES=off: no server for this test");
    ScratchDb::create(&admin).unwrap()
}

#[test]
fn the_main_job_runs_on_postgres_with_nothing_in_sqlite() {
    let db = scratch();
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("demo-home");
    let out = Command::new(env!("CARGO_BIN_EXE_agency"))
        .arg("--home")
        .arg(&home)
        .arg("demo")
        .env("AGENCY_STORE_URL", db.url())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "demo failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("subject  Your garden plan is ready"),
        "{stdout}"
    );
    assert!(stdout.contains("7 agent runs"), "{stdout}");
    assert!(!home.join("agency.db").exists(), "no SQLite store was made");
    assert!(!home.join("blobs").exists(), "no blob directory was made");
}

/// What a daemon shows of the organisation: the inbox and the outcomes.
fn view(home: &TestHome) -> (serde_json::Value, serde_json::Value) {
    (home.json(&["inbox"]), home.json(&["outcomes"]))
}

#[test]
fn a_sqlite_home_is_migrated_and_served_from_postgres() {
    let home = TestHome::new();
    // The main job on SQLite, in this home.
    let out = home.run(&["demo", "--home", home.dir.to_str().unwrap()]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let db = scratch();

    let daemon = home.serve();
    let on_sqlite = view(&home);
    assert!(
        on_sqlite
            .0
            .to_string()
            .contains("Your garden plan is ready"),
        "{on_sqlite:?}"
    );
    // Not while a daemon may still write.
    let busy = home.run(&["store", "migrate", "--to", db.url()]);
    assert_eq!(busy.code, 1, "{}", busy.stdout);
    assert!(busy.stderr.contains("daemon is running"), "{}", busy.stderr);
    daemon.terminate();

    let db_file = std::fs::read(home.dir.join("agency.db")).unwrap();
    let copied = home.run(&["store", "migrate", "--to", db.url()]);
    assert_eq!(copied.code, 0, "{}{}", copied.stdout, copied.stderr);
    assert!(copied.stdout.contains("fsck: clean"), "{}", copied.stdout);
    assert!(copied.stdout.starts_with("copied "), "{}", copied.stdout);
    assert_eq!(
        std::fs::read(home.dir.join("agency.db")).unwrap(),
        db_file,
        "the SQLite store is left as it was"
    );
    let again = home.run(&["store", "migrate", "--to", db.url()]);
    assert_eq!(again.code, 1);
    assert!(again.stderr.contains("not empty"), "{}", again.stderr);
    let bad = home.run(&["store", "migrate", "--to", "mysql://u:secret@h/db"]);
    assert_eq!(bad.code, 1);
    assert!(
        bad.stderr.contains("PostgreSQL URL") && !bad.stderr.contains("secret"),
        "{}",
        bad.stderr
    );

    let daemon = home.serve_with(&[("AGENCY_STORE_URL", db.url())]);
    assert_eq!(view(&home), on_sqlite, "the copy serves what SQLite served");
    daemon.terminate();
}
