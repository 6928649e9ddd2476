//! The fixture of the `agency sandbox-exec` tests: a temporary directory
//! playing an agent's run directory and a sibling playing `$AGENCY_HOME`,
//! the policy the daemon would grant there, runs of the real binary under
//! it (and unconfined, for the controls), and a cgroup parent removed with
//! the test. Shared so that each test file holds only its attempts.

// Shared by several test binaries, each of which uses only part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agency_sandbox::{AgentCgroup, Cgroups, Limits, Policy};

pub const TOKEN: &str = "admin-token-that-must-not-leak";
pub const PYTHON: &str = "/usr/bin/python3";

/// Numbers the names of policy files and cgroups, unique in a test binary.
static COUNTER: AtomicUsize = AtomicUsize::new(0);

pub struct Sandbox {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    /// The agent's run directory: read-write, its cwd, HOME and TMPDIR.
    pub ws: PathBuf,
    /// A stand-in for `$AGENCY_HOME` with an `admin.token`, outside the
    /// sandbox.
    pub home: PathBuf,
}

impl Sandbox {
    pub fn new() -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let ws = root.join("run/agent");
        let home = root.join("home");
        std::fs::create_dir_all(ws.join("tmp")).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(home.join("admin.token"), TOKEN).unwrap();
        Sandbox {
            _dir: dir,
            root,
            ws,
            home,
        }
    }

    /// What the daemon would grant: the run directory, the system, the
    /// device files; no port, no cgroup, no network namespace.
    pub fn policy(&self) -> Policy {
        self.policy_with(&[], false)
    }

    /// As [`Sandbox::policy`], with `ports` and the namespace or not.
    pub fn policy_with(&self, ports: &[u16], isolate_network: bool) -> Policy {
        let mut read_write = vec![self.ws.clone()];
        read_write.extend(agency_sandbox::system_read_write_files());
        Policy {
            read_write,
            read_only: agency_sandbox::system_read_only(),
            connect_ports: ports.to_vec(),
            limits: Limits {
                max_processes: 0,
                ..Limits::default()
            },
            cgroup_procs: Vec::new(),
            isolate_network,
        }
    }

    /// `policy` as a file in `dir`, for `sandbox-exec --policy`.
    pub fn write_policy(&self, policy: &Policy, dir: &Path) -> PathBuf {
        let file = dir.join(format!(
            "policy-{}.json",
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::write(&file, policy.to_json().unwrap()).unwrap();
        file
    }

    /// `agency sandbox-exec` running `argv` in the sandbox of `policy`.
    pub fn command(&self, policy: &Policy, argv: &[&str]) -> Command {
        let file = self.write_policy(policy, &self.root);
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_agency"));
        cmd.arg("sandbox-exec")
            .arg("--policy")
            .arg(&file)
            .arg("--")
            .args(argv);
        self.env(&mut cmd);
        cmd
    }

    /// The agent's environment: only the run directory's.
    pub fn env(&self, cmd: &mut Command) {
        cmd.current_dir(&self.ws)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", &self.ws)
            .env("TMPDIR", self.ws.join("tmp"))
            .stdin(Stdio::null());
    }

    /// Run `argv` in the sandbox of `policy`.
    pub fn run(&self, policy: &Policy, argv: &[&str]) -> Output {
        self.command(policy, argv).output().unwrap()
    }

    /// Run `sh -c script` in the default sandbox.
    pub fn sh(&self, script: &str) -> Output {
        self.run(&self.policy(), &["sh", "-c", script])
    }

    /// The control: the same script, unconfined.
    pub fn sh_unconfined(&self, script: &str) -> Output {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(script);
        self.env(&mut cmd);
        cmd.output().unwrap()
    }
}

pub fn text(out: &[u8]) -> String {
    String::from_utf8_lossy(out).into_owned()
}

pub fn show(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        text(&o.stdout),
        text(&o.stderr)
    )
}

#[track_caller]
pub fn ok(o: &Output) -> String {
    assert!(o.status.success(), "expected success: {}", show(o));
    text(&o.stdout)
}

/// `agency sandbox-exec` refused to run its program: exit 125 and the
/// error of the set-up `step` that failed.
#[track_caller]
pub fn refused(o: &Output, step: &str) {
    assert_eq!(o.status.code(), Some(125), "{}", show(o));
    assert!(
        text(&o.stderr).starts_with(&format!("failed to apply the sandbox: {step}")),
        "{}",
        show(o)
    );
}

#[track_caller]
pub fn denied(o: &Output) {
    assert!(!o.status.success(), "expected a denial: {}", show(o));
    assert_ne!(
        o.status.code(),
        Some(125),
        "the sandbox was not applied: {}",
        show(o)
    );
}

/// A cgroup parent of this test process, removed (with every agent group
/// and process in it) when dropped.
pub struct TestCgroups(pub Cgroups);

impl TestCgroups {
    pub fn new() -> TestCgroups {
        let name = format!(
            "agency-test-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        TestCgroups(Cgroups::open(&name).unwrap())
    }

    /// An agent's cgroup `name` with `max` processes, and `policy` made to
    /// join it.
    pub fn confine(&self, name: &str, max: u64, mut policy: Policy) -> (AgentCgroup, Policy) {
        let limits = Limits {
            max_processes: max,
            ..Limits::default()
        };
        let group = self.0.create(name, &limits).unwrap();
        policy.limits = limits;
        policy.cgroup_procs = group.procs_files();
        (group, policy)
    }
}

impl Drop for TestCgroups {
    fn drop(&mut self) {
        let _ = self.0.remove();
    }
}

/// Wait (bounded) for `done`; false if it never came.
pub fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    done()
}

/// Whether `pid` is alive (a zombie awaiting its reaper is dead).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}
