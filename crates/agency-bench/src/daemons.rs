//! Item 16: several daemons on one PostgreSQL store.
//!
//! 1. Item 6's many-agents run (builtin agents against the scripted model
//!    server, 20 tool calls each) driven by 1, 2 and 3 daemons sharing one
//!    database, each with a home of its own, all in this process (so the
//!    CPU time is all of theirs), against one daemon on SQLite in the same
//!    run: total time, tool calls per second, CPU per tool call, and
//!    whether any handler's runs overlapped (leases keep them apart).
//!    Two more runs, whose agents make the same calls in one model turn,
//!    give the daemon's CPU per model call through the gateway (M) on both
//!    backends, as in item 6.
//! 2. Takeover after `kill -9`: two `agency serve` processes on one
//!    database, an agent running under the first; the first is killed and
//!    the clock runs until the second has started the handler's next
//!    agent. Goal: the lease time + one heartbeat + 1 s.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::Cfg;
use crate::agents::{self, ModelServer, PLAIN, RunStats, SERIAL, Store};
use crate::report::{Row, Section, ratio};
use crate::util::{agency_bin, fmt_dur};

/// Takeover rounds (each on a database of its own).
const ROUNDS: usize = 3;
/// The lease settings of the takeover rounds.
const LEASE_MS: u64 = 3000;
const HEARTBEAT_MS: u64 = 1000;

/// Item 16.
pub async fn run(cfg: Cfg) -> Result<Vec<Section>> {
    let title = "16. Several daemons on one PostgreSQL store";
    let n = cfg.pick(200, 20);
    let bin = agency_bin()?;
    let dir = tempfile::tempdir().context("failed to create a temporary directory")?;
    let script_path = dir.path().join("script.json");
    std::fs::write(&script_path, agents::script()).context("failed to write the model script")?;
    let model = ModelServer::start(&bin, &script_path)?;

    let sqlite = agents::one_run_on(&bin, &model.url, n, SERIAL, PLAIN, &Store::Sqlite).await?;
    let sqlite_batched =
        agents::one_run_on(&bin, &model.url, n, agents::BATCHED, PLAIN, &Store::Sqlite).await?;
    let mut pg_runs = Vec::new();
    let mut dbs = Vec::new();
    for daemons in 1..=3 {
        let db = match crate::pg::scratch() {
            Ok(db) => db,
            Err(why) => return Ok(vec![Section::not_measured(title, &why)]),
        };
        let store = Store::Postgres {
            url: db.url().to_owned(),
            daemons,
        };
        pg_runs.push(agents::one_run_on(&bin, &model.url, n, SERIAL, PLAIN, &store).await?);
        dbs.push(db);
    }
    let db = crate::pg::scratch().map_err(anyhow::Error::msg)?;
    let pg_batched = agents::one_run_on(
        &bin,
        &model.url,
        n,
        agents::BATCHED,
        PLAIN,
        &Store::Postgres {
            url: db.url().to_owned(),
            daemons: 1,
        },
    )
    .await?;
    let server = crate::pg::describe(db.url());
    drop((db, dbs, model));

    let mut takeovers = Vec::new();
    for _ in 0..ROUNDS {
        let db = crate::pg::scratch().map_err(anyhow::Error::msg)?;
        let url = db.url().to_owned();
        let b = bin.clone();
        takeovers.push(
            tokio::task::spawn_blocking(move || takeover_once(&b, &url))
                .await
                .context("failed to join a takeover round")??,
        );
    }
    takeovers.sort();

    let mut s = Section::new(format!("{title}: {n} builtin agents × 20 tool calls"));
    let per_call = |r: &RunStats| r.cpu / r.tool_calls.max(1) as u32;
    let rate = |r: &RunStats| r.tool_calls as f64 / r.wall.as_secs_f64().max(1e-9);
    for (i, r) in pg_runs.iter().enumerate() {
        let k = i + 1;
        let daemons = if k == 1 { "daemon" } else { "daemons" };
        s.rows.push(Row::new(
            format!("{k} {daemons} on PostgreSQL: agents completed without error"),
            format!("{} of {}", r.ok, r.n),
            format!("{} of {} (1 daemon on SQLite)", sqlite.ok, sqlite.n),
            ratio(r.ok as f64, sqlite.ok as f64),
        ));
        s.rows.push(Row::times(
            format!("{k} {daemons} on PostgreSQL: wall time"),
            r.wall,
            ("1 daemon on SQLite", sqlite.wall),
        ));
        s.rows.push(Row::new(
            format!("{k} {daemons} on PostgreSQL: tool calls per second"),
            format!("{:.0}", rate(r)),
            format!("{:.0} (1 daemon on SQLite)", rate(&sqlite)),
            ratio(rate(r), rate(&sqlite)),
        ));
        s.rows.push(Row::times(
            format!("{k} {daemons} on PostgreSQL: daemons' CPU per tool call"),
            per_call(r),
            ("1 daemon on SQLite", per_call(&sqlite)),
        ));
    }
    let three = &pg_runs[2];
    s.rows.push(Row::new(
        "3 daemons: handlers whose runs overlapped in time",
        format!("{} of {}", three.overlapping, three.n),
        format!(
            "{} of {} (1 daemon on SQLite)",
            sqlite.overlapping, sqlite.n
        ),
        "",
    ));
    let m_sqlite = agents::model_call_cpu(&sqlite, &sqlite_batched);
    let m_pg = agents::model_call_cpu(&pg_runs[0], &pg_batched);
    s.rows.push(Row::times(
        "daemon CPU per model call through the gateway (M, derived), SQLite",
        m_sqlite,
        ("goal", Duration::from_micros(300)),
    ));
    s.rows.push(Row::times(
        "daemon CPU per model call through the gateway (M, derived), PostgreSQL",
        m_pg,
        ("the same on SQLite", m_sqlite),
    ));
    let goal = Duration::from_millis(LEASE_MS + HEARTBEAT_MS + 1000);
    s.rows.push(Row::times(
        format!("takeover after kill -9, median of {ROUNDS}"),
        takeovers[ROUNDS / 2],
        ("goal: lease + one heartbeat + 1 s", goal),
    ));
    s.rows.push(Row::times(
        format!("takeover after kill -9, slowest of {ROUNDS}"),
        takeovers[ROUNDS - 1],
        ("goal: lease + one heartbeat + 1 s", goal),
    ));
    s.shows = "what sharing one PostgreSQL store among daemons costs and gives on this 2-core machine: the many-agents run's time, throughput and CPU with 1, 2 and 3 daemons against one daemon on SQLite, that no handler's runs overlap, the gateway's CPU per model call on both backends, and how fast a surviving daemon takes over from a killed one.".to_owned();
    s.notes.push(format!(
        "max_concurrent = {} per daemon, so 2 and 3 daemons may run 2 and 3 times as many agents at once on the same 2 cores; every daemon runs in this process (its own home, agents listener, supervisor, gateway and lease heartbeat: lease_ms 15000, heartbeat_ms 5000, the defaults) and the CPU rows are the process's user + system time less the bench's polls, divided by the tool calls the agents reported. Each PostgreSQL run has a database of its own on the server at {} ({server}).",
        agents::MAX_CONCURRENT,
        crate::pg::server()
    ));
    s.notes.push(format!(
        "M, as in item 6: a second run of {n} agents per backend whose agents make the same 20 tool calls in one model turn (2 model calls instead of 21): M = (CPU per agent of the first − of the second) / 19; {} and {} of daemon CPU per agent on SQLite, {} and {} on PostgreSQL (1 daemon).",
        fmt_dur(agents::per_agent_cpu(&sqlite)),
        fmt_dur(agents::per_agent_cpu(&sqlite_batched)),
        fmt_dur(agents::per_agent_cpu(&pg_runs[0])),
        fmt_dur(agents::per_agent_cpu(&pg_batched)),
    ));
    s.notes.push(format!(
        "takeover: two `agency serve` processes (lease_ms {LEASE_MS}, heartbeat_ms {HEARTBEAT_MS}) on a fresh database per round, a `command` agent that records which daemon started it and sleeps; the daemon running it gets SIGKILL and the clock runs until the other daemon has started the handler's next agent (its mark appears). Rounds: {}.",
        takeovers
            .iter()
            .map(|d| fmt_dur(*d))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    if cfg.quick {
        s.notes
            .push(format!("quick mode: {n} agents instead of 200."));
    }
    Ok(vec![s])
}

/// A daemon process of a takeover round.
struct Serve {
    child: Child,
    home: std::path::PathBuf,
}

impl Serve {
    fn start(bin: &Path, home: &Path) -> Result<Serve> {
        let child = Command::new(bin)
            .arg("serve")
            .env("AGENCY_HOME", home)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("failed to start agency serve")?;
        let serve = Serve {
            child,
            home: home.to_owned(),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while serve.mcp_url().is_none() {
            if Instant::now() > deadline {
                bail!("agency serve on {} did not start", home.display());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(serve)
    }

    /// Its agents' MCP URL, once it wrote `daemon.json`.
    fn mcp_url(&self) -> Option<String> {
        let text = std::fs::read_to_string(self.home.join("daemon.json")).ok()?;
        let info: serde_json::Value = serde_json::from_str(&text).ok()?;
        Some(format!("http://{}/mcp", info["addr"].as_str()?))
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        // A killed one was reaped already: its pid may be another's now.
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

/// The agents' marks: (agent, MCP URL of its daemon, pid).
fn marks(dir: &Path) -> Vec<(String, String, u32)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        let mut it = text.split_whitespace();
        if let (Some(url), Some(pid)) = (it.next(), it.next().and_then(|p| p.parse().ok())) {
            out.push((
                e.file_name().to_string_lossy().into_owned(),
                url.to_owned(),
                pid,
            ));
        }
    }
    out
}

/// One takeover round on the database `url`: the time from SIGKILL to the
/// next agent's start on the other daemon.
fn takeover_once(bin: &Path, url: &str) -> Result<Duration> {
    let dir = tempfile::tempdir().context("failed to create a temporary directory")?;
    let marks_dir = dir.path().join("marks");
    std::fs::create_dir_all(&marks_dir).context("failed to create the marks directory")?;
    let script = format!(
        "echo \"$AGENCY_MCP_URL $$\" > {}/$AGENCY_AGENT; exec sleep 600",
        marks_dir.display()
    );
    let config = format!(
        "[store]\nurl = {url:?}\nlease_ms = {LEASE_MS}\nheartbeat_ms = {HEARTBEAT_MS}\n\
         [agents]\nruntime = \"command\"\nkill_grace_ms = 300\nsandbox = \"off\"\n\
         [agents.command]\nprogram = \"sh\"\nargs = [\"-c\", {script:?}]\n"
    );
    let mut homes = Vec::new();
    for i in 0..2 {
        let home = dir.path().join(format!("home{i}"));
        let init = Command::new(bin)
            .arg("init")
            .env("AGENCY_HOME", &home)
            .env("AGENCY_STORE_URL", url)
            .output()
            .context("failed to run agency init")?;
        if !init.status.success() {
            bail!(
                "agency init failed: {}",
                String::from_utf8_lossy(&init.stderr)
            );
        }
        std::fs::write(home.join("agency.toml"), &config).context("failed to write agency.toml")?;
        homes.push(home);
    }
    let mut daemons = vec![Serve::start(bin, &homes[0])?, Serve::start(bin, &homes[1])?];
    let sent = Command::new(bin)
        .args(["send", "work for whichever daemon takes it"])
        .env("AGENCY_HOME", &homes[0])
        .output()
        .context("failed to run agency send")?;
    if !sent.status.success() {
        bail!(
            "agency send failed: {}",
            String::from_utf8_lossy(&sent.stderr)
        );
    }
    let wait = |what: &str, f: &dyn Fn() -> Option<(String, String, u32)>| {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(m) = f() {
                return Ok(m);
            }
            if Instant::now() > deadline {
                bail!("{what} within a minute");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    let first = wait("no agent started", &|| marks(&marks_dir).into_iter().next())?;
    let victim = daemons
        .iter()
        .position(|d| d.mcp_url().as_deref() == Some(first.1.as_str()))
        .context("failed to find the daemon that started the agent")?;
    let mut dead = daemons.remove(victim);
    dead.child.kill().context("failed to kill the daemon")?;
    let killed = Instant::now();
    let _ = dead.child.wait();
    let second = wait("no takeover", &|| {
        marks(&marks_dir).into_iter().find(|m| m.0 != first.0)
    });
    let took = killed.elapsed();
    // The killed daemon's agent outlived it (its own process group).
    let _ = Command::new("kill").arg(first.2.to_string()).status();
    drop(daemons);
    if let Ok(m) = &second {
        let _ = Command::new("kill").arg(m.2.to_string()).status();
    }
    second?;
    Ok(took)
}
