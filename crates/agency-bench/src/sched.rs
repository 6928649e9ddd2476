//! Item 4: scheduling latency, from a message's delivery to its handler's
//! agent process having started, with 100 and with 100,000 handlers in the
//! store (the supervisor is event driven and must not scan, so the two
//! should be close).
//!
//! The daemon runs in this process with the `command` runtime; the agent
//! program is this binary in its `__stamp` mode, which writes the wall-clock
//! time (CLOCK_REALTIME, comparable across processes) at which it began to
//! run into a file named after its handler, and exits. The user sends the
//! message through the service (`mail_send`); the clock starts when that
//! call returns, i.e. the delivery is committed and its event published.
//! The baselines are the same program spawned directly from tokio (with
//! `process_group(0)`, as the supervisor does), timed the same way: bare,
//! and inside the same sandbox the daemon gives an agent (its cgroup made
//! and policy written within the timed span, as the daemon does per
//! spawn); and a plain `/bin/true` spawn-and-wait for reference. The
//! target is the second plus 2 ms at p50.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agency_core::{HandlerId, MailTarget, Principal};
use agency_service::MailBody;
use anyhow::{Context, Result, bail};

use crate::Cfg;
use crate::populate::{Plan, populate};
use crate::report::{Row, Section, ratio};
use crate::util::{Pct, fmt_dur, new_home_with};

/// The agent program: record when this process started running, then exit.
/// Runs before any other setup in `main`.
pub fn stamp(dir: Option<OsString>) -> Result<()> {
    let at = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .context("failed to read the clock")?
        .as_nanos();
    let dir = PathBuf::from(dir.context("usage: agency-bench __stamp DIR")?);
    let name = std::env::var("AGENCY_HANDLER").context("failed to read AGENCY_HANDLER")?;
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, at.to_string())
        .with_context(|| format!("failed to write {}", tmp.display()))?;
    // Renamed into place so the bench never reads a half-written stamp.
    std::fs::rename(&tmp, dir.join(&name))
        .with_context(|| format!("failed to publish the stamp for {name}"))?;
    Ok(())
}

fn nanos_now() -> Result<u128> {
    Ok(SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .context("failed to read the clock")?
        .as_nanos())
}

/// Wait for the stamp `name` and return its time (ns since the epoch).
async fn wait_stamp(dir: &Path, name: &str, timeout: Duration) -> Result<u128> {
    let path = dir.join(name);
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(text) = std::fs::read_to_string(&path) {
            return text
                .trim()
                .parse()
                .with_context(|| format!("failed to parse the stamp {}", path.display()));
        }
        if Instant::now() > deadline {
            bail!("no agent started for {name} within {} s", timeout.as_secs());
        }
        tokio::time::sleep(Duration::from_micros(500)).await;
    }
}

/// `a - b` in the unit that reads best, signed.
fn fmt_diff(a: Duration, b: Duration) -> String {
    if a >= b {
        format!("+{}", fmt_dur(a - b))
    } else {
        format!("-{}", fmt_dur(b - a))
    }
}

/// Run `cmd` (which ends in `__stamp DIR`) as handler `name`, in a process
/// group of its own, to its end; returns the time it stamped.
async fn run_stamp(mut cmd: tokio::process::Command, dir: &Path, name: &str) -> Result<u128> {
    let mut child = cmd
        .env("AGENCY_HANDLER", name)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .with_context(|| format!("failed to spawn the stamp program {name}"))?;
    let started = wait_stamp(dir, name, Duration::from_secs(10)).await?;
    child
        .wait()
        .await
        .with_context(|| format!("failed to wait for the stamp program {name}"))?;
    Ok(started)
}

fn since(t0: u128, t1: u128) -> Duration {
    Duration::from_nanos(u64::try_from(t1.saturating_sub(t0)).unwrap_or(u64::MAX))
}

/// Latency samples with `n` handlers in the store (the home's SQLite, or
/// the PostgreSQL database `store` names); agents confined (the default)
/// or, with `sandbox` false, unconfined (`agents.sandbox = "off"`).
async fn with_handlers(
    n: usize,
    samples: usize,
    sandbox: bool,
    store: Option<&str>,
) -> Result<(Pct, Duration)> {
    let dir = tempfile::tempdir().context("failed to create a temporary directory")?;
    let stamps = dir.path().join("stamps");
    std::fs::create_dir_all(&stamps).context("failed to create the stamp directory")?;
    let me = std::env::current_exe().context("failed to find the running executable")?;
    // No respawn or stall during the run: each handler gets one agent,
    // which exits at once without acknowledging its mail. Agents run
    // confined (the default), through the `agency` binary's
    // `sandbox-exec`; the stamps directory is theirs to write.
    let config = format!(
        "[agents]\nruntime = \"command\"\nsandbox = {:?}\nmax_concurrent = 4\nrespawn_backoff_ms = 3600000\nmax_backoff_ms = 3600000\nstall_after_exits = 1000\nidle_timeout_ms = 0\nagency_program = {:?}\n[agents.command]\nprogram = {:?}\nargs = [\"__stamp\", {:?}]\n[sandbox]\nread_write = [{:?}]\n",
        if sandbox { "on" } else { "off" },
        crate::util::agency_bin()?.display().to_string(),
        me.display().to_string(),
        stamps.display().to_string(),
        stamps.display().to_string()
    );
    let home = new_home_with(&dir.path().join("home"), &config, store)?;
    let h2 = home.clone();
    let plan = Plan {
        handlers: n,
        outcomes: n + 1,
        ..Plan::default()
    };
    let built = tokio::task::spawn_blocking(move || populate(&h2, &plan))
        .await
        .context("failed to join the populating task")??;
    let daemon = agency_daemon::Daemon::start(&home)
        .await
        .context("failed to start the daemon")?;
    // Let the start-up rescan (which finds no work) finish.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let stride = (built.handlers.len() / samples).max(1);
    let mut lat = Vec::with_capacity(samples);
    for i in 0..samples.min(built.handlers.len()) {
        let h: HandlerId = built.handlers[i * stride];
        let svc = daemon.service().clone();
        let sent = tokio::task::spawn_blocking(move || {
            svc.mail_send(
                Principal::User,
                MailTarget::Handler(h),
                &MailBody::Text {
                    subject: Some("Benchmark".to_owned()),
                    text: "Please start.".to_owned(),
                },
            )
            .with_context(|| format!("failed to send mail to handler {h}"))?;
            nanos_now()
        })
        .await
        .context("failed to join the sending task")??;
        let started = wait_stamp(&stamps, &h.to_string(), Duration::from_secs(30)).await?;
        lat.push(since(sent, started));
        // Let the exit be processed before the next delivery.
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    daemon.stop().await.context("failed to stop the daemon")?;
    Ok((Pct::of(&lat), built.took))
}

/// The direct baselines, interleaved so that drift in the machine's load
/// hits all three: the stamp program spawned bare; the same inside the
/// sandbox the daemon gives an agent (a fresh cgroup and the policy file
/// written first, as the daemon does per spawn, then `agency sandbox-exec`
/// with its network namespace and forwarder; the clock starts before the
/// cgroup is made); and `/bin/true` spawn + wait.
struct Direct {
    bare: Pct,
    sandboxed: Pct,
    bin_true: Pct,
}

async fn direct(samples: usize) -> Result<Direct> {
    let dir = tempfile::tempdir().context("failed to create a temporary directory")?;
    let me = std::env::current_exe().context("failed to find the running executable")?;
    let agency = crate::util::agency_bin()?;
    // As `confine.rs` grants them: each program and its install directory.
    let mut programs = vec![agency.clone(), me.clone()];
    programs.extend(me.parent().map(Path::to_owned));
    programs.extend(agency.parent().map(Path::to_owned));
    let name = format!("agency-bench-sched-{}", std::process::id());
    let cgroups = agency_sandbox::Cgroups::open(&name)
        .with_context(|| format!("failed to open the cgroups {name}"))?;
    let (mut stamp_lat, mut boxed_lat, mut true_lat) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..samples {
        let name = format!("direct-{i}");
        let t0 = nanos_now()?;
        let mut cmd = tokio::process::Command::new(&me);
        cmd.arg("__stamp").arg(dir.path());
        stamp_lat.push(since(t0, run_stamp(cmd, dir.path(), &name).await?));

        let name = format!("sandboxed-{i}");
        let t0 = nanos_now()?;
        let cg = cgroups
            .create(&name, &agency_sandbox::Limits::default())
            .context("failed to create a cgroup")?;
        let policy =
            crate::sandbox::agent_policy(dir.path(), &programs, &[9, 10], cg.procs_files());
        let file = crate::sandbox::write_policy(dir.path(), &format!("{name}.json"), &policy)?;
        let mut cmd = tokio::process::Command::new(&agency);
        cmd.arg("sandbox-exec")
            .arg("--policy")
            .arg(&file)
            .arg("--")
            .arg(&me)
            .arg("__stamp")
            .arg(dir.path());
        boxed_lat.push(since(t0, run_stamp(cmd, dir.path(), &name).await?));
        cg.kill().context("failed to kill a cgroup")?;
        while !cg.is_empty() {
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
        cg.remove().context("failed to remove a cgroup")?;

        let t = Instant::now();
        tokio::process::Command::new("/bin/true")
            .process_group(0)
            .status()
            .await
            .context("failed to run /bin/true")?;
        true_lat.push(t.elapsed());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let _ = cgroups.remove();
    Ok(Direct {
        bare: Pct::of(&stamp_lat),
        sandboxed: Pct::of(&boxed_lat),
        bin_true: Pct::of(&true_lat),
    })
}

/// Item 4's runs with the store on PostgreSQL.
struct OnPg {
    small: Pct,
    large: Pct,
    bare_small: Pct,
    small_pop: Duration,
    large_pop: Duration,
    server: String,
}

/// One run of [`with_handlers`] on a fresh PostgreSQL database, or why not.
async fn pg_handlers(n: usize, samples: usize, sandbox: bool) -> Result<(Pct, Duration), String> {
    let db = crate::pg::scratch()?;
    let r = with_handlers(n, samples, sandbox, Some(db.url())).await;
    drop(db);
    r.map_err(|e| format!("failed: {e:#}"))
}

/// The 100-handler, big and sandbox-off runs with the home's store on
/// PostgreSQL (`[store] url` in the agency.toml the bench writes).
async fn on_postgres(samples: usize, big: usize) -> Result<OnPg, String> {
    let (small, small_pop) = pg_handlers(100, samples, true).await?;
    let (large, large_pop) = pg_handlers(big, samples, true).await?;
    let (bare_small, _) = pg_handlers(100, samples, false).await?;
    let server = match crate::pg::scratch() {
        Ok(db) => crate::pg::describe(db.url()),
        Err(_) => String::new(),
    };
    Ok(OnPg {
        small,
        large,
        bare_small,
        small_pop,
        large_pop,
        server,
    })
}

/// Item 4.
pub async fn run(cfg: Cfg) -> Result<Vec<Section>> {
    let samples = cfg.pick(200, 40);
    let big = cfg.pick(100_000, 10_000);
    let d = direct(samples).await?;
    let (small, small_pop) = with_handlers(100, samples, true, None).await?;
    let (large, large_pop) = with_handlers(big, samples, true, None).await?;
    let (bare_small, _) = with_handlers(100, samples, false, None).await?;
    // The same three runs with the store on PostgreSQL, a fresh database each.
    let pg = on_postgres(samples, big).await;
    let bare = "same program spawned directly";
    let boxed = "same program spawned directly in the same sandbox";
    let mut s = Section::new("4. Scheduling latency: message delivered → agent process started");
    for (n, p) in [(100, small), (big, large)] {
        s.rows.push(Row::times(
            format!("{n} handlers, p50"),
            p.p50,
            (&format!("{boxed}, p50"), d.sandboxed.p50),
        ));
        s.rows.push(Row::times(
            format!("{n} handlers, p99"),
            p.p99,
            (&format!("{boxed}, p99"), d.sandboxed.p99),
        ));
        s.rows.push(Row::new(
            format!("{n} handlers, p50 above the direct spawn in the same sandbox"),
            fmt_diff(p.p50, d.sandboxed.p50),
            format!("{} (2 ms: the target)", fmt_dur(Duration::from_millis(2))),
            ratio(p.p50.saturating_sub(d.sandboxed.p50).as_secs_f64(), 0.002),
        ));
    }
    s.rows.push(Row::new(
        "100 handlers, p50 above the bare direct spawn (no sandbox)",
        fmt_diff(small.p50, d.bare.p50),
        format!("{} (2 ms)", fmt_dur(Duration::from_millis(2))),
        ratio(small.p50.saturating_sub(d.bare.p50).as_secs_f64(), 0.002),
    ));
    s.rows.push(Row::times(
        "100 handlers, sandbox off, p50",
        bare_small.p50,
        (&format!("{bare}, p50"), d.bare.p50),
    ));
    s.rows.push(Row::new(
        "100 handlers, sandbox off, p50 above the bare direct spawn",
        fmt_diff(bare_small.p50, d.bare.p50),
        format!("{} (2 ms: the target)", fmt_dur(Duration::from_millis(2))),
        ratio(
            bare_small.p50.saturating_sub(d.bare.p50).as_secs_f64(),
            0.002,
        ),
    ));
    s.rows.push(Row::new(
        format!("{big} vs 100 handlers, p50"),
        fmt_dur(large.p50),
        format!("{} (100 handlers)", fmt_dur(small.p50)),
        ratio(large.p50.as_secs_f64(), small.p50.as_secs_f64()),
    ));
    s.rows.push(Row::times(
        "reference: the same program in the sandbox, spawned directly, p50",
        d.sandboxed.p50,
        (&format!("{bare}, p50"), d.bare.p50),
    ));
    s.rows.push(Row::times(
        "reference: the same program in the sandbox, spawned directly, p99",
        d.sandboxed.p99,
        (&format!("{bare}, p99"), d.bare.p99),
    ));
    s.rows.push(Row::times(
        "reference: spawn and wait /bin/true, p50",
        d.bin_true.p50,
        (&format!("{bare}, p50"), d.bare.p50),
    ));
    if let Ok(p) = &pg {
        for (n, q) in [(100, p.small), (big, p.large)] {
            s.rows.push(Row::times(
                format!("PostgreSQL store, {n} handlers, p50"),
                q.p50,
                (&format!("{boxed}, p50"), d.sandboxed.p50),
            ));
            s.rows.push(Row::times(
                format!("PostgreSQL store, {n} handlers, p99"),
                q.p99,
                (&format!("{boxed}, p99"), d.sandboxed.p99),
            ));
        }
        s.rows.push(Row::times(
            "PostgreSQL store, 100 handlers, sandbox off, p50",
            p.bare_small.p50,
            (&format!("{bare}, p50"), d.bare.p50),
        ));
        s.rows.push(Row::new(
            "PostgreSQL store, 100 handlers, sandbox off, p50 above the bare direct spawn",
            fmt_diff(p.bare_small.p50, d.bare.p50),
            format!("{} (2 ms: the target)", fmt_dur(Duration::from_millis(2))),
            ratio(
                p.bare_small.p50.saturating_sub(d.bare.p50).as_secs_f64(),
                0.002,
            ),
        ));
        s.rows.push(Row::times(
            "PostgreSQL store against SQLite (same run), 100 handlers, sandbox off, p50",
            p.bare_small.p50,
            ("SQLite store, same run", bare_small.p50),
        ));
        s.rows.push(Row::new(
            format!("PostgreSQL store, {big} vs 100 handlers, p50"),
            fmt_dur(p.large.p50),
            format!("{} (100 handlers)", fmt_dur(p.small.p50)),
            ratio(p.large.p50.as_secs_f64(), p.small.p50.as_secs_f64()),
        ));
    }
    let growth = large.p50.as_secs_f64() / small.p50.as_secs_f64().max(1e-9);
    s.shows = format!(
        "how long a delivered message waits for its agent: confined agents start from a standby sandbox set up ahead of need, so the daemon is {} from the direct spawn in the same sandbox at p50 with 100 handlers ({} with {big}) and {} from a bare unconfined spawn; from 100 to {big} handlers the p50 changes ×{growth:.2}{}.",
        fmt_diff(small.p50, d.sandboxed.p50),
        fmt_diff(large.p50, d.sandboxed.p50),
        fmt_diff(small.p50, d.bare.p50),
        if growth < 2.0 {
            ", i.e. no per-handler scan"
        } else {
            ", which points at work proportional to the handlers"
        }
    );
    match &pg {
        Ok(p) => s.shows.push_str(&format!(
            " With the store on PostgreSQL: {} from the direct spawn in the same sandbox at p50 with 100 handlers ({} with {big}), and the daemon's own part without the sandbox {} from the bare spawn against SQLite's {} (×{:.2}).",
            fmt_diff(p.small.p50, d.sandboxed.p50),
            fmt_diff(p.large.p50, d.sandboxed.p50),
            fmt_diff(p.bare_small.p50, d.bare.p50),
            fmt_diff(bare_small.p50, d.bare.p50),
            p.bare_small.p50.as_secs_f64() / bare_small.p50.as_secs_f64().max(1e-9),
        )),
        Err(_) => s.shows.push_str(" PostgreSQL: not measured (below)."),
    }
    s.notes.push(format!(
        "{} deliveries with 100 handlers (one each) and {} with {big}, one at a time, each to a different idle handler (user → handler mail through `Service::mail_send` on the in-process daemon); `command` runtime running `agency-bench __stamp`, which writes its start time (CLOCK_REALTIME) and exits; max_concurrent 4; respawn backoff set to an hour so exited agents do not come back during the run. Agents run confined (the default: `agency sandbox-exec`, a cgroup and a network namespace per agent). The baselines spawn the same program from this process with `process_group(0)`, {samples} times each, interleaved: bare, and in the same sandbox (a fresh cgroup and the policy written per spawn, as the daemon does, inside the timed span; the policy has the system directories, both programs and their directory read-only, the stamp directory read-write, two ports).",
        small.n, large.n
    ));
    s.notes.push(
        "the standby (`supervisor/standby.rs`): after each confined spawn the daemon starts the next agent's `agency sandbox-exec --await-command` in a fresh spawn directory and cgroup, which applies the whole policy and waits on its stdin; the next spawn writes its command there. So the sandbox's set-up, mostly the kernel's (each cgroup join waits for an RCU grace period, 5–25 ms here; the network namespace ~3 ms), is paid between spawns instead of inside one, while the direct baseline pays it inline. Only the first spawn of a run (no standby yet) pays it; it is among the samples.".to_owned(),
    );
    s.notes.push(format!(
        "sandbox off: the same 100-handler run with `agents.sandbox = \"off\"` ({} deliveries), against the bare direct spawn: the daemon's own part without the sandbox's: the event, the spawn's one store transaction, the workspace and the runtime's files (`command` writes prompt.md, mcp.json, message.md), the command and the fork. Creating those four was most of it (+8.8 ms) while the run directories shared one block group with everything else under the home: after the earlier items' mass deletions, this machine's ext4 (no journal) scans every inode freed in the last 30 s of a group on each creation in it, ~1 ms each; the run directory is now an ext4 top directory (`crates/agency-store/src/spread.rs`), so run directories are spread over the groups (`AGENCY_BENCH_LOG=agency_supervisor=debug` prints dirs_us and command_us per spawn); the direct spawn creates none.",
        bare_small.n
    ));
    s.notes.push(format!(
        "stores populated through the store's `Tx` in transactions of ~14,000 handlers (outcome + edge + handler + state document + audit log each): 100 handlers in {:.1} s, {big} in {:.1} s; see `crates/agency-bench/src/populate.rs`.",
        small_pop.as_secs_f64(),
        large_pop.as_secs_f64()
    ));
    match &pg {
        Ok(p) => s.notes.push(format!(
            "PostgreSQL rows: the same three runs (100 handlers, {big}, 100 with the sandbox off), each on a home whose store (rows and blobs) is a fresh database on the server at {} (`[store] url` in the agency.toml the bench writes; nothing else changes), populated the same way through the store's `Tx` (100 handlers in {:.1} s, {big} in {:.1} s), measured after the SQLite runs against the same direct baselines; server: {}.",
            crate::pg::server(),
            p.small_pop.as_secs_f64(),
            p.large_pop.as_secs_f64(),
            p.server
        )),
        Err(reason) => s.notes.push(format!("PostgreSQL rows {reason}.")),
    }
    if cfg.quick {
        s.notes.push(format!(
            "quick mode: {big} handlers instead of 100,000 and {samples} samples instead of 200."
        ));
    }
    Ok(vec![s])
}
