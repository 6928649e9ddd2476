//! Item 9b: the daemon's CPU per model call through the gateway against
//! the CPU of a bare relay of the same calls (`relay.rs`: the same HTTP
//! server and client, no checks), both measured in the same run as the
//! CPU time of their own process (`/proc/PID/stat`), so neither the client
//! nor the model server is counted. The daemon is `agency serve` on a
//! fresh home (SQLite, and PostgreSQL when a server is reachable); the
//! model is `agency model-server`, priced, so each call is metered as an
//! agent's is. Requests are the size of the built-in agent's (its tool
//! list alone is about 45 KB), from a few concurrent clients, so that
//! concurrent calls share the gateway's metering commits as agents' do.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agency_core::Principal;
use anyhow::{Context, Result, bail};

use crate::Cfg;
use crate::report::{Row, Section};
use crate::util::{agency_bin, fmt_dur, new_home_with, process_cpu};

/// Concurrent clients, each making its calls one after another.
const CLIENTS: usize = 4;
const ROUNDS: usize = 5;
const WARMUP: usize = 50;
/// The request's size in KiB.
const REQUEST_KIB: usize = 46;

/// A child process killed (and reaped) on drop.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A bare relay to `upstream` (`agency-bench __relay`) and its URL.
fn start_relay(upstream: &str) -> Result<(Proc, String)> {
    let me = std::env::current_exe().context("failed to find the running executable")?;
    let mut child = Command::new(me)
        .arg("__relay")
        .arg(upstream)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .context("failed to start the bare relay")?;
    let out = child
        .stdout
        .take()
        .context("failed to read the relay's output")?;
    let proc = Proc(child);
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(out), &mut line)
        .context("failed to read the relay's URL")?;
    let url = line.trim().to_owned();
    if !url.starts_with("http://") {
        bail!("the relay printed {url:?} instead of its URL");
    }
    Ok((proc, url))
}

/// `agency serve` on `home` and its agents' URL, once it wrote `daemon.json`.
fn start_daemon(bin: &Path, home: &Path) -> Result<(Proc, String)> {
    let child = Command::new(bin)
        .arg("serve")
        .env("AGENCY_HOME", home)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("failed to start agency serve")?;
    let mut proc = Proc(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(text) = std::fs::read_to_string(home.join("daemon.json"))
            && let Ok(info) = serde_json::from_str::<serde_json::Value>(&text)
            && let Some(addr) = info["addr"].as_str()
        {
            return Ok((proc, format!("http://{addr}")));
        }
        if let Ok(Some(status)) = proc.0.try_wait() {
            bail!(
                "agency serve on {} exited with {status} before it listened",
                home.display()
            );
        }
        if Instant::now() > deadline {
            bail!("agency serve on {} did not start", home.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `n` streamed calls to `url` from [`CLIENTS`] concurrent clients; the
/// CPU time process `pid` spent meanwhile.
async fn drive(
    pid: u32,
    client: &reqwest::Client,
    url: &str,
    key: Option<&str>,
    body: &str,
    n: usize,
) -> Result<Duration> {
    let before = process_cpu(pid)?;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..CLIENTS {
        let (client, url, key, body) = (
            client.clone(),
            url.to_owned(),
            key.map(str::to_owned),
            body.to_owned(),
        );
        tasks.spawn(async move {
            for _ in 0..n / CLIENTS {
                crate::gateway::call(&client, &url, key.as_deref(), &body).await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.context("failed to join a client")??;
    }
    Ok(process_cpu(pid)?.saturating_sub(before))
}

/// CPU per call of the gateway and of the bare relay, calls interleaved in
/// rounds, on a store at `url` (`None`: SQLite).
async fn measure(bin: &Path, n: usize, store: Option<&str>) -> Result<(Duration, Duration)> {
    let dir = tempfile::tempdir().context("failed to create a temporary directory")?;
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        r#"{"scenarios": [], "fallback": {"text": "A short streamed answer of a few words."}}"#,
    )
    .context("failed to write the model script")?;
    let model = crate::agents::ModelServer::start(bin, &script)?;
    let home = new_home_with(
        &dir.path().join("home"),
        &format!(
            "[models.up]\napi = \"anthropic\"\nbase_url = {:?}\ndefault_price = {{ input = 1.0, output = 2.0 }}\n",
            model.url
        ),
        store,
    )?;
    let (daemon, daemon_url) = start_daemon(bin, home.dir())?;
    let (relay, relay_url) = start_relay(&model.url)?;
    let h = home.clone();
    let (svc, token) = tokio::task::spawn_blocking(move || {
        let svc = h.open_service().context("failed to open the service")?;
        let root = svc
            .root_handler()?
            .context("failed to find the root handler")?;
        let token = svc.token_mint(Principal::User, root, None)?.token;
        anyhow::Ok((svc, token))
    })
    .await
    .context("failed to join the setup task")??;
    let client = reqwest::Client::builder()
        .tcp_nodelay(true)
        .build()
        .context("failed to build the HTTP client")?;
    let body = crate::gateway::large_body(REQUEST_KIB - 2);
    let gateway = format!("{daemon_url}/model/up/v1/messages");
    let bare = format!("{relay_url}/model/up/v1/messages");
    let (gw_pid, relay_pid) = (daemon.0.id(), relay.0.id());
    drive(
        gw_pid,
        &client,
        &gateway,
        Some(&token),
        &body,
        WARMUP * CLIENTS,
    )
    .await?;
    drive(relay_pid, &client, &bare, None, &body, WARMUP * CLIENTS).await?;
    let (mut gw, mut rl) = (Duration::ZERO, Duration::ZERO);
    let per_round = n / ROUNDS / CLIENTS * CLIENTS;
    for _ in 0..ROUNDS {
        gw += drive(gw_pid, &client, &gateway, Some(&token), &body, per_round).await?;
        rl += drive(relay_pid, &client, &bare, None, &body, per_round).await?;
    }
    // Every call through the gateway was metered: the figure is of the
    // whole path, not of a gateway that skipped it.
    let want = (WARMUP * CLIENTS + ROUNDS * per_round) as i64;
    crate::gateway::metered(std::sync::Arc::new(svc), want).await?;
    drop((daemon, relay, model));
    let calls = u32::try_from(ROUNDS * per_round).context("too many calls")?;
    Ok((gw / calls, rl / calls))
}

pub async fn run(cfg: Cfg) -> Result<Section> {
    let n = cfg.pick(4000, 400);
    let bin = agency_bin()?;
    let mut s = Section::new(
        "9b. Model gateway: daemon CPU per streamed call vs a bare relay of the same calls",
    );
    let (gw, relay) = measure(&bin, n, None).await?;
    s.rows.push(Row::times(
        format!("daemon CPU per call, {REQUEST_KIB} KiB request"),
        gw,
        ("bare relay: axum → reqwest, no checks", relay),
    ));
    // A failure on PostgreSQL is reported in the notes; SQLite's rows stay.
    let pg = match crate::pg::scratch() {
        Ok(db) => measure(&bin, n, Some(db.url()))
            .await
            .map_err(|e| format!("failed: {e:#}")),
        Err(why) => Err(why),
    };
    match &pg {
        Ok((pg_gw, pg_relay)) => {
            s.rows.push(Row::times(
                format!("daemon CPU per call, {REQUEST_KIB} KiB request, on PostgreSQL"),
                *pg_gw,
                ("bare relay, same calls", *pg_relay),
            ));
            s.rows.push(Row::times(
                "daemon CPU per call, PostgreSQL against SQLite (same run)",
                *pg_gw,
                ("on SQLite", gw),
            ));
        }
        Err(why) => s.notes.push(format!("PostgreSQL: {why}")),
    }
    s.shows = format!(
        "the gateway's own work per model call (token check, metered fields, reservation, settlement and usage tap, with the usage and events they write) above what relaying the call costs at all: {} above the bare relay on SQLite; the relay alone costs {} of daemon CPU, {:.0}% of a 300 µs target for the whole call.",
        fmt_dur(gw.saturating_sub(relay)),
        fmt_dur(relay),
        relay.as_secs_f64() / 300e-6 * 100.0
    );
    s.notes.push(format!(
        "{n} streamed Anthropic Messages calls each way after {} warm-up calls, interleaved in {ROUNDS} rounds, from {CLIENTS} concurrent reqwest clients (TCP_NODELAY) in this process; a request of {REQUEST_KIB} KiB (tool schemas and a conversation, `crates/agency-bench/src/gateway.rs`), a streamed answer of a few words from `agency model-server` (priced with a default price, so every call is metered and charged). The daemon is `agency serve` on a fresh home, the relay `agency-bench __relay` (`crates/agency-bench/src/relay.rs`); each one's CPU is its own process's user + system time (`/proc/PID/stat`, 10 ms ticks) over its calls. Every gateway call's usage row was checked to be written.",
        WARMUP * CLIENTS
    ));
    Ok(s)
}
