//! A temporary Agency home for tests that drive the real `agency` binary:
//! the binary run with that home (and nothing else of the caller's
//! environment that could change its behaviour), `agency serve` started on
//! it and stopped, and insta redactions for what differs between runs.
//! Declared once in `main.rs`; test modules `use crate::home`.

// Shared by several test binaries, each of which uses only part of it.
#![allow(dead_code)]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_agency");

/// A temporary home (`<tmp>/home`; the daemon's log and token files go
/// beside it).
pub struct TestHome {
    pub tmp: tempfile::TempDir,
    pub dir: PathBuf,
}

/// One run of the binary: its exit code and output.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl TestHome {
    pub fn new() -> TestHome {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("home");
        TestHome { tmp, dir }
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.with_file_name("serve.log")
    }

    /// The binary with this home in `AGENCY_HOME` (and nothing else of the
    /// caller's environment that could change its behaviour).
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(BIN);
        c.args(args)
            .env("AGENCY_HOME", &self.dir)
            .env("HOME", self.dir.with_file_name("user"))
            .env_remove("RUST_LOG")
            // Tables whole (full ids, RFC 3339 times), as these tests were
            // written for; the default layout has its own tests (issue 28).
            .env("AGENCY_WIDE", "1")
            .stdin(Stdio::null());
        c
    }

    pub fn run(&self, args: &[&str]) -> Run {
        self.run_with_stdin(args, None)
    }

    /// Run with `stdin` (if any) written to the binary's standard input.
    pub fn run_with_stdin(&self, args: &[&str], stdin: Option<&[u8]>) -> Run {
        let mut c = self.command(args);
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        if stdin.is_some() {
            c.stdin(Stdio::piped());
        }
        let mut child = c.spawn().unwrap();
        if let Some(bytes) = stdin {
            let mut pipe = child.stdin.take().unwrap();
            // A command that exits early closes the pipe: not our failure.
            let _ = pipe.write_all(bytes);
        }
        let out = child.wait_with_output().unwrap();
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8(out.stdout).unwrap(),
            stderr: String::from_utf8(out.stderr).unwrap(),
        }
    }

    /// Run and require exit 0; stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let r = self.run(args);
        assert_eq!(
            r.code, 0,
            "agency {args:?} failed: {}{}",
            r.stdout, r.stderr
        );
        r.stdout
    }

    pub fn json(&self, args: &[&str]) -> Value {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        serde_json::from_str(&self.ok(&a)).unwrap()
    }

    /// `agency init`, then `config` (unless empty) as its `agency.toml`.
    pub fn init_with(&self, config: &str) {
        self.ok(&["init"]);
        if !config.is_empty() {
            std::fs::write(self.dir.join("agency.toml"), config).unwrap();
        }
    }

    /// Start `agency serve` and wait (bounded) until it answers.
    pub fn serve(&self) -> Daemon {
        self.serve_with(&[])
    }

    /// `serve` with these variables added to its environment.
    pub fn serve_with(&self, env: &[(&str, &str)]) -> Daemon {
        let log = std::fs::File::create(self.log_path()).unwrap();
        let child = self
            .command(&["serve"])
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let daemon = Daemon { child };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if self.dir.join("daemon.json").exists() && self.run(&["status"]).code == 0 {
                return daemon;
            }
            assert!(
                Instant::now() < deadline,
                "the daemon did not start: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The daemon's stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// The running daemon's root handler.
    pub fn root(&self) -> String {
        self.json(&["status"])["root_handler"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// A token minted for an external agent of `handler`.
    pub fn mint(&self, handler: &str) -> String {
        self.ok(&["token", "mint", "--handler", handler])
            .trim()
            .to_owned()
    }

    /// Redactions for everything that differs between runs.
    pub fn settings(&self) -> insta::Settings {
        let mut s = insta::Settings::clone_current();
        // The temporary directory holding the home, the log and tokens.
        s.add_filter(&escape(&self.tmp.path().display().to_string()), "[TMP]");
        s.add_filter(r"blake3:[0-9a-f]{64}", "[HASH]");
        s.add_filter(r"agency_[0-9a-f]{64}", "[TOKEN]");
        s.add_filter(
            r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
            "[UUID]",
        );
        s.add_filter(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z", "[TIME]");
        s.add_filter(r"127\.0\.0\.1:\d+", "[ADDR]");
        s.add_filter(r"(pid\s+)\d+", "$1[PID]");
        s
    }
}

/// Regex-escape a path for an insta filter.
pub fn escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$#&-~".contains(c);
            special.then_some('\\').into_iter().chain([c])
        })
        .collect()
}

/// Spawn `c` with its stdin, stdout and stderr all piped.
pub fn spawn_piped(c: &mut Command) -> Child {
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The `agency serve` child; killed if a test fails before stopping it.
pub struct Daemon {
    child: Child,
}

impl Daemon {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL: no destructor, no graceful stop; reaped.
    pub fn sigkill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then wait (bounded) for a clean exit.
    pub fn terminate(mut self) -> ExitStatus {
        let pid = self.child.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the daemon did not stop on SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Wait (bounded) for the daemon to exit on its own.
    pub fn wait_exit(&mut self) -> ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(Instant::now() < deadline, "agency serve did not exit");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Daemon {
    /// SIGTERM first, so the daemon stops its agents and removes its
    /// cgroups (a SIGKILLed daemon leaves an empty one behind in
    /// `/sys/fs/cgroup` for every test home); SIGKILL if it does not exit.
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_some() {
            return;
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.child.try_wait().ok().flatten().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
