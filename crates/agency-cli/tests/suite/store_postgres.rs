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

/// Until handlers are handed out by lease, a second daemon on a database
/// that one serves is refused (it would start agents for the same
/// handlers and reap the other's); once the first stops, it starts.
#[test]
fn a_second_daemon_on_the_same_database_is_refused() {
    let db = scratch();
    let url = db.url();
    let (a, b) = (TestHome::new(), TestHome::new());
    for h in [&a, &b] {
        let init = h
            .command(&["init"])
            .env("AGENCY_STORE_URL", url)
            .output()
            .unwrap();
        assert!(init.status.success(), "{init:?}");
    }
    let first = a.serve_with(&[("AGENCY_STORE_URL", url)]);
    let mut second = b
        .command(&["serve"])
        .env("AGENCY_STORE_URL", url)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let status = loop {
        if let Some(s) = second.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > deadline {
            let _ = second.kill();
            panic!("a second daemon on the same database was not refused");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut second.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!status.success());
    assert!(
        stderr.contains("another daemon serves the store at agency_t_"),
        "{stderr}"
    );
    first.terminate();
    let second = b.serve_with(&[("AGENCY_STORE_URL", url)]);
    second.terminate();
}
