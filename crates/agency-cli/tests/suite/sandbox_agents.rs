//! Issue 10 items 3 and 6, at the daemon's level: agents run by the real
//! `agency serve` (the `command` runtime, a shell script playing a
//! prompt-injected agent) try to leave their sandbox, and fail. Each
//! attempt would succeed without the sandbox (the `off` test shows that
//! for the first one), so each test fails if the sandbox is removed.
//!
//! Results come back through a directory the test grants with
//! `[sandbox].read_write` (outside the home): one file per attempt, `OK`
//! or `DENIED`, with the attempt's output beside it. Attempts that must
//! succeed (writing the workspace, reading `/etc/passwd`, connecting to
//! the daemon's own port) are controls: they show the probe itself works.

#![allow(clippy::unwrap_used)]

use crate::agent_story;
use crate::probe;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agent_story::{Story, agency, alive, json};
use probe::{assert_denied, assert_ok, config, granting, preamble, result, send};

/// Live processes carrying the agent's mark in their environment.
fn processes_of(agent: &str) -> Vec<u32> {
    let mark = format!("AGENCY_AGENT={agent}");
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid: u32 = e.file_name().to_str()?.parse().ok()?;
            let env = std::fs::read(e.path().join("environ")).ok()?;
            (env.split(|b| *b == 0).any(|kv| kv == mark.as_bytes()) && alive(pid)).then_some(pid)
        })
        .collect()
}

/// The live agent's id, once there is one.
async fn live_agent(story: &Story) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let agents = json(&story.home, &["agents"]);
        if let Some(a) = agents["live"].as_array().unwrap().first() {
            return a["id"].as_str().unwrap().to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "no live agent: {agents}; log:\n{}",
            story.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The escape attempts of item 6 a shell can make, in one agent: the
/// home's secrets, another agent's run directory, writing outside the
/// workspace, a symlink out of it, the daemon's /proc entries, a signal to
/// the daemon, and a loopback port that is not the daemon's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue10_item6_an_agent_cannot_leave_its_sandbox() {
    let out = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let stray = elsewhere.path().join("escaped");
    // A loopback server that is not the daemon's: nothing may reach it.
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    other.set_nonblocking(true).unwrap();
    let other_port = other.local_addr().unwrap().port();
    let script = format!(
        r#"{pre}
r token cat "$H/admin.token"
r db head -c 16 "$H/agency.db"
r config cat "$H/agency.toml"
r list_home ls "$H"
r other_run cat "$H/run/planted/run/token"
r list_runs ls "$H/run"
r write_home sh -c 'echo x > "$0/evil"' "$H"
r write_elsewhere sh -c 'echo x > {stray:?}'
r make_link ln -s "$H/admin.token" link
r follow_link cat link
r make_home_link ln -s "$H" homelink
r follow_home_link cat homelink/admin.token
r daemon_environ cat /proc/$PPID/environ
r daemon_fd sh -c 'for f in /proc/$0/fd/*; do if [ "$(readlink "$f")" = "$1/agency.db" ]; then exec head -c 15 "$f"; fi; done; exit 1' "$PPID" "$H"
r daemon_root cat /proc/$PPID/root$H/admin.token
r signal_daemon kill -0 $PPID
r other_port bash -c 'exec 3<>/dev/tcp/127.0.0.1/{other_port}'
P=${{AGENCY_MCP_URL#http://127.0.0.1:}}; P=${{P%%/*}}
r daemon_port bash -c "exec 3<>/dev/tcp/127.0.0.1/$P"
r write_workspace sh -c 'echo x > ./mine && cat ./mine'
r read_etc cat /etc/passwd
echo done > "$O/done"
exec sleep 300
"#,
        pre = preamble(out.path()),
    );
    let marker = format!("daemon-env-{}", uuid::Uuid::new_v4().simple());
    let story = Story::start_with_env(
        &config(&script, "", &granting(out.path(), "")),
        Duration::from_secs(60),
        &[("LEAK_DAEMON_MARKER", &marker)],
    )
    .await;
    // Another agent's run directory, with its token.
    let planted = story.home.join("run/planted/run");
    std::fs::create_dir_all(&planted).unwrap();
    std::fs::write(planted.join("token"), "agency_other_agents_token").unwrap();
    send(&story);
    story
        .wait_file(&out.path().join("done"), Duration::from_secs(60))
        .await;

    for name in [
        "token",
        "db",
        "config",
        "list_home",
        "other_run",
        "list_runs",
        "write_home",
        "write_elsewhere",
        "follow_link",
        "follow_home_link",
        "daemon_environ",
        "daemon_fd",
        "daemon_root",
        "signal_daemon",
        "other_port",
    ] {
        assert_denied(out.path(), name);
    }
    for name in [
        "make_link",
        "make_home_link",
        "daemon_port",
        "write_workspace",
        "read_etc",
    ] {
        assert_ok(out.path(), name);
    }
    assert!(!stray.exists() && !story.home.join("evil").exists());
    assert!(
        !std::fs::read_to_string(out.path().join("daemon_environ.out"))
            .unwrap()
            .contains(&marker)
    );
    assert!(
        other.accept().is_err(),
        "the agent reached a loopback port that is not the daemon's"
    );
    story.stop();
}

/// Issue 33, the store on PostgreSQL: the database is a port on loopback
/// that holds every row of every handler, with no permission check of
/// Agency's in front of it (trust authentication here, as on this
/// machine). A confined agent of a daemon on that store cannot connect to
/// it, and finds its URL neither in its environment nor in the daemon's.
/// The control (the daemon's own port) shows the probe connects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue33_an_agent_cannot_reach_the_postgres_store() {
    let db = agency_postgres::scratch::ScratchDb::create(
        &agency_postgres::scratch::admin_url().expect("PostgreSQL is configured (scripts/test.sh)"),
    )
    .unwrap();
    // postgres://user@host:port/name
    let port: u16 = db
        .url()
        .rsplit_once('@')
        .and_then(|(_, at)| at.split_once('/'))
        .and_then(|(addr, _)| addr.rsplit_once(':'))
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or(5432);
    let out = tempfile::tempdir().unwrap();
    let script = format!(
        r#"{pre}
r db_port bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}'
r db_localhost bash -c 'exec 3<>/dev/tcp/localhost/{port}'
r env_url sh -c 'env | grep -i postgres'
r daemon_environ cat /proc/$PPID/environ
r config cat "$H/agency.toml"
P=${{AGENCY_MCP_URL#http://127.0.0.1:}}; P=${{P%%/*}}
r daemon_port bash -c "exec 3<>/dev/tcp/127.0.0.1/$P"
echo done > "$O/done"
exec sleep 300
"#,
        pre = preamble(out.path()),
    );
    let config = format!(
        "{}[store]\nurl = {:?}\n",
        config(&script, "", &granting(out.path(), "")),
        db.url()
    );
    let story = Story::start_on_store(&config, Duration::from_secs(60), db.url()).await;
    send(&story);
    story
        .wait_file(&out.path().join("done"), Duration::from_secs(60))
        .await;
    for name in [
        "db_port",
        "db_localhost",
        "env_url",
        "daemon_environ",
        "config",
    ] {
        assert_denied(out.path(), name);
    }
    assert_ok(out.path(), "daemon_port");
    let status = json(&story.home, &["status"]);
    assert!(
        status["lease_owner"].is_string(),
        "the daemon runs on the shared store: {status}"
    );
    story.stop();
}

/// A fork bomb is bounded by `[sandbox] max_processes` (the agent's
/// cgroup), and the daemon answers meanwhile. The bomb is a binary tree of
/// sleeping shells (each starts a `sleep`, then two subtrees, then waits),
/// about 1,500 processes unconfined, so the test cannot take the machine
/// down if the limit is missing; the agent's own shell stays out of it,
/// so a failed fork does not end the agent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue10_item6_a_fork_bomb_is_bounded_and_the_daemon_stays_responsive() {
    const LIMIT: usize = 24;
    let out = tempfile::tempdir().unwrap();
    let script = format!(
        "{pre}echo started > \"$O/started\"\nb() {{ sleep 120 & if [ $1 -gt 0 ]; then b $(($1-1)) & b $(($1-1)) & fi; wait; }}\n(b 8) &\nexec sleep 300\n",
        pre = preamble(out.path())
    );
    let story = Story::start(
        &config(
            &script,
            "",
            &granting(out.path(), &format!("max_processes = {LIMIT}\n")),
        ),
        Duration::from_secs(60),
    )
    .await;
    send(&story);
    let agent = live_agent(&story).await;
    story
        .wait_file(&out.path().join("started"), Duration::from_secs(60))
        .await;
    // Until the tree stops growing: sample while the daemon is asked for
    // its status.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut most = 0;
    let mut quiet_since = Instant::now();
    loop {
        let n = processes_of(&agent).len();
        if n > most {
            most = n;
            quiet_since = Instant::now();
        }
        let (code, status, err) = agency(&story.home, &["status"]);
        assert_eq!(code, 0, "the daemon did not answer during the bomb: {err}");
        assert!(status.contains("running"), "{status}");
        if most >= LIMIT / 2 && quiet_since.elapsed() > Duration::from_secs(2) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the bomb never grew (most {most}); log:\n{}",
            story.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        most <= LIMIT,
        "{most} processes of the agent alive at once, limit {LIMIT}"
    );
    // Stopping the agent leaves nothing of the bomb.
    let (code, _, err) = agency(&story.home, &["token", "revoke", &agent]);
    assert_eq!(code, 0, "{err}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !processes_of(&agent).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the bomb outlived its agent: {:?}",
            processes_of(&agent)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    story.stop();
}

/// A daemon whose agent starts a child in a session of its own (out of
/// its process group, which is all a stop used to reach), records the
/// child's pid in `$O/child`, then runs `rest`; the user has sent work.
async fn setsid_story(out: &Path, rest: &str) -> Story {
    let script = format!(
        "{pre}setsid sh -c 'echo $$ > \"$0/child\"; exec sleep 300' \"$O\" &\nwhile [ ! -s \"$O/child\" ]; do sleep 0.05; done\n{rest}\n",
        pre = preamble(out)
    );
    let story = Story::start(
        &config(&script, "", &granting(out, "")),
        Duration::from_secs(60),
    )
    .await;
    send(&story);
    story
}

async fn setsid_child(out: &Path, story: &Story) -> u32 {
    let pid: u32 = story
        .wait_file(&out.join("child"), Duration::from_secs(60))
        .await
        .trim()
        .parse()
        .unwrap();
    assert!(alive(pid));
    pid
}

/// Force-stopping an agent (its token revoked: the supervisor stops its
/// process group, then its cgroup) leaves no process behind, even one
/// that called `setsid`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue10_item6_a_setsid_child_dies_with_its_force_stopped_agent() {
    let out = tempfile::tempdir().unwrap();
    let story = setsid_story(out.path(), "exec sleep 300").await;
    let agent = live_agent(&story).await;
    let child = setsid_child(out.path(), &story).await;
    let (code, _, err) = agency(&story.home, &["token", "revoke", &agent]);
    assert_eq!(code, 0, "{err}");
    story
        .wait_gone(child, "the setsid child", Duration::from_secs(30))
        .await;
    story.stop();
}

/// An agent whose leader exits on its own leaves nothing behind either;
/// nor does one stopped by the daemon's shutdown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue10_item3_a_setsid_child_dies_when_its_agent_exits_or_the_daemon_stops() {
    let out = tempfile::tempdir().unwrap();
    // The agent exits only once the test has seen its child alive: exiting
    // at once let the cgroup kill take the child before the test looked.
    let story = setsid_story(
        out.path(),
        "while [ ! -e \"$O/seen\" ]; do sleep 0.05; done\nexit 0",
    )
    .await;
    let child = setsid_child(out.path(), &story).await;
    std::fs::write(out.path().join("seen"), "").unwrap();
    story
        .wait_gone(
            child,
            "the setsid child of an agent that exited",
            Duration::from_secs(30),
        )
        .await;
    story.stop();

    let out = tempfile::tempdir().unwrap();
    let story = setsid_story(out.path(), "exec sleep 300").await;
    let child = setsid_child(out.path(), &story).await;
    story.stop();
    assert!(
        !alive(child),
        "the setsid child outlived the daemon's shutdown"
    );
}

/// An extra MCP server is confined too: the daemon runs it in a sandbox
/// of its own (issue 27), and it cannot read the admin token either. The
/// agent starts the launcher from its MCP configuration and initializes,
/// as an MCP client would, which has the daemon start the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue10_item3_an_extra_mcp_server_is_confined_with_its_agent() {
    let out = tempfile::tempdir().unwrap();
    let o = out.path().display().to_string();
    let server = format!(
        "H=${{HOME%/run/*/run/home}}; if cat \"$H/admin.token\" > {o:?}/server.out 2>&1; then echo OK > {o:?}/server; else echo DENIED > {o:?}/server; fi"
    );
    std::fs::write(
        out.path().join("launch.py"),
        r#"import json, os, subprocess
entry = json.load(open(os.environ["AGENCY_MCP_CONFIG"]))["mcpServers"]["probe"]
env = dict(os.environ)
env.update(entry["env"])
init = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}\n'
subprocess.run([entry["command"]] + entry["args"], env=env, input=init, timeout=60)
"#,
    )
    .unwrap();
    let script = format!(
        "{pre}python3 \"$O/launch.py\" > \"$O/launch.out\" 2>&1\necho done > \"$O/done\"\nexec sleep 300\n",
        pre = preamble(out.path()),
    );
    let more = format!("[mcp_servers.probe]\ncommand = \"sh\"\nargs = [\"-c\", {server:?}]\n");
    let story = Story::start(
        &config(
            &script,
            &format!("agency_program = {:?}\n", agent_story::BIN),
            &format!("{more}{}", granting(out.path(), "")),
        ),
        Duration::from_secs(60),
    )
    .await;
    let root = json(&story.home, &["handlers"])[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (code, _, err) = agency(&story.home, &["grant", &root, "mcp_server:probe", "read"]);
    assert_eq!(code, 0, "{err}");
    send(&story);
    story
        .wait_file(&out.path().join("done"), Duration::from_secs(60))
        .await;
    let launched = std::fs::read_to_string(out.path().join("launch.out")).unwrap_or_default();
    let r = result(out.path(), "server");
    assert!(
        r.starts_with("DENIED"),
        "the extra MCP server read the admin token: {r}; launcher: {launched}"
    );
    story.stop();
}

/// `agents.sandbox = "off"`: agents run unconfined (the first escape of
/// the test above succeeds), `agency serve` warns once at start and
/// `agency status` on every call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue10_item3_sandbox_off_runs_unconfined_and_status_says_so() {
    let out = tempfile::tempdir().unwrap();
    let script = format!(
        "{pre}r token cat \"$H/admin.token\"\necho done > \"$O/done\"\nexec sleep 300\n",
        pre = preamble(out.path())
    );
    let story = Story::start(
        &config(&script, "sandbox = \"off\"\n", &granting(out.path(), "")),
        Duration::from_secs(60),
    )
    .await;
    send(&story);
    story
        .wait_file(&out.path().join("done"), Duration::from_secs(60))
        .await;
    assert_ok(out.path(), "token");
    for _ in 0..2 {
        let (code, status, err) = agency(&story.home, &["status"]);
        assert_eq!(code, 0, "{err}");
        assert!(
            status.contains("agents run UNCONFINED (agents.sandbox = \"off\""),
            "{status}"
        );
        assert!(
            status.contains("agent sandbox     OFF (agents run unconfined)"),
            "{status}"
        );
    }
    assert_eq!(json(&story.home, &["status"])["sandbox"], "off");
    assert!(
        story
            .log()
            .contains("warning: agents run UNCONFINED (agents.sandbox = \"off\""),
        "{}",
        story.log()
    );
    story.stop();
}

/// Fail closed: a sandbox that cannot be built (here a toolchain that does
/// not exist) keeps the agent from starting; its run is recorded as
/// failed with the cause and the way out, and the daemon's log says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue10_item3_a_sandbox_that_cannot_be_applied_keeps_the_agent_from_starting() {
    let out = tempfile::tempdir().unwrap();
    let missing = PathBuf::from(format!("/nonexistent-{}", uuid::Uuid::new_v4().simple()));
    let script = format!(
        "{pre}echo ran > \"$O/ran\"\nexec sleep 300\n",
        pre = preamble(out.path())
    );
    let story = Story::start(
        &config(
            &script,
            "",
            &format!(
                "[sandbox]\ntoolchains = [{:?}]\nread_write = [{:?}]\n",
                missing.display().to_string(),
                out.path().display().to_string()
            ),
        ),
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(json(&story.home, &["status"])["sandbox"], "on");
    send(&story);
    let deadline = Instant::now() + Duration::from_secs(60);
    let reason = loop {
        let runs = json(&story.home, &["runs"]);
        if let Some(r) = runs
            .as_array()
            .unwrap()
            .iter()
            .find_map(|r| r["end_reason"].as_str())
        {
            break r.to_owned();
        }
        assert!(Instant::now() < deadline, "no failed run: {runs}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(reason.contains("failed to confine the agent"), "{reason}");
    assert!(reason.contains(&missing.display().to_string()), "{reason}");
    assert!(reason.contains("agents.sandbox = \"off\""), "{reason}");
    assert!(!out.path().join("ran").exists(), "the agent ran unconfined");
    // The log line may reach the file a moment after the run is recorded
    // (a CI run read the log before it did): wait for it.
    loop {
        let log = std::fs::read_to_string(story.home.join("logs/daemon.log")).unwrap();
        if log.contains("failed to start an agent") && log.contains("failed to confine the agent") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the daemon's log does not say why: {log}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    story.stop();
}
