//! Small helpers shared by the benchmarks: percentiles, formatting, the
//! repository root, the `agency` binary, fresh homes, process memory and
//! CPU from `/proc`.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use agency_config::Home;
use anyhow::{Context, Result, bail};

/// Run a future to completion on the runtime entered in `main`.
pub fn block<T>(f: impl Future<Output = Result<T>>) -> Result<T> {
    tokio::runtime::Handle::current().block_on(f)
}

/// p50, p95 and p99 of a set of samples.
#[derive(Debug, Clone, Copy)]
pub struct Pct {
    pub p50: Duration,
    pub p95: Duration,
    pub p99: Duration,
    pub n: usize,
}

impl Pct {
    pub fn of(samples: &[Duration]) -> Pct {
        let mut s = samples.to_vec();
        s.sort();
        let at = |q: f64| -> Duration {
            if s.is_empty() {
                return Duration::ZERO;
            }
            // Nearest-rank percentile: the smallest sample with at least
            // q of the samples at or below it.
            let rank = (q * s.len() as f64).ceil() as usize;
            s[rank.clamp(1, s.len()) - 1]
        };
        Pct {
            p50: at(0.50),
            p95: at(0.95),
            p99: at(0.99),
            n: s.len(),
        }
    }
}

/// A duration in the unit that reads best (µs below 10 ms).
pub fn fmt_dur(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 10_000.0 {
        format!("{us:.0} µs")
    } else if us < 10_000_000.0 {
        format!("{:.1} ms", us / 1000.0)
    } else {
        format!("{:.1} s", us / 1e6)
    }
}

/// The workspace root (this crate is `crates/agency-bench`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

/// The `agency` binary beside this one (same profile), built with cargo if
/// it is missing: the daemon, agents and model server of some benchmarks
/// run as their own processes.
pub fn agency_bin() -> Result<PathBuf> {
    let me = std::env::current_exe().context("failed to find the running executable")?;
    let dir = me
        .parent()
        .context("failed to find the directory of the running executable")?;
    let bin = dir.join("agency");
    if bin.is_file() {
        return Ok(bin);
    }
    let release = dir.file_name().is_some_and(|n| n == "release");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!(
        "agency-bench: building the agency binary ({})",
        bin.display()
    );
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "-p", "agency-cli"])
        .current_dir(repo_root());
    if release {
        cmd.arg("--release");
    }
    let status = cmd
        .status()
        .context("failed to run cargo to build the agency binary")?;
    if !status.success() || !bin.is_file() {
        bail!(
            "failed to build the agency binary at {}: cargo exited with {status}",
            bin.display()
        );
    }
    Ok(bin)
}

/// A fresh, initialised home at `dir` with `config` as its `agency.toml`.
pub fn new_home(dir: &Path, config: &str) -> Result<Home> {
    let home = Home::new(dir);
    home.init()
        .with_context(|| format!("failed to initialise the home {}", dir.display()))?;
    std::fs::write(home.config_path(), config)
        .with_context(|| format!("failed to write {}", home.config_path().display()))?;
    Ok(home)
}

/// A fresh home at `dir` whose store is the PostgreSQL database `url`
/// (`[store] url` in its `agency.toml`, written before `init` so the home
/// is bootstrapped there), with `config` after that section.
pub fn new_home_on(dir: &Path, config: &str, url: &str) -> Result<Home> {
    let home = Home::new(dir);
    std::fs::create_dir_all(dir).with_context(|| format!("failed to create {}", dir.display()))?;
    let text = format!("{}{config}", crate::pg::store_config(url));
    std::fs::write(home.config_path(), text)
        .with_context(|| format!("failed to write {}", home.config_path().display()))?;
    home.init().with_context(|| {
        format!(
            "failed to initialise the home {} on PostgreSQL",
            dir.display()
        )
    })?;
    Ok(home)
}

/// A fresh home on SQLite (`url` `None`, [`new_home`]) or on the
/// PostgreSQL database `url` ([`new_home_on`]).
pub fn new_home_with(dir: &Path, config: &str, url: Option<&str>) -> Result<Home> {
    match url {
        None => new_home(dir, config),
        Some(url) => new_home_on(dir, config, url),
    }
}

/// Resident memory of a process in KiB (`VmRSS` in `/proc/PID/status`).
pub fn rss_kib(pid: u32) -> Result<u64> {
    let path = format!("/proc/{pid}/status");
    let text = std::fs::read_to_string(&path).with_context(|| format!("failed to read {path}"))?;
    text.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("failed to find VmRSS in {path}"))
}

/// CPU time (user + system) this process has used, all threads, children
/// excluded: fields 14 and 15 of `/proc/self/stat`, in clock ticks.
pub fn self_cpu() -> Result<Duration> {
    stat_cpu("/proc/self/stat")
}

/// CPU time (user + system) process `pid` has used, as [`self_cpu`].
pub fn process_cpu(pid: u32) -> Result<Duration> {
    stat_cpu(&format!("/proc/{pid}/stat"))
}

fn stat_cpu(path: &str) -> Result<Duration> {
    let text = std::fs::read_to_string(path).with_context(|| format!("failed to read {path}"))?;
    // The command name (field 2) may contain spaces; count after its ')'.
    let rest = text
        .rsplit_once(')')
        .map(|(_, r)| r)
        .with_context(|| format!("failed to parse {path}"))?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> Result<u64> {
        f.get(i)
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("failed to parse the CPU times in {path}"))
    };
    // After ')' field 3 (state) is index 0, so utime (14) is 11, stime 12.
    let total = ticks(11)? + ticks(12)?;
    Ok(Duration::from_secs_f64(
        total as f64 / clock_ticks()? as f64,
    ))
}

/// CPU time the whole machine has spent busy (every state of the `cpu`
/// line of `/proc/stat` but idle and iowait, all cores summed): the CPU of
/// this process, of servers it talks to, and of the kernel on their behalf.
pub fn machine_busy() -> Result<Duration> {
    let text = std::fs::read_to_string("/proc/stat").context("failed to read /proc/stat")?;
    let line = text
        .lines()
        .find(|l| l.starts_with("cpu "))
        .context("failed to find the cpu line in /proc/stat")?;
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().context("failed to parse /proc/stat"))
        .collect::<Result<_>>()?;
    // user nice system idle iowait irq softirq steal (guest time is
    // already counted in user).
    let busy: u64 = f
        .iter()
        .take(8)
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4 && *i != 7)
        .map(|(_, v)| v)
        .sum();
    Ok(Duration::from_secs_f64(busy as f64 / clock_ticks()? as f64))
}

/// The cores this machine has.
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `getconf CLK_TCK` (100 on Linux almost everywhere; asked, not assumed).
fn clock_ticks() -> Result<u64> {
    static TICKS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    if let Some(t) = TICKS.get() {
        return Ok(*t);
    }
    let out = Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .context("failed to run getconf CLK_TCK")?;
    let t: u64 = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .context("failed to parse the output of getconf CLK_TCK")?;
    Ok(*TICKS.get_or_init(|| t))
}

/// Output of a command, trimmed, or a note that it failed.
pub fn command_line(program: &str, args: &[&str]) -> String {
    match Command::new(program).args(args).output() {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        Ok(o) => format!("({program} exited with {})", o.status),
        Err(e) => format!("({program} unavailable: {e})"),
    }
}
