//! Issue 27 item A: `[sandbox] memory_mb` bounds an agent's whole process
//! tree, not only each process. Two processes, each under the per-process
//! limit (`RLIMIT_DATA`) but together over the tree's, are the attempt:
//! the cgroup's memory controller (v2, or v1's `memory` hierarchy on this
//! kind of hybrid machine) kills one of them; `RLIMIT_DATA` alone lets
//! both through (the control). And `agency status` names the limits in
//! force and what keeps each.
//!
//! Needs what the sandbox needs, a cgroup memory controller (v2 or v1),
//! and `/usr/bin/python3`.

#![allow(clippy::unwrap_used)]

use crate::sandbox_run;

use crate::agent_story;

use std::path::Path;
use std::time::Duration;

use agency_sandbox::Limits;
use agency_testkit::sandbox::sandbox_toml;
use agent_story::{Story, agency, json};
use sandbox_run::{PYTHON, Sandbox, TestCgroups, ok};

/// The tree's (and each process's) memory limit in the tests, in MiB.
const LIMIT_MB: u64 = 128;
/// What each of the two processes allocates: under [`LIMIT_MB`] alone
/// (with Python's own ~10 MiB), over it together.
const EACH_MB: u64 = 80;

/// Two children, each allocating and touching `argv[1]` MiB and holding
/// it for 2 s, at the same time; prints their exit codes as Python gives
/// them (`-9`: killed by SIGKILL, `3`: the allocation failed).
const TWO_HOGS: &str = r#"
import os, sys, time
n = int(sys.argv[1]) << 20
kids = []
for _ in range(2):
    pid = os.fork()
    if pid == 0:
        try:
            b = b"\x01" * n
        except MemoryError:
            os._exit(3)
        time.sleep(2)
        os._exit(0)
    kids.append(pid)
print(" ".join(str(os.waitstatus_to_exitcode(os.waitpid(p, 0)[1])) for p in kids))
"#;

fn write_hogs(dir: &Path) -> String {
    let file = dir.join("hogs.py");
    std::fs::write(&file, TWO_HOGS).unwrap();
    file.display().to_string()
}

/// The two hogs under `agency sandbox-exec`, in an agent cgroup whose tree
/// limit is `tree_mb` (0: none), with `RLIMIT_DATA` at [`LIMIT_MB`]
/// either way: their exit codes.
fn hogs_in_a_group(tree_mb: u64) -> String {
    let sb = Sandbox::new();
    let cgroups = TestCgroups::new();
    assert!(
        cgroups.0.memory_hierarchy().is_some(),
        "no cgroup memory controller (v1 or v2) on this machine"
    );
    let group = cgroups
        .0
        .create(
            "agent",
            &Limits {
                max_processes: 64,
                memory_bytes: tree_mb << 20,
                ..Limits::default()
            },
        )
        .unwrap();
    let mut policy = sb.policy();
    policy.limits = Limits {
        max_processes: 64,
        memory_bytes: LIMIT_MB << 20,
        ..Limits::default()
    };
    policy.cgroup_procs = group.procs_files();
    let script = write_hogs(&sb.ws);
    let out = sb.run(&policy, &[PYTHON, &script, &EACH_MB.to_string()]);
    ok(&out).trim().to_owned()
}

/// The tree is held to its limit: one of two processes that each fit
/// under `RLIMIT_DATA` is killed once together they pass the group's
/// memory limit. The control, the same processes in a group without a
/// memory limit (what a hybrid machine got before the v1 memory group),
/// shows that `RLIMIT_DATA` alone lets both through.
#[test]
fn issue27_a_tree_past_memory_mb_is_killed_by_its_cgroup() {
    let control = hogs_in_a_group(0);
    assert_eq!(
        control, "0 0",
        "each process alone must fit under RLIMIT_DATA ({LIMIT_MB} MiB) for the attempt to mean anything"
    );
    let held = hogs_in_a_group(LIMIT_MB);
    let codes: Vec<&str> = held.split_whitespace().collect();
    assert_eq!(codes.len(), 2, "{held}");
    assert!(
        codes.iter().any(|c| *c == "-9" || *c == "3"),
        "{EACH_MB} MiB twice ran in a tree limited to {LIMIT_MB} MiB: exit codes {held}"
    );
}

/// At the daemon's level: a real agent (`agency serve`, the `command`
/// runtime) with `memory_mb` set runs the two processes and one is killed;
/// `agency status` (text and `--json`) lists the limits in force, each
/// with what keeps it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue27_an_agent_tree_is_held_to_memory_mb_and_status_names_the_limits() {
    let out = tempfile::tempdir().unwrap();
    let out = out.path().canonicalize().unwrap();
    let hogs = write_hogs(&out);
    let codes = out.join("codes");
    let script = format!(
        "{PYTHON} {hogs:?} {EACH_MB} > {codes:?} 2>&1 || echo failed >> {codes:?}\nexec sleep 300\n",
        codes = codes.display().to_string()
    );
    let config = format!(
        "[agents]\nruntime = \"command\"\nkill_grace_ms = 300\nrespawn_backoff_ms = 3600000\n[agents.command]\nprogram = \"sh\"\nargs = [\"-c\", {script:?}]\n{}memory_mb = {LIMIT_MB}\n",
        sandbox_toml(&[&out])
    );
    let story = Story::start(&config, Duration::from_secs(60)).await;
    let memory_by = match agency_sandbox::probe().unwrap().memory.unwrap() {
        agency_sandbox::Controller::V1(_) => "cgroup v1 memory",
        agency_sandbox::Controller::V2(_) => "cgroup v2 memory",
    };
    let (code, status, err) = agency(&story.home, &["status"]);
    assert_eq!(code, 0, "{err}");
    for want in [
        format!("on; limits: memory {LIMIT_MB} MiB per agent tree ({memory_by})"),
        format!("memory {LIMIT_MB} MiB per process (RLIMIT_DATA)"),
        "processes 512 per agent tree (cgroup v".to_owned(),
        "CPU time 3600 s per process (RLIMIT_CPU)".to_owned(),
        "open files 4096 per process (RLIMIT_NOFILE)".to_owned(),
    ] {
        assert!(status.contains(&want), "{want} not in:\n{status}");
    }
    let limits = json(&story.home, &["status"])["limits"].clone();
    assert!(
        limits.as_array().unwrap().contains(&serde_json::json!({
            "resource": "memory_mib", "value": LIMIT_MB, "scope": "agent_tree",
            "enforced_by": memory_by
        })),
        "{limits}"
    );
    let (code, _, err) = agency(&story.home, &["send", "Please work"]);
    assert_eq!(code, 0, "{err}");
    let held = story.wait_file(&codes, Duration::from_secs(60)).await;
    assert!(
        held.split_whitespace().any(|c| c == "-9" || c == "3"),
        "{EACH_MB} MiB twice ran in an agent held to {LIMIT_MB} MiB: {held}\nlog:\n{}",
        story.log()
    );
    story.stop();
}
