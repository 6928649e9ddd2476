//! Item 8: what the sandbox adds to an agent's spawn.
//! The same program, `/bin/true`, spawned and waited for three ways in
//! the same run: bare (the baseline); through `agency sandbox-exec` with a
//! policy like an agent's (Landlock rules for the system directories,
//! seccomp, capabilities dropped, rlimits) but no cgroup; and as the daemon
//! does it, with a fresh cgroup per spawn that `sandbox-exec` joins and
//! that is killed and removed after the exit, and a network namespace of
//! its own with the forwarder process for its port (`isolate_network`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use agency_sandbox::{Cgroups, Limits, Policy};
use anyhow::{Context, Result, bail};

use crate::Cfg;
use crate::report::{Row, Section};
use crate::util::{Pct, agency_bin};

const TRUE: &str = "/bin/true";

/// An agent-like policy for `/bin/true`: the system directories read-only,
/// `dir` read-write, one TCP port, the given cgroup files.
fn policy(dir: &Path, cgroup_procs: Vec<PathBuf>) -> Policy {
    agent_policy(dir, &[PathBuf::from(TRUE)], &[9], cgroup_procs)
}

/// An agent's policy, as the daemon's `confine.rs` builds it: the system
/// directories read-only and `read_only` besides, `dir` read-write, TCP
/// connect to `ports`, the given cgroup files (and with them a network
/// namespace of its own and a process limit).
pub fn agent_policy(
    dir: &Path,
    read_only: &[PathBuf],
    ports: &[u16],
    cgroup_procs: Vec<PathBuf>,
) -> Policy {
    let isolate_network = !cgroup_procs.is_empty();
    let mut ro = agency_sandbox::system_read_only();
    ro.extend_from_slice(read_only);
    let mut read_write = agency_sandbox::system_read_write_files();
    read_write.push(dir.to_owned());
    Policy {
        read_write,
        read_only: ro,
        connect_ports: ports.to_vec(),
        limits: Limits {
            max_processes: if cgroup_procs.is_empty() { 0 } else { 64 },
            ..Limits::default()
        },
        cgroup_procs,
        isolate_network,
    }
}

pub fn write_policy(dir: &Path, name: &str, p: &Policy) -> Result<PathBuf> {
    let path = dir.join(name);
    std::fs::write(&path, p.to_json().context("failed to encode the policy")?)
        .with_context(|| format!("failed to write {}", path.display()))?;
    Ok(path)
}

/// Spawn `program args` in a process group of its own (as the supervisor
/// does) and wait; the time from before the spawn to the exit.
async fn run(program: &Path, args: &[&std::ffi::OsStr]) -> Result<Duration> {
    let t = Instant::now();
    let status = tokio::process::Command::new(program)
        .args(args)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .await
        .with_context(|| format!("failed to run {}", program.display()))?;
    let took = t.elapsed();
    if !status.status.success() {
        bail!(
            "{} exited with {}: {}",
            program.display(),
            status.status,
            String::from_utf8_lossy(&status.stderr).trim()
        );
    }
    Ok(took)
}

/// Item 8.
pub async fn run_item(cfg: Cfg) -> Result<Vec<Section>> {
    let samples = cfg.pick(300, 40);
    let agency = agency_bin()?;
    let dir = tempfile::tempdir().context("failed to create a temporary directory")?;
    let plain = write_policy(dir.path(), "plain.json", &policy(dir.path(), Vec::new()))?;
    let name = format!("agency-bench-{}", std::process::id());
    let cgroups =
        Cgroups::open(&name).with_context(|| format!("failed to open the cgroups {name}"))?;
    let (mut bare, mut sandboxed, mut with_cgroup) = (Vec::new(), Vec::new(), Vec::new());
    let mut binary = Vec::new();
    let t = Path::new(TRUE).as_os_str();
    for i in 0..samples {
        // Interleaved, so that drift in the machine's load hits all three.
        bare.push(run(Path::new(TRUE), &[]).await?);
        binary.push(run(&agency, &["--version".as_ref()]).await?);
        let args = [
            "sandbox-exec".as_ref(),
            "--policy".as_ref(),
            plain.as_os_str(),
            "--".as_ref(),
            t,
        ];
        sandboxed.push(run(&agency, &args).await?);
        let t0 = Instant::now();
        let cg = cgroups
            .create(&format!("spawn-{i}"), &Limits::default())
            .context("failed to create a cgroup")?;
        let file = write_policy(
            dir.path(),
            "cgroup.json",
            &policy(dir.path(), cg.procs_files()),
        )?;
        let args = [
            "sandbox-exec".as_ref(),
            "--policy".as_ref(),
            file.as_os_str(),
            "--".as_ref(),
            t,
        ];
        run(&agency, &args).await?;
        cg.kill().context("failed to kill a cgroup")?;
        while !cg.is_empty() {
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        cg.remove().context("failed to remove a cgroup")?;
        with_cgroup.push(t0.elapsed());
    }
    let _ = cgroups.remove();
    let (bare, sandboxed, with_cgroup) =
        (Pct::of(&bare), Pct::of(&sandboxed), Pct::of(&with_cgroup));
    let binary = Pct::of(&binary);
    let base = "bare spawn of /bin/true";
    let mut s = Section::new("8. Spawn with sandbox vs bare spawn");
    for (what, p) in [
        (
            "reference: agency --version (the binary's own start)",
            binary,
        ),
        ("agency sandbox-exec -- /bin/true", sandboxed),
        (
            "… as the daemon does it: a fresh cgroup (create, join, kill, remove) and a network namespace with its forwarder",
            with_cgroup,
        ),
    ] {
        s.rows.push(Row::times(
            format!("{what}, p50"),
            p.p50,
            (&format!("{base}, p50"), bare.p50),
        ));
        s.rows.push(Row::times(
            format!("{what}, p99"),
            p.p99,
            (&format!("{base}, p99"), bare.p99),
        ));
    }
    s.shows = format!(
        "what confining an agent adds to its start: {:.1} ms at the median with its cgroup, once per agent run (agents live for minutes).",
        with_cgroup.p50.saturating_sub(bare.p50).as_secs_f64() * 1e3
    );
    s.notes.push(format!(
        "{samples} spawns of each kind, interleaved (`agency --version` shows how much of the cost is starting the `agency` binary itself, which the build profile changes most); each spawned in a process group of its own with its output piped, and waited for. The policy is an agent's: the system directories read-only ({} entries with /etc listed entry by entry), a temporary directory read-write, one TCP port; the daemon's variant includes its work per spawn (mkdir of the agent's cgroup, writing the policy, and after the exit kill and rmdir) and `isolate_network` (unshare, lo up, the listener and the forwarder process).",
        policy(dir.path(), Vec::new()).read_only.len()
    ));
    if cfg.quick {
        s.notes
            .push(format!("quick mode: {samples} samples instead of 300."));
    }
    Ok(vec![s])
}
