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
    // The same runs and model calls as on SQLite. An eighth run, under
    // load, was a heartbeat whose renewal read the leases just before a
    // claim committed and took the new agent's lease for lost.
    assert!(stdout.contains("7 agent runs, 45 model calls."), "{stdout}");
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

/// The agents' marks: each agent writes which daemon started it (its MCP
/// URL) and its pid, then waits.
fn shared_config(url: &str, marks: &std::path::Path) -> String {
    let script = format!(
        "echo \"$AGENCY_MCP_URL $$\" > {}/$AGENCY_AGENT; exec sleep 60",
        marks.display()
    );
    format!(
        "[store]\nurl = {url:?}\nlease_ms = 5000\nheartbeat_ms = 500\n\
         [agents]\nruntime = \"command\"\nkill_grace_ms = 300\nsandbox = \"off\"\n\
         [agents.command]\nprogram = \"sh\"\nargs = [\"-c\", {script:?}]\n"
    )
}

/// The live agents' marks: (agent, MCP URL of its daemon, pid).
fn marks_of(dir: &std::path::Path) -> Vec<(String, String, u32)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        let mut it = text.split_whitespace();
        if let (Some(url), Some(pid)) = (it.next(), it.next().and_then(|p| p.parse().ok())) {
            out.push((e.file_name().into_string().unwrap(), url.to_owned(), pid));
        }
    }
    out
}

/// Poll `f` (every 50 ms, up to a minute) until it gives a value; fail
/// with `what` and `log()` otherwise.
fn wait_for<T>(what: &str, log: impl Fn() -> String, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(std::time::Instant::now() < deadline, "{what}:\n{}", log());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// The first mark other than `not`'s (an agent started since).
fn new_mark(marks: &std::path::Path, not: Option<&str>) -> Option<(String, String, u32)> {
    marks_of(marks)
        .into_iter()
        .find(|m| Some(m.0.as_str()) != not)
}

fn mcp_url(home: &TestHome) -> String {
    let info: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(home.dir.join("daemon.json")).unwrap())
            .unwrap();
    format!("http://{}/mcp", info["addr"].as_str().unwrap())
}

/// Two daemons (two homes) on one database run one organisation: the
/// root's work is taken by one of them; when that one is killed with
/// SIGKILL, the other takes the handler over once its lease lapses and
/// starts the next agent, and the dead daemon's agent is ended in the
/// store ("taken over").
#[test]
fn two_daemons_share_one_organisation_and_one_takes_over_from_a_killed_one() {
    let db = scratch();
    let url = db.url();
    let marks = tempfile::tempdir().unwrap();
    let (a, b) = (TestHome::new(), TestHome::new());
    for h in [&a, &b] {
        let init = h
            .command(&["init"])
            .env("AGENCY_STORE_URL", url)
            .output()
            .unwrap();
        assert!(init.status.success(), "{init:?}");
        std::fs::write(h.dir.join("agency.toml"), shared_config(url, marks.path())).unwrap();
    }
    let da = a.serve();
    let db_ = b.serve();
    assert_eq!(a.root(), b.root(), "one organisation");
    let (url_a, url_b) = (mcp_url(&a), mcp_url(&b));

    a.ok(&["send", "work for whichever daemon takes it"]);
    let first = wait_for(
        "no agent started",
        || format!("{}\n{}", a.log(), b.log()),
        || new_mark(marks.path(), None),
    );
    // Exactly one agent: the other daemon's claim was refused (a few
    // heartbeats later too).
    std::thread::sleep(std::time::Duration::from_millis(1500));
    assert_eq!(
        marks_of(marks.path()).len(),
        1,
        "{:?}",
        marks_of(marks.path())
    );

    // `agency status` on either daemon shows who holds the work: the
    // daemon that started the agent, one handler.
    let (sa, sb) = (a.json(&["status"]), b.json(&["status"]));
    let (owner_a, owner_b) = (
        sa["lease_owner"].as_str().unwrap().to_owned(),
        sb["lease_owner"].as_str().unwrap().to_owned(),
    );
    assert_ne!(owner_a, owner_b, "each daemon has its own name");
    let holder = if first.1 == url_a { &owner_a } else { &owner_b };
    for s in [&sa, &sb] {
        assert_eq!(
            s["daemons"],
            serde_json::json!([{"owner": holder, "handlers": 1, "expires_at": s["daemons"][0]["expires_at"]}]),
            "{s}"
        );
    }
    let text = a.ok(&["status"]);
    assert!(text.contains("Shared store: this daemon is"), "{text}");
    assert!(text.contains(holder.as_str()), "{text}");

    // Kill the daemon that runs it; the other takes over.
    let (dead, alive, survivor, survivor_url) = if first.1 == url_a {
        (da, db_, &b, url_b)
    } else {
        assert_eq!(first.1, url_b);
        (db_, da, &a, url_a)
    };
    dead.sigkill();
    let second = wait_for(
        "no takeover",
        || survivor.log(),
        || new_mark(marks.path(), Some(&first.0)),
    );
    assert_eq!(
        second.1, survivor_url,
        "the survivor started the next agent"
    );
    let runs = survivor.json(&["runs"]);
    let old = runs
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["agent"] == first.0.as_str())
        .unwrap_or_else(|| panic!("{runs}"));
    assert!(
        old["end_reason"]
            .as_str()
            .unwrap_or("")
            .contains("taken over"),
        "{old}"
    );
    alive.terminate();
    // The dead daemon's agent outlived it (another process group): stop it.
    let _ = Command::new("kill").arg(first.2.to_string()).status();
}

/// Whether a process is alive (not a zombie).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.contains(") Z "))
        .unwrap_or(false)
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {pid}");
}

/// The stalled worker: the daemon running a handler's agent is stopped
/// (SIGSTOP) past its lease, the other daemon takes the handler over;
/// continued (SIGCONT), the stalled daemon learns at its next heartbeat
/// that the lease is gone and stops its agent, and what it then writes as
/// the old owner (the end of that agent's run) changes nothing.
#[test]
fn a_stalled_daemon_resumed_after_a_takeover_changes_nothing_and_stops_its_agent() {
    let db = scratch();
    let url = db.url();
    let marks = tempfile::tempdir().unwrap();
    let (a, b) = (TestHome::new(), TestHome::new());
    for h in [&a, &b] {
        let init = h
            .command(&["init"])
            .env("AGENCY_STORE_URL", url)
            .output()
            .unwrap();
        assert!(init.status.success(), "{init:?}");
        std::fs::write(h.dir.join("agency.toml"), shared_config(url, marks.path())).unwrap();
    }
    // A alone at first, so that it takes the work.
    let da = a.serve();
    a.ok(&["send", "work"]);
    let first = wait_for("no agent", || a.log(), || new_mark(marks.path(), None));
    assert_eq!(first.1, mcp_url(&a));
    let db_ = b.serve();
    signal(da.pid(), "-STOP");
    let second = wait_for(
        "no takeover",
        || b.log(),
        || new_mark(marks.path(), Some(&first.0)),
    );
    assert_eq!(second.1, mcp_url(&b), "B took over");
    let reason_of = |agent: &str| -> String {
        let runs = b.json(&["runs"]);
        runs.as_array()
            .unwrap()
            .iter()
            .find(|r| r["agent"] == agent)
            .map(|r| r["end_reason"].as_str().unwrap_or("").to_owned())
            .unwrap_or_default()
    };
    let taken = reason_of(&first.0);
    assert!(taken.contains("taken over"), "{taken}");
    assert!(alive(first.2), "A's agent still runs while A is stopped");

    signal(da.pid(), "-CONT");
    // A's next heartbeat finds the lease gone: it stops its agent.
    wait_for(
        "A did not stop its agent",
        || a.log(),
        || (!alive(first.2)).then_some(()),
    );
    // Its report on that agent was refused: the record is B's takeover.
    let daemon_log = || std::fs::read_to_string(a.dir.join("logs/daemon.log")).unwrap_or_default();
    wait_for("A's report was not refused", daemon_log, || {
        daemon_log()
            .contains("another daemon holds its handler's lease")
            .then_some(())
    });
    assert_eq!(
        reason_of(&first.0),
        taken,
        "nothing the old owner wrote landed"
    );
    // B's agent is untouched.
    assert!(alive(second.2));
    da.terminate();
    db_.terminate();
}

/// Wake-ups travel between daemons as the database's notifications: mail
/// sent through a daemon that runs no agents starts the agent on the
/// daemon that does, although that one's heartbeat (its poll) is ten
/// minutes away.
#[test]
fn mail_sent_through_one_daemon_wakes_the_other_at_once() {
    let db = scratch();
    let url = db.url();
    let marks = tempfile::tempdir().unwrap();
    let (a, b) = (TestHome::new(), TestHome::new());
    let slow = shared_config(url, marks.path())
        .replace("lease_ms = 5000", "lease_ms = 1800000")
        .replace("heartbeat_ms = 500", "heartbeat_ms = 600000");
    for (h, config) in [
        (&a, slow.clone()),
        (
            &b,
            slow.replace("runtime = \"command\"", "runtime = \"none\""),
        ),
    ] {
        let init = h
            .command(&["init"])
            .env("AGENCY_STORE_URL", url)
            .output()
            .unwrap();
        assert!(init.status.success(), "{init:?}");
        std::fs::write(h.dir.join("agency.toml"), config).unwrap();
    }
    let da = a.serve();
    let db_ = b.serve();
    b.ok(&["send", "work, sent through the daemon without agents"]);
    let started = wait_for("not woken", || a.log(), || new_mark(marks.path(), None));
    assert_eq!(started.1, mcp_url(&a));
    da.terminate();
    db_.terminate();
}

/// A TCP forwarder to the database that the test can cut: the daemon
/// behind it loses the database as if the network went away.
struct Cuttable {
    addr: std::net::SocketAddr,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
    open: std::sync::Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
}

impl Cuttable {
    fn to(target: String) -> Cuttable {
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let cut = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let open = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (c, o) = (cut.clone(), open.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                if c.load(Ordering::SeqCst) {
                    continue; // dropped: refused
                }
                let Ok(server) = std::net::TcpStream::connect(&target) else {
                    continue;
                };
                let mut kept = o.lock().unwrap();
                kept.push(client.try_clone().unwrap());
                kept.push(server.try_clone().unwrap());
                for (mut from, mut to) in [
                    (client.try_clone().unwrap(), server.try_clone().unwrap()),
                    (server, client),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        Cuttable { addr, cut, open }
    }

    fn cut(&self) {
        self.cut.store(true, std::sync::atomic::Ordering::SeqCst);
        for s in self.open.lock().unwrap().drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// `url` with its host and port replaced by `addr`.
fn via(url: &str, addr: std::net::SocketAddr) -> (String, String) {
    let (scheme, rest) = url.split_once("://").unwrap();
    let (auth, path) = rest.split_once('/').unwrap();
    let (user, hostport) = match auth.rsplit_once('@') {
        Some((u, h)) => (format!("{u}@"), h),
        None => (String::new(), auth),
    };
    let target = if hostport.contains(':') {
        hostport.to_owned()
    } else {
        format!("{hostport}:5432")
    };
    (format!("{scheme}://{user}{addr}/{path}"), target)
}

/// A daemon cut off from the database for longer than its lease stops
/// acting as the owner: it stops its agents, and another daemon takes the
/// handler over.
#[test]
fn a_daemon_cut_off_from_the_database_stops_its_agents_and_another_takes_over() {
    let db = scratch();
    let url = db.url();
    let (a_url, target) = via(url, "127.0.0.1:9".parse().unwrap());
    let proxy = Cuttable::to(target);
    let a_url = a_url.replace("127.0.0.1:9", &proxy.addr.to_string());
    let marks = tempfile::tempdir().unwrap();
    let (a, b) = (TestHome::new(), TestHome::new());
    for (h, u) in [(&a, a_url.as_str()), (&b, url)] {
        let init = h
            .command(&["init"])
            .env("AGENCY_STORE_URL", u)
            .output()
            .unwrap();
        assert!(init.status.success(), "{init:?}");
        std::fs::write(h.dir.join("agency.toml"), shared_config(u, marks.path())).unwrap();
    }
    let da = a.serve();
    a.ok(&["send", "work"]);
    let first = wait_for("no agent", || a.log(), || new_mark(marks.path(), None));
    assert_eq!(first.1, mcp_url(&a));
    let db_ = b.serve();
    proxy.cut();
    wait_for(
        "the cut-off daemon did not stop its agent",
        || std::fs::read_to_string(a.dir.join("logs/daemon.log")).unwrap_or_default(),
        || (!alive(first.2)).then_some(()),
    );
    let second = wait_for(
        "no takeover",
        || b.log(),
        || new_mark(marks.path(), Some(&first.0)),
    );
    assert_eq!(second.1, mcp_url(&b), "B took over");
    db_.terminate();
    // A cannot reach its store to stop cleanly: killed.
    da.sigkill();
}
