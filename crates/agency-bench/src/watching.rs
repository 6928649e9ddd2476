//! Item 13: watching live runs through the event log. Every state change
//! and every tool call of a run is appended to the log, and `agency watch`
//! and the dashboard follow it over Server-Sent Events
//! (`GET /v1/events/stream`). Two questions, each against a baseline of
//! the same run:
//!
//! - what one live subscriber costs the daemon: item 6's run (builtin
//!   agents × 20 tool calls, `max_concurrent` 16) with a client reading
//!   the stream for the whole run, against the same run without one; and
//!   what logging the tool calls' steps costs, against a run with that
//!   logging switched off (`System::bench_log_tool_steps`, a hidden knob
//!   for this benchmark alone);
//! - how soon a subscriber sees an event: with 200 agents running at once,
//!   each event's commit becoming visible (the service's
//!   `events_committed` watch changing, seen by a thread of its own) to its
//!   arrival at the SSE client, both on this process's monotonic clock,
//!   against the same with a handful of agents.
//!
//! The [`Watcher`] (client and commit stamper, each on a thread of its own
//! with its own runtime, so their CPU time is measured per thread and taken
//! out of the daemon's) is attached by `agents::one_run`.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};

use agency_config::Home;
use agency_core::Principal;
use agency_service::System;
use anyhow::{Context, Result, anyhow, bail};
use tokio::sync::oneshot;

use crate::Cfg;
use crate::agents::{
    MAX_CONCURRENT, ModelServer, PLAIN, RunStats, SERIAL, Setup, one_run, script, thread_cpu,
};
use crate::report::{Row, Section, ratio};
use crate::util::{Pct, agency_bin, fmt_dur};

/// The goal for a live subscriber's cost: within 10% of none.
const SUBSCRIBER_GOAL: f64 = 1.10;
/// The goal for committed → received at p99.
const LATENCY_GOAL: Duration = Duration::from_millis(250);
/// How long the subscriber may take to catch up once the agents are done.
const CATCH_UP: Duration = Duration::from_secs(30);

/// One event as the subscriber received it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Got {
    seq: i64,
    /// When its chunk arrived (monotonic).
    t: Instant,
    /// The same, wall clock, milliseconds since the epoch.
    wall_ms: i64,
    /// The event's own `at`: when it happened (wall clock, ms).
    at_ms: i64,
    /// A tool call's step (committed by the read-audit batches).
    step: bool,
}

/// What the subscriber and the commit stamper saw over one run.
#[derive(Debug)]
pub(crate) struct Watched {
    /// CPU time of both threads (not the daemon's).
    pub cpu: Duration,
    got: Vec<Got>,
    /// (highest event number visible, when the stamper saw it), rising.
    commits: Vec<(i64, Instant)>,
    /// When the stream's headers arrived: events made visible before this
    /// reached the client in its catch-up, and are not timed.
    connected: Instant,
    /// The log's end the stream started after.
    after: i64,
    /// Why the stream ended early, if it did.
    error: Option<String>,
}

impl Watched {
    pub fn received(&self) -> usize {
        self.got.len()
    }

    /// Events numbered in the stream's range but never received (the log's
    /// numbers are dense: a rolled-back append gives its number back).
    pub fn missed(&self) -> i64 {
        let mut prev = self.after;
        let mut missed = 0;
        for g in &self.got {
            missed += (g.seq - prev - 1).max(0);
            prev = g.seq;
        }
        missed
    }

    /// Committed → received and happened → received for each event made
    /// visible after the stream connected (the latter for tool calls'
    /// steps alone too); and how many receipts came before their commit
    /// stamp (timed as 0: see the item's notes).
    fn latencies(&self) -> Latencies {
        let mut l = Latencies::default();
        for g in &self.got {
            let i = self.commits.partition_point(|c| c.0 < g.seq);
            let Some(&(_, seen)) = self.commits.get(i) else {
                continue;
            };
            if seen < self.connected {
                continue;
            }
            l.commit
                .push(g.t.checked_duration_since(seen).unwrap_or_else(|| {
                    l.late += 1;
                    Duration::ZERO
                }));
            let happened = Duration::from_millis((g.wall_ms - g.at_ms).max(0) as u64);
            l.happened.push(happened);
            if g.step {
                l.step_happened.push(happened);
            }
        }
        l
    }
}

/// Latencies of one watched run (see [`Watched::latencies`]).
#[derive(Debug, Default)]
struct Latencies {
    commit: Vec<Duration>,
    happened: Vec<Duration>,
    step_happened: Vec<Duration>,
    late: usize,
}

/// What the commit stamper saw (see [`Watched::commits`]) and its CPU time.
type Stamps = (Vec<(i64, Instant)>, Duration);

/// A live subscriber of the event log plus the commit stamper.
pub(crate) struct Watcher {
    stops: Vec<oneshot::Sender<()>>,
    client: std::thread::JoinHandle<Result<Client>>,
    stamper: std::thread::JoinHandle<Result<Stamps>>,
    last: Arc<AtomicI64>,
    connected: Instant,
    after: i64,
}

struct Client {
    got: Vec<Got>,
    cpu: Duration,
    error: Option<String>,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("failed to build a runtime for the watcher")
}

impl Watcher {
    /// Subscribe to the stream of `home`'s daemon (served by `svc`) from
    /// just after event `after`, with the user's token, as `agency watch`
    /// does; returns once the stream's headers arrived.
    pub async fn start(home: &Home, svc: &Arc<System>, after: i64) -> Result<Watcher> {
        // Subscribed here, before the stamper reads the log's end: a commit
        // after that read changes the watch.
        let mut committed = svc.events_committed();
        let s = svc.clone();
        let (stop_stamper, mut stopped) = oneshot::channel::<()>();
        let stamper = std::thread::Builder::new()
            .name("bench-commits".into())
            .spawn(move || {
                runtime()?.block_on(async move {
                    let s2 = s.clone();
                    let mut max =
                        tokio::task::spawn_blocking(move || s2.events_end(Principal::User))
                            .await
                            .context("failed to join a task")??;
                    let mut out = Vec::new();
                    loop {
                        tokio::select! {
                            r = committed.changed() => {
                                if r.is_err() {
                                    break;
                                }
                                let t = Instant::now();
                                let v = *committed.borrow_and_update();
                                if v > max {
                                    out.push((v, t));
                                    max = v;
                                }
                            }
                            _ = &mut stopped => break,
                        }
                    }
                    Ok((out, thread_cpu()))
                })
            })
            .context("failed to start the commit stamper thread")?;
        let socket = home.admin_socket_path();
        let token = home
            .admin_token()
            .context("failed to read the admin token")?;
        let last = Arc::new(AtomicI64::new(after));
        let last2 = last.clone();
        let (ready_tx, ready) = oneshot::channel::<Result<Instant, String>>();
        let (stop_client, mut stopped) = oneshot::channel::<()>();
        let client = std::thread::Builder::new()
            .name("bench-sse".into())
            .spawn(move || {
                runtime()?.block_on(async move {
                    let http = reqwest::Client::builder()
                        .unix_socket(socket)
                        .build()
                        .context("failed to build the SSE client")?;
                    let resp = http
                        .get(format!("http://localhost/v1/events/stream?after={after}"))
                        .bearer_auth(token)
                        .send()
                        .await;
                    let mut resp = match resp {
                        Ok(r) if r.status().is_success() => r,
                        Ok(r) => {
                            let msg = format!("GET /v1/events/stream answered {}", r.status());
                            let _ = ready_tx.send(Err(msg.clone()));
                            bail!(msg);
                        }
                        Err(e) => {
                            let msg = format!("failed to open /v1/events/stream: {e}");
                            let _ = ready_tx.send(Err(msg.clone()));
                            bail!(msg);
                        }
                    };
                    let _ = ready_tx.send(Ok(Instant::now()));
                    let mut parser = agency_sse::SseParser::new();
                    let mut got = Vec::new();
                    let mut error = None;
                    loop {
                        tokio::select! {
                            chunk = resp.chunk() => {
                                let bytes = match chunk {
                                    Ok(Some(b)) => b,
                                    Ok(None) => {
                                        error = Some("the stream ended".to_owned());
                                        break;
                                    }
                                    Err(e) => {
                                        error = Some(format!("failed to read the stream: {e}"));
                                        break;
                                    }
                                };
                                let (t, wall_ms) = (Instant::now(), now_ms());
                                let events = parser
                                    .push(&bytes)
                                    .context("failed to parse the event stream")?;
                                for e in events {
                                    if e.event == "error" {
                                        error = Some(format!("the stream sent an error: {}", e.data));
                                        continue;
                                    }
                                    let Some(seq) = e.id.as_deref().and_then(|i| i.parse().ok()) else {
                                        continue;
                                    };
                                    let v: serde_json::Value = serde_json::from_str(&e.data)
                                        .context("failed to parse an event's data")?;
                                    got.push(Got {
                                        seq,
                                        t,
                                        wall_ms,
                                        at_ms: v["at"].as_i64().unwrap_or(wall_ms),
                                        step: v["kind"] == "tool.called",
                                    });
                                    last2.store(seq, Ordering::Release);
                                }
                            }
                            _ = &mut stopped => break,
                        }
                    }
                    Ok(Client {
                        got,
                        cpu: thread_cpu(),
                        error,
                    })
                })
            })
            .context("failed to start the SSE client thread")?;
        let connected = match ready.await {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => bail!("{e}"),
            Err(_) => match client.join() {
                Ok(Err(e)) => return Err(e),
                _ => bail!("the SSE client thread ended before connecting"),
            },
        };
        Ok(Watcher {
            stops: vec![stop_stamper, stop_client],
            client,
            stamper,
            last,
            connected,
            after,
        })
    }

    /// Let the subscriber catch up with the log's end, then stop it.
    pub async fn finish(self, svc: &Arc<System>) -> Result<Watched> {
        let s = svc.clone();
        let end = tokio::task::spawn_blocking(move || s.events_end(Principal::User))
            .await
            .context("failed to join a task")??;
        let deadline = Instant::now() + CATCH_UP;
        while self.last.load(Ordering::Acquire) < end
            && Instant::now() < deadline
            && !self.client.is_finished()
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        for s in self.stops {
            let _ = s.send(());
        }
        let (client, stamper) = (self.client, self.stamper);
        let (client, stamps) = tokio::task::spawn_blocking(move || (client.join(), stamper.join()))
            .await
            .context("failed to join a task")?;
        let client = client.map_err(|_| anyhow!("the SSE client thread panicked"))??;
        let (commits, stamper_cpu) =
            stamps.map_err(|_| anyhow!("the commit stamper thread panicked"))??;
        Ok(Watched {
            cpu: client.cpu + stamper_cpu,
            got: client.got,
            commits,
            connected: self.connected,
            after: self.after,
            error: client.error,
        })
    }
}

/// Item 13's subscriber run.
const WATCHED: Setup = Setup {
    watch: true,
    ..PLAIN
};
/// Item 13's run without tool-call steps in the log.
const NO_STEPS: Setup = Setup {
    tool_steps: false,
    ..PLAIN
};

/// Daemon CPU per tool call over several runs of one setup.
fn per_call(runs: &[RunStats]) -> Duration {
    let cpu: Duration = runs.iter().map(|r| r.cpu).sum();
    let calls: i64 = runs.iter().map(|r| r.tool_calls).sum();
    cpu / calls.max(1) as u32
}

fn each_round(runs: &[RunStats]) -> String {
    runs.iter()
        .map(|r| fmt_dur(r.cpu / r.tool_calls.max(1) as u32))
        .collect::<Vec<_>>()
        .join(", ")
}

fn watched(r: &RunStats) -> Result<&Watched> {
    let w = r
        .watched
        .as_ref()
        .context("a watched run has no subscriber's record")?;
    if let Some(e) = &w.error {
        bail!("the live subscriber failed: {e}");
    }
    Ok(w)
}

/// Item 13.
pub async fn run(cfg: Cfg) -> Result<Vec<Section>> {
    let bin = agency_bin()?;
    let dir = tempfile::tempdir().context("failed to create a temporary directory")?;
    let script_path = dir.path().join("script.json");
    std::fs::write(&script_path, script()).context("failed to write the model script")?;
    let model = ModelServer::start(&bin, &script_path)?;
    let cost = subscriber_cost(cfg, &bin, &model).await?;
    let latency = latency(cfg, &bin, &model).await?;
    drop(model);
    Ok(vec![cost, latency])
}

/// 13a: what a live subscriber, and logging tool calls' steps, cost the
/// daemon per tool call.
async fn subscriber_cost(cfg: Cfg, bin: &std::path::Path, model: &ModelServer) -> Result<Section> {
    let n = cfg.pick(500, 50);
    let rounds = cfg.pick(2, 1);
    let (mut plain, mut subscribed, mut unlogged) = (Vec::new(), Vec::new(), Vec::new());
    // Interleaved, so that a slow spell of the shared machine hits each
    // setup alike.
    for round in 0..rounds {
        eprintln!("agency-bench:   round {} of {rounds}", round + 1);
        plain.push(one_run(bin, &model.url, n, SERIAL, PLAIN).await?);
        subscribed.push(one_run(bin, &model.url, n, SERIAL, WATCHED).await?);
        unlogged.push(one_run(bin, &model.url, n, SERIAL, NO_STEPS).await?);
    }
    let (p, w, u) = (per_call(&plain), per_call(&subscribed), per_call(&unlogged));
    let mut received = 0;
    let mut missed = 0;
    let mut logged = 0;
    let mut watch_cpu = Duration::ZERO;
    for r in &subscribed {
        let wd = watched(r)?;
        received += wd.received();
        missed += wd.missed();
        logged += r.logged;
        watch_cpu += wd.cpu;
    }
    let ok = |runs: &[RunStats]| {
        let ok: usize = runs.iter().map(|r| r.ok).sum();
        format!("{ok} of {}", runs.len() * n)
    };
    let mut s = Section::new(format!(
        "13. Watching live runs: daemon CPU per tool call with a live SSE subscriber ({n} agents × 20 tool calls)"
    ));
    s.rows.push(Row::times(
        "daemon CPU per tool call, one live SSE subscriber reading /v1/events/stream",
        w,
        ("same run, no subscriber", p),
    ));
    s.rows.push(Row::times(
        "daemon CPU per tool call, tool calls' steps not logged",
        u,
        ("same run, steps logged, no subscriber", p),
    ));
    s.rows.push(Row::times(
        "… logging a tool call's step (derived: logged − not logged)",
        p.saturating_sub(u),
        ("daemon CPU per tool call", p),
    ));
    s.rows.push(Row::new(
        "events the subscriber received",
        received.to_string(),
        format!("{logged} (logged during its runs)"),
        ratio(received as f64, logged as f64),
    ));
    let ratio_w = w.as_secs_f64() / p.as_secs_f64().max(1e-12);
    s.shows = format!(
        "what following the event log live costs the daemon: one subscriber {} the goal of at most +10% CPU per tool call (×{ratio_w:.2}); the derived row is what appending each tool call's step to the log costs, the part of the log that grows with tool calls.",
        if ratio_w <= SUBSCRIBER_GOAL {
            "meets"
        } else {
            "misses"
        }
    );
    s.notes.push(format!(
        "item 6's run (max_concurrent = {MAX_CONCURRENT}, builtin agents against the scripted model server, daemon in this process) in three setups, {rounds} round(s) interleaved: no subscriber; a subscriber reading `GET /v1/events/stream?after=<log end before the daemon started>` on the admin socket with the user's (admin) token for the whole run, counting events; and tool calls' steps not logged (the hidden `System::bench_log_tool_steps(false)`, set right after `Daemon::start`, before any agent's first tool call; the domain events of the run are still logged). Per-round CPU per tool call: no subscriber {}; subscriber {}; steps not logged {}. Agents completed: {}, {}, {}.",
        each_round(&plain),
        each_round(&subscribed),
        each_round(&unlogged),
        ok(&plain),
        ok(&subscribed),
        ok(&unlogged),
    ));
    s.notes.push(format!(
        "the subscriber and a commit-stamping thread run in this process on threads of their own; their CPU time ({} in all, CLOCK_THREAD_CPUTIME_ID) is taken out of the daemon's. It received every event of its runs' range but {missed}. tool.called events logged: {} with steps on (no subscriber), {} with them off.",
        fmt_dur(watch_cpu),
        plain.iter().map(|r| r.logged_steps).sum::<usize>(),
        unlogged.iter().map(|r| r.logged_steps).sum::<usize>(),
    ));
    if cfg.quick {
        s.notes.push(format!(
            "quick mode: {n} agents instead of 500, one round instead of two."
        ));
    }
    Ok(s)
}

/// 13b: event committed → received by a live subscriber, many agents at
/// once against a few.
async fn latency(cfg: Cfg, bin: &std::path::Path, model: &ModelServer) -> Result<Section> {
    let many = cfg.pick(200, 20);
    let few = 8;
    let setup = |n| Setup {
        max_concurrent: n,
        watch: true,
        tool_steps: true,
    };
    let base = one_run(bin, &model.url, few, SERIAL, setup(few)).await?;
    let busy = one_run(bin, &model.url, many, SERIAL, setup(many)).await?;
    let (bw, mw) = (watched(&base)?, watched(&busy)?);
    let (bl, ml) = (bw.latencies(), mw.latencies());
    let (bc, mc) = (Pct::of(&bl.commit), Pct::of(&ml.commit));
    let (bh, mh) = (Pct::of(&bl.happened), Pct::of(&ml.happened));
    let (bs, ms) = (Pct::of(&bl.step_happened), Pct::of(&ml.step_happened));
    let fewn = format!("{few} agents");
    let mut s = Section::new(format!(
        "13b. Watching live runs: event committed → received by an SSE subscriber, {many} agents at once"
    ));
    s.rows.push(Row::new(
        "agents completed without error",
        format!("{} of {}", busy.ok, busy.n),
        format!("{} of {} ({fewn})", base.ok, base.n),
        ratio(
            busy.ok as f64 / busy.n.max(1) as f64,
            base.ok as f64 / base.n.max(1) as f64,
        ),
    ));
    s.rows.push(Row::times(
        "event committed → received, p50",
        mc.p50,
        (&fewn, bc.p50),
    ));
    s.rows.push(Row::times(
        "event committed → received, p99",
        mc.p99,
        (&fewn, bc.p99),
    ));
    s.rows.push(Row::times(
        "event happened (its `at`) → received, p99 (ms resolution)",
        mh.p99,
        (&fewn, bh.p99),
    ));
    s.rows.push(Row::new(
        "events timed",
        mc.n.to_string(),
        format!("{} ({fewn})", bc.n),
        ratio(mc.n as f64, bc.n.max(1) as f64),
    ));
    s.shows = format!(
        "how soon `agency watch` or the dashboard shows what just happened while {many} agents run at once: p99 {} from commit to receipt, {} the goal of under 250 ms.",
        fmt_dur(mc.p99),
        if mc.p99 < LATENCY_GOAL {
            "meeting"
        } else {
            "missing"
        }
    );
    s.notes.push(
        "item 6's agents (20 tool calls each) with max_concurrent = the number of agents, so all run at once; a subscriber on the admin socket reads `/v1/events/stream` for the whole run. \"Committed\": a thread of this process waiting on `Service::events_committed()` (the watch the stream itself waits on) stamps every event number up to the new value when it changes; \"received\": the SSE client's thread stamps each event when its chunk arrives; both `Instant`s. Only events made visible after the stream connected are timed (the earlier ones arrive in its catch-up). A tool call's step is committed in the read-audit thread's next batch (it gathers for 10 ms), so it becomes visible up to ~10 ms after it happened: the happened → received row includes that wait (from the event's own `at`, wall clock, ms)."
            .to_owned(),
    );
    s.notes.push(format!(
        "happened → received, {many} agents / {fewn}: p50 {} / {}; tool calls' steps alone p50 {} / {}, p99 {} / {}; domain events' `at` is taken when their transaction starts, so theirs includes the transaction and its durable commit. Receipts before their commit stamp (timed as 0): {} of {} and {} of {} — a writer makes its events visible in the store a moment before it tells the watch, and a stream woken by another commit may read and send them in between. Wall time {} and {}.",
        fmt_dur(mh.p50),
        fmt_dur(bh.p50),
        fmt_dur(ms.p50),
        fmt_dur(bs.p50),
        fmt_dur(ms.p99),
        fmt_dur(bs.p99),
        ml.late,
        mc.n,
        bl.late,
        bc.n,
        fmt_dur(busy.wall),
        fmt_dur(base.wall),
    ));
    if cfg.quick {
        s.notes
            .push(format!("quick mode: {many} agents at once instead of 200."));
    }
    Ok(s)
}
