//! The story both runtime tests play: a real `agency serve` with a given
//! `[agents]` configuration, the user asks the root handler for a guide,
//! the root's agent (scripted by the model server) answers by mail. Shared
//! so that each runtime test holds only what is particular to its runtime.

// Shared by several test binaries, each of which uses only part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_agency");

/// The root's run: bare tool names (the model server spells them the way
/// the client offers them, e.g. `mcp__agency__…` for Claude Code).
pub const SCRIPT: &str = r#"{
  "scenarios": [{
    "name": "root",
    "match": { "system_contains": "Help the user accomplish all their work" },
    "turns": [
      { "tool_calls": [ { "name": "mail_inbox", "input": {} } ] },
      { "tool_calls": [ { "name": "mail_ack", "input": { "messages": ["{{result:/messages/0/id}}"] } } ] },
      { "tool_calls": [ { "name": "kb_create", "input": { "description": "Composting guide", "content": "Greens and browns, kept moist." } } ] },
      { "tool_calls": [ { "name": "mail_send", "input": { "to": "boss", "file": "{{result:/file}}", "subject": "Your composting guide" } } ] },
      { "tool_calls": [ { "name": "audit_submit", "input": { "summary": "Wrote the guide and sent it to the user." } } ] },
      { "text": "Done: the guide is in your inbox." }
    ]
  }],
  "fallback": { "text": "ok" }
}"#;

/// The real Claude Code CLI, from `AGENCY_CLAUDE_BIN` (scripts/test.sh
/// installs it with npm and sets it). Tests that need it fail without it:
/// they are never skipped.
pub fn claude_bin() -> String {
    match std::env::var("AGENCY_CLAUDE_BIN") {
        Ok(p) if !p.is_empty() && Path::new(&p).exists() => p,
        Ok(p) if !p.is_empty() => panic!(
            "AGENCY_CLAUDE_BIN={p} does not exist; install Claude Code with \
             `npm install --prefix target/claude-code @anthropic-ai/claude-code` \
             (scripts/test.sh does this)"
        ),
        _ => panic!(
            "AGENCY_CLAUDE_BIN is not set: this test runs the real Claude Code CLI. \
             Install it with `npm install --prefix target/claude-code @anthropic-ai/claude-code` \
             and set AGENCY_CLAUDE_BIN to the absolute path of target/claude-code/node_modules/.bin/claude \
             (scripts/test.sh does both)"
        ),
    }
}

pub fn agency(home: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .env("AGENCY_HOME", home)
        // Tables whole (full ids, RFC 3339 times), as these tests were
        // written for; the default layout has its own tests (issue 28).
        .env("AGENCY_WIDE", "1")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub fn json(home: &Path, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let (code, out, err) = agency(home, &all);
    assert_eq!(code, 0, "agency {args:?}: {err}");
    serde_json::from_str(&out).unwrap()
}

/// `agency --json transcript AGENT`, which must succeed: one JSON event
/// a line.
pub fn transcript(home: &Path, agent: &str) -> String {
    let (code, raw, err) = agency(home, &["--json", "transcript", agent]);
    assert_eq!(code, 0, "{err}");
    raw
}

/// A fresh home (`<tmp>/home`), initialised, with `config` as its
/// `agency.toml`.
pub fn init_home(config: &str) -> (tempfile::TempDir, PathBuf) {
    init_home_with_policy(config, Some(WALLS_ONLY_POLICY))
}

/// The `policy.toml` of story homes: the policy's defaults off, so that
/// these stories test the other walls (sandbox, capabilities) on their
/// own; the policy and approvals have tests of their own
/// (`approvals.rs`, `approvals_runtimes.rs`).
pub const WALLS_ONLY_POLICY: &str = "defaults = false\n";

/// As `init_home`, with `policy` (if any) as the home's `policy.toml`.
pub fn init_home_with_policy(config: &str, policy: Option<&str>) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let (code, _, err) = agency(&home, &["init"]);
    assert_eq!(code, 0, "{err}");
    std::fs::write(home.join("agency.toml"), config).unwrap();
    if let Some(p) = policy {
        std::fs::write(home.join("policy.toml"), p).unwrap();
    }
    (tmp, home)
}

/// `agency serve` on `home`, its stdout dropped and its stderr to `log`.
pub fn serve_command(home: &Path, log: std::fs::File) -> Command {
    let mut c = Command::new(BIN);
    c.arg("serve")
        .env("AGENCY_HOME", home)
        .stdout(Stdio::null())
        .stderr(log);
    c
}

/// SIGTERM the daemon; it must exit cleanly.
pub fn terminate(serve: &mut Child) {
    Command::new("kill")
        .arg("-TERM")
        .arg(serve.id().to_string())
        .status()
        .unwrap();
    assert!(serve.wait().unwrap().success());
}

/// Whether `pid` is alive (a zombie nobody reaped yet is not).
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .and_then(|(_, r)| r.split_whitespace().next().map(|st| st != "Z"))
        })
        .unwrap_or(false)
}

/// A daemon serving a fresh home with the given extra configuration.
pub struct Story {
    pub tmp: tempfile::TempDir,
    pub home: PathBuf,
    serve: Child,
    deadline: Instant,
    /// Extra variables of the daemon's environment (kept for a restart).
    env: Vec<(String, String)>,
}

impl Story {
    pub async fn start(config: &str, timeout: Duration) -> Story {
        Story::start_with_env(config, timeout, &[]).await
    }

    /// As `start`, with extra variables in the daemon's environment.
    pub async fn start_with_env(config: &str, timeout: Duration, env: &[(&str, &str)]) -> Story {
        Story::start_full(config, timeout, env, Some(WALLS_ONLY_POLICY)).await
    }

    /// As `start`, with the home's `policy.toml` (`None`: the defaults).
    pub async fn start_with_policy(config: &str, timeout: Duration, policy: Option<&str>) -> Story {
        Story::start_full(config, timeout, &[], policy).await
    }

    /// As `start_with_env`, with the store in the database `url` names
    /// (`AGENCY_STORE_URL` for `init`, which makes the root handler
    /// there, and for the daemon).
    pub async fn start_on_store(config: &str, timeout: Duration, url: &str) -> Story {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let init = Command::new(BIN)
            .arg("init")
            .env("AGENCY_HOME", &home)
            .env("AGENCY_STORE_URL", url)
            .output()
            .unwrap();
        assert!(init.status.success(), "{init:?}");
        std::fs::write(home.join("agency.toml"), config).unwrap();
        std::fs::write(home.join("policy.toml"), WALLS_ONLY_POLICY).unwrap();
        Story::serve_home(tmp, home, timeout, &[("AGENCY_STORE_URL", url)]).await
    }

    async fn start_full(
        config: &str,
        timeout: Duration,
        env: &[(&str, &str)],
        policy: Option<&str>,
    ) -> Story {
        let (tmp, home) = init_home_with_policy(config, policy);
        Story::serve_home(tmp, home, timeout, env).await
    }

    async fn serve_home(
        tmp: tempfile::TempDir,
        home: PathBuf,
        timeout: Duration,
        env: &[(&str, &str)],
    ) -> Story {
        let log = std::fs::File::create(tmp.path().join("serve.log")).unwrap();
        let serve = serve_command(&home, log)
            .envs(env.iter().copied())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + timeout;
        while !home.join("daemon.json").exists() {
            assert!(Instant::now() < deadline, "the daemon did not start");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Story {
            tmp,
            home,
            serve,
            deadline,
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    /// Ask for the guide; wait for the answer in the user's inbox, then for
    /// the agent to end. Returns the answer and the ended agent.
    pub async fn ask_and_wait(&self) -> (Value, Value) {
        let (code, _, err) = agency(&self.home, &["send", "Please write me a composting guide"]);
        assert_eq!(code, 0, "{err}");
        let reply = loop {
            let inbox = json(&self.home, &["inbox"]);
            if let Some(m) = inbox
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["subject"] == "Your composting guide")
            {
                break m.clone();
            }
            assert!(
                Instant::now() < self.deadline,
                "no reply; daemon log:\n{}",
                std::fs::read_to_string(self.tmp.path().join("serve.log")).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let agent = self.wait_for_the_agent(self.deadline).await;
        (reply, agent)
    }

    /// Wait (until `deadline`) for no agent to be live and one to have
    /// ended; returns the most recent.
    pub async fn wait_for_the_agent(&self, deadline: Instant) -> Value {
        loop {
            let agents = json(&self.home, &["agents"]);
            let recent = agents["recent"].as_array().unwrap().clone();
            if agents["live"].as_array().unwrap().is_empty()
                && recent.iter().any(|a| !a["ended_at"].is_null())
            {
                return recent[0].clone();
            }
            assert!(
                Instant::now() < deadline,
                "the agent did not end: {agents}\ndaemon log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// What both runtimes must leave: the answer's body, the agent's audit
    /// summary, no workspace, no respawn once the root has no work.
    pub async fn assert_common_outcome(&self, reply: &Value, agent: &Value) {
        assert_eq!(reply["body"], "Greens and browns, kept moist.");
        let log = json(
            &self.home,
            &["audit", &agent["handler"].as_str().unwrap()[..8]],
        );
        assert!(
            log.as_array()
                .unwrap()
                .iter()
                .any(|e| e["summary"] == "Wrote the guide and sent it to the user.")
        );
        // The next agent's standby sandbox (`run/standby-<id>`, no
        // prompt written into it yet) is not an ended agent's.
        let runs = std::fs::read_dir(self.home.join("run"))
            .map(|d| {
                d.flatten()
                    .filter(|e| {
                        !e.file_name().to_string_lossy().starts_with("standby-")
                            || e.path().join("run/prompt.md").exists()
                    })
                    .count()
            })
            .unwrap_or(0);
        assert_eq!(runs, 0, "workspaces are deleted after exit");
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(
            json(&self.home, &["agents"])["recent"]
                .as_array()
                .unwrap()
                .len(),
            1,
            "no respawn without work"
        );
    }

    /// SIGTERM the daemon; it must exit cleanly.
    pub fn stop(mut self) {
        self.halt();
    }

    /// As `stop`, keeping the home for inspection.
    pub fn halt(&mut self) {
        terminate(&mut self.serve);
    }

    /// SIGKILL the daemon (a crash: it stops nothing), then start a new
    /// one on the same home and wait until it serves.
    pub async fn crash_and_restart(&mut self) {
        self.crash();
        self.restart().await;
    }

    /// SIGKILL the daemon: it stops nothing, not even its agents.
    pub fn crash(&mut self) {
        self.serve.kill().unwrap();
        self.serve.wait().unwrap();
    }

    /// Start a new daemon on the home of a crashed one.
    pub async fn restart(&mut self) {
        let _ = std::fs::remove_file(self.home.join("daemon.json"));
        let log = std::fs::OpenOptions::new()
            .append(true)
            .open(self.tmp.path().join("serve.log"))
            .unwrap();
        self.serve = serve_command(&self.home, log)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .spawn()
            .unwrap();
        while !self.home.join("daemon.json").exists() {
            assert!(Instant::now() < self.deadline, "the daemon did not restart");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Wait (at most `within`) for `path` to hold a whole line; returns
    /// what it holds.
    pub async fn wait_file(&self, path: &Path, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            if let Ok(t) = std::fs::read_to_string(path)
                && t.ends_with('\n')
            {
                return t;
            }
            assert!(
                Instant::now() < deadline,
                "{} never appeared; daemon log:\n{}",
                path.display(),
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Wait (at most `within`) until process `pid`, `what`, is gone.
    pub async fn wait_gone(&self, pid: u32, what: &str, within: Duration) {
        let deadline = Instant::now() + within;
        while alive(pid) {
            assert!(
                Instant::now() < deadline,
                "{what} (pid {pid}) still runs; log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The daemon's stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.tmp.path().join("serve.log")).unwrap_or_default()
    }
}

impl Drop for Story {
    /// A test that fails before stopping its daemon still stops it (and
    /// so its agents and their cgroups): SIGTERM, then SIGKILL.
    fn drop(&mut self) {
        if self.serve.try_wait().ok().flatten().is_some() {
            return;
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.serve.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.serve.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.serve.kill();
        let _ = self.serve.wait();
    }
}
