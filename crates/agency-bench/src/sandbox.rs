//! Item 8: the cost of starting a process in the sandbox (issue 10 item
//! 3). `agency sandbox-exec --policy FILE -- /bin/true` (the policy the
//! daemon would write: the run directory, the system paths, one port) is
//! timed against spawning `/bin/true` directly, and once more with the
//! agent's cgroup made before and removed after each spawn, as the daemon
//! does per agent, and once more with `isolate_network` (a network
//! namespace of its own and the forwarder process for its port). The
//! difference includes the `agency` binary's own start-up, which a daemon
//! pays for every sandboxed spawn too.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agency_sandbox::{Cgroups, Limits, Policy};
use anyhow::{Context, Result, bail};

use crate::Cfg;
use crate::report::{Row, Section, ratio};
use crate::util::{Pct, agency_bin, fmt_dur};

const TRUE: &str = "/bin/true";

fn spawn(cmd: &mut Command) -> Result<Duration> {
    let t = Instant::now();
    let status = cmd
        .stdin(Stdio::null())
        .status()
        .context("failed to spawn")?;
    let took = t.elapsed();
    if !status.success() {
        bail!("the spawned process exited with {status}");
    }
    Ok(took)
}

fn policy(run: &Path, cgroup_procs: Vec<std::path::PathBuf>, limits: Limits) -> Policy {
    let mut read_write = vec![run.to_owned()];
    read_write.extend(agency_sandbox::system_read_write_files());
    Policy {
        read_write,
        read_only: agency_sandbox::system_read_only(),
        connect_ports: vec![8080],
        limits,
        cgroup_procs,
        isolate_network: false,
    }
}

pub fn run(cfg: Cfg) -> Result<Vec<Section>> {
    let n = cfg.pick(500, 50);
    let bin = agency_bin()?;
    let dir = tempfile::tempdir().context("failed to make a temporary directory")?;
    let run = dir.path().join("run");
    std::fs::create_dir_all(&run).context("failed to make the run directory")?;
    let no_cgroup = Limits {
        max_processes: 0,
        ..Limits::default()
    };
    let file = dir.path().join("policy.json");
    std::fs::write(&file, policy(&run, Vec::new(), no_cgroup).to_json()?)
        .context("failed to write the policy")?;
    let isolated_file = dir.path().join("policy-isolated.json");
    let isolated_policy = Policy {
        isolate_network: true,
        ..policy(&run, Vec::new(), no_cgroup)
    };
    std::fs::write(&isolated_file, isolated_policy.to_json()?)
        .context("failed to write the policy")?;
    let sandboxed = |file: &Path| {
        let mut c = Command::new(&bin);
        c.arg("sandbox-exec")
            .arg("--policy")
            .arg(file)
            .arg("--")
            .arg(TRUE)
            .current_dir(&run);
        c
    };
    // Warm the page cache for both binaries.
    spawn(&mut Command::new(TRUE))?;
    spawn(&mut sandboxed(&file))?;
    // Without root, no namespace: reported as not measured.
    let isolating = spawn(&mut sandboxed(&isolated_file));
    let mut bare = Vec::with_capacity(n);
    let mut boxed = Vec::with_capacity(n);
    let mut isolated = Vec::with_capacity(n);
    for _ in 0..n {
        bare.push(spawn(&mut Command::new(TRUE))?);
        boxed.push(spawn(&mut sandboxed(&file))?);
        if isolating.is_ok() {
            isolated.push(spawn(&mut sandboxed(&isolated_file))?);
        }
    }
    let (bare, boxed) = (Pct::of(&bare), Pct::of(&boxed));
    let mut s = Section::new("8. Sandboxed spawn");
    s.rows.push(Row::times(
        "sandbox-exec -- /bin/true, p50",
        boxed.p50,
        ("/bin/true", bare.p50),
    ));
    s.rows.push(Row::times(
        "sandbox-exec -- /bin/true, p99",
        boxed.p99,
        ("/bin/true", bare.p99),
    ));
    match isolating {
        Ok(_) => {
            let isolated = Pct::of(&isolated);
            s.rows.push(Row::times(
                "the same with isolate_network (namespace and forwarder), p50",
                isolated.p50,
                ("sandbox-exec", boxed.p50),
            ));
            s.rows.push(Row::times(
                "the same with isolate_network (namespace and forwarder), p99",
                isolated.p99,
                ("sandbox-exec", boxed.p99),
            ));
        }
        Err(e) => s
            .notes
            .push(format!("with isolate_network: not measured ({e:#})")),
    }
    match with_cgroup(&bin, &run, dir.path(), n) {
        Ok(c) => s.rows.push(Row::new(
            "the same with the agent's cgroup made and removed, p50",
            fmt_dur(c.p50),
            format!("{} (/bin/true)", fmt_dur(bare.p50)),
            ratio(c.p50.as_secs_f64(), bare.p50.as_secs_f64()),
        )),
        Err(e) => s.notes.push(format!("with a cgroup: not measured ({e:#})")),
    }
    s.shows = "what confining an agent process adds to its start: paid once per agent or MCP server process, not per tool call".to_owned();
    s.notes.push(format!(
        "{n} spawns of each, interleaved; the policy grants {} paths and one port",
        policy(&run, Vec::new(), no_cgroup).read_only.len() + 1
    ));
    Ok(vec![s])
}

/// Per spawn: create the agent's cgroup, run in it, remove it.
fn with_cgroup(bin: &Path, run: &Path, dir: &Path, n: usize) -> Result<Pct> {
    let cgroups = Cgroups::open(&format!("agency-bench-{}", std::process::id()))?;
    let limits = Limits::default();
    let file = dir.join("policy-cgroup.json");
    let mut samples = Vec::with_capacity(n);
    let result = (|| -> Result<()> {
        for i in 0..n {
            let t = Instant::now();
            let group = cgroups.create(&format!("a{i}"), &limits)?;
            std::fs::write(&file, policy(run, group.procs_files(), limits).to_json()?)?;
            let mut c = Command::new(bin);
            c.arg("sandbox-exec")
                .arg("--policy")
                .arg(&file)
                .arg("--")
                .arg(TRUE)
                .current_dir(run);
            spawn(&mut c)?;
            group.remove()?;
            samples.push(t.elapsed());
        }
        Ok(())
    })();
    cgroups.remove()?;
    result?;
    Ok(Pct::of(&samples))
}
