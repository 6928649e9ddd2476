//! Item 6: many agents. 500 handlers (50 in `--quick`) each get a `builtin`
//! agent (`agency agent`, a process of its own) that plays a scripted
//! conversation against the scripted model server (`agency model-server`,
//! another process): 19 `state_read` calls and one
//! `outcome_request_completion`, i.e. 20 MCP tool calls, then a final
//! answer. The daemon runs in this process, so its CPU time is this
//! process's user + system time (agents and model server excluded, being
//! other processes); the bench itself only polls the store while it waits.
//!
//! Baseline: the same with a handful of agents (one wave at the same
//! `max_concurrent`), so the ratios show how wall time per agent and daemon
//! CPU per tool call hold up as the number of agents grows.
//!
//! Two more runs of as many agents split that CPU into its parts: one whose
//! agents make the same 20 tool calls in a single model turn (2 model calls
//! instead of 21) and one whose agents make only the completion request
//! (1 tool call, 2 model calls). Per agent, the three runs cost
//! F + 20T + 21M, F + 20T + 2M and F + T + 2M (F: spawning, the MCP
//! session and the run's record; T: a tool call; M: a model call through
//! the gateway), which gives M, T and F.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use std::sync::Arc;

use agency_core::Principal;
use agency_service::{EventQuery, NewOutcome, System};
use anyhow::{Context, Result, bail};
use serde_json::json;

use crate::Cfg;
use crate::report::{Row, Section, ratio};
use crate::util::{agency_bin, fmt_dur, new_home_with, self_cpu};
use crate::watching::{Watched, Watcher};

pub(crate) const CALLS: usize = 20;
pub(crate) const MAX_CONCURRENT: usize = 16;

/// How a run is set up beyond its agents (item 13 varies it).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Setup {
    pub max_concurrent: usize,
    /// A live SSE subscriber of the event log for the whole run
    /// ([`crate::watching::Watcher`]); its CPU time is not the daemon's.
    pub watch: bool,
    /// Whether tool calls' steps are logged (off only for a baseline).
    pub tool_steps: bool,
}

/// Item 6's setup.
pub(crate) const PLAIN: Setup = Setup {
    max_concurrent: MAX_CONCURRENT,
    watch: false,
    tool_steps: true,
};

/// What the agents of one run do; their outcome's title picks their
/// scenario in the model script.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    title: &'static str,
    /// `state_read` calls before the completion request.
    reads: usize,
    /// All tool calls in one model turn rather than one per turn.
    batched: bool,
}

impl Shape {
    fn tool_calls(self) -> usize {
        self.reads + 1
    }
}

/// The item's own run: 19 `state_read` and the completion request, one per
/// model turn.
pub(crate) const SERIAL: Shape = Shape {
    title: "Bench agent task",
    reads: CALLS - 1,
    batched: false,
};
/// The same tool calls in a single model turn.
pub(crate) const BATCHED: Shape = Shape {
    title: "Bench batched task",
    reads: CALLS - 1,
    batched: true,
};
/// Only the completion request.
const SINGLE: Shape = Shape {
    title: "Bench single-call task",
    reads: 0,
    batched: true,
};

/// The model's side of every agent run, one scenario per shape.
pub(crate) fn script() -> String {
    let scenario = |shape: Shape| {
        let mut calls: Vec<serde_json::Value> = (0..shape.reads)
            .map(|_| json!({"name": "state_read", "input": {}}))
            .collect();
        calls.push(json!({"name": "outcome_request_completion",
            "input": {"summary": "Benchmark run finished."}}));
        let mut turns: Vec<serde_json::Value> = if shape.batched {
            vec![json!({ "tool_calls": calls })]
        } else {
            calls
                .into_iter()
                .map(|c| json!({"tool_calls": [c]}))
                .collect()
        };
        turns.push(json!({"text": "Done."}));
        json!({"name": shape.title, "match": {"system_contains": shape.title}, "turns": turns})
    };
    json!({
        "scenarios": [scenario(SERIAL), scenario(BATCHED), scenario(SINGLE)],
        "fallback": {"text": "Nothing to do."}
    })
    .to_string()
}

/// `agency model-server` as its own process; killed on drop.
pub(crate) struct ModelServer {
    child: Child,
    pub url: String,
}

impl ModelServer {
    pub fn start(bin: &Path, script: &Path) -> Result<ModelServer> {
        let mut child = Command::new(bin)
            .arg("model-server")
            .arg("--script")
            .arg(script)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .context("failed to start agency model-server")?;
        let out = child
            .stdout
            .take()
            .context("failed to read the model server's output")?;
        let mut line = String::new();
        BufReader::new(out)
            .read_line(&mut line)
            .context("failed to read the model server's URL")?;
        let url = line.trim().to_owned();
        if !url.starts_with("http://") {
            let _ = child.kill();
            bail!("agency model-server printed {url:?} instead of its URL");
        }
        Ok(ModelServer { child, url })
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What one run of `n` agents did.
#[derive(Debug)]
pub(crate) struct RunStats {
    pub n: usize,
    pub wall: Duration,
    /// The daemon's: the process's minus the bench's polls and watcher.
    pub cpu: Duration,
    /// CPU time of the bench's polls, taken out of `cpu`.
    pub polls_cpu: Duration,
    pub ok: usize,
    pub tool_calls: i64,
    /// Events the log gained from the daemon's start to the run's end.
    pub logged: i64,
    /// Of them, `tool.called` steps.
    pub logged_steps: usize,
    /// What the live subscriber saw, with `Setup::watch`.
    pub watched: Option<Watched>,
    /// Handlers (the root aside) two of whose runs overlapped in time.
    pub overlapping: usize,
}

/// Handlers other than `root` with two runs overlapping in time (a run
/// still live counts as never ending).
fn overlapping(agents: &[agency_store::AgentRow], root: agency_core::HandlerId) -> usize {
    let mut by_handler: std::collections::HashMap<_, Vec<(i64, i64)>> =
        std::collections::HashMap::new();
    for a in agents.iter().filter(|a| a.handler != root) {
        by_handler
            .entry(a.handler)
            .or_default()
            .push((a.started_at.0, a.ended_at.map_or(i64::MAX, |t| t.0)));
    }
    let mut n = 0;
    for runs in by_handler.values_mut() {
        runs.sort_unstable();
        if runs.windows(2).any(|w| w[1].0 < w[0].1) {
            n += 1;
        }
    }
    n
}

pub(crate) async fn one_run(
    bin: &Path,
    model_url: &str,
    n: usize,
    shape: Shape,
    setup: Setup,
) -> Result<RunStats> {
    one_run_on(bin, model_url, n, shape, setup, &Store::Sqlite).await
}

/// Where a run's daemons keep their store.
#[derive(Debug, Clone)]
pub(crate) enum Store {
    /// One daemon, its home's SQLite store.
    Sqlite,
    /// `daemons` daemons (each with a home of its own, in this process)
    /// sharing the PostgreSQL database `url`.
    Postgres { url: String, daemons: usize },
}

/// [`one_run`] on `store`. With several daemons the CPU time is all of
/// theirs, and `overlapping` counts handlers two of whose runs overlapped.
pub(crate) async fn one_run_on(
    bin: &Path,
    model_url: &str,
    n: usize,
    shape: Shape,
    setup: Setup,
    store: &Store,
) -> Result<RunStats> {
    let dir = tempfile::tempdir().context("failed to create a temporary directory")?;
    let config = format!(
        "[agents]\nruntime = \"builtin\"\nmax_concurrent = {}\nagency_program = {:?}\n[agents.builtin]\napi = \"anthropic\"\nbase_url = {model_url:?}\nmodel = \"scripted\"\nmax_turns = 40\n",
        setup.max_concurrent,
        bin.display().to_string()
    );
    let (url, daemons) = match store {
        Store::Sqlite => (None, 1),
        Store::Postgres { url, daemons } => (Some(url.as_str()), (*daemons).max(1)),
    };
    let homes = (0..daemons)
        .map(|i| new_home_with(&dir.path().join(format!("home{i}")), &config, url))
        .collect::<Result<Vec<_>>>()?;
    let home = homes[0].clone();
    // The handlers, made by the root handler's agent through the service
    // (outcome_create + delegate, as an agent would), before the daemon runs.
    let h2 = home.clone();
    let log_start = tokio::task::spawn_blocking(move || {
        let svc = h2.open_service().context("failed to open the service")?;
        let root = svc
            .root_handler()?
            .context("failed to find the root handler")?;
        let minted = svc
            .token_mint(Principal::User, root, None)
            .context("failed to mint a token for the root handler")?;
        let who = Principal::agent(root, minted.agent);
        for i in 0..n {
            let o = svc
                .outcome_create(
                    who,
                    &NewOutcome {
                        title: format!("{} {i}", shape.title),
                        description: "Read your state document, then request completion."
                            .to_owned(),
                        parents: vec![root.root()],
                        priority: 0,
                    },
                )
                .context("failed to create an outcome")?;
            svc.delegate(who, o, &[])
                .context("failed to delegate an outcome")?;
        }
        // Done: on a shared store no daemon's start ends an attached
        // client's agent, and the root gets another one below.
        svc.token_revoke(Principal::User, minted.agent)
            .context("failed to revoke the populating token")?;
        svc.flush_read_audit()?;
        anyhow::Ok(svc.events_end(Principal::User)?)
    })
    .await
    .context("failed to join the populating task")??;
    let cpu0 = self_cpu()?;
    let t0 = Instant::now();
    let mut running = Vec::new();
    for h in &homes {
        running.push(
            agency_daemon::Daemon::start(h)
                .await
                .context("failed to start the daemon")?,
        );
    }
    let svc = running[0].service().clone();
    // Before the first agent's first tool call: an agent is spawned, opens
    // its MCP session and asks the model first.
    svc.bench_log_tool_steps(setup.tool_steps);
    let watcher = if setup.watch {
        Some(Watcher::start(&home, &svc, log_start).await?)
    } else {
        None
    };
    // The root handler gets mail from every finishing agent; an attached
    // client as its live agent keeps the supervisor from running one for it.
    let s = svc.clone();
    let root = tokio::task::spawn_blocking(move || {
        let root = s
            .root_handler()?
            .context("failed to find the root handler")?;
        s.token_mint(Principal::User, root, None)
            .context("failed to mint a token for the root handler")?;
        anyhow::Ok(root)
    })
    .await
    .context("failed to join a task")??;
    let deadline = Instant::now() + Duration::from_secs(3600);
    // The bench's own polls run in this process too: their CPU time is
    // measured on their thread and taken out of the daemon's.
    let mut polls_cpu = Duration::ZERO;
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let s = svc.clone();
        let (done, cpu) = tokio::task::spawn_blocking(move || {
            let t = thread_cpu();
            // The root has work too (its Process Inbox holds the agents'
            // completion requests), served by the attached client.
            let idle = s.handlers_with_work(None, 2)?.iter().all(|h| *h == root);
            let live = s.agents_live(Principal::User)?.len();
            anyhow::Ok((idle && live <= 1, thread_cpu().saturating_sub(t)))
        })
        .await
        .context("failed to join a task")??;
        polls_cpu += cpu;
        if done {
            break;
        }
        if Instant::now() > deadline {
            bail!("{n} agents did not finish within an hour");
        }
    }
    let wall = t0.elapsed();
    let watched = match watcher {
        Some(w) => Some(w.finish(&svc).await?),
        None => None,
    };
    let watch_cpu = watched.as_ref().map_or(Duration::ZERO, |w| w.cpu);
    let cpu = self_cpu()?
        .saturating_sub(cpu0)
        .saturating_sub(polls_cpu)
        .saturating_sub(watch_cpu);
    let (logged, logged_steps) = log_count(&svc, log_start).await?;
    let s = svc.clone();
    let (ok, tool_calls, overlapping) = tokio::task::spawn_blocking(move || {
        let agents = s.agents_recent(Principal::User, Some(3 * n + 10))?;
        let overlapping = overlapping(&agents, root);
        let (mut ok, mut calls) = (0, 0);
        for a in agents.iter().filter(|a| a.handler != root) {
            let run = s.agent_run(Principal::User, a.id)?;
            calls += run.tool_calls.unwrap_or(0);
            if run.exit_status == Some(0)
                && run.tool_calls == Some(shape.tool_calls() as i64)
                && a.end_reason.as_deref() == Some("completed")
            {
                ok += 1;
            }
        }
        anyhow::Ok((ok, calls, overlapping))
    })
    .await
    .context("failed to join a task")??;
    for daemon in running {
        daemon.stop().await.context("failed to stop the daemon")?;
    }
    Ok(RunStats {
        overlapping,
        n,
        wall,
        cpu,
        polls_cpu,
        ok,
        tool_calls,
        logged,
        logged_steps,
        watched,
    })
}

/// Events logged after `after`, and how many of them are `tool.called`.
async fn log_count(svc: &Arc<System>, after: i64) -> Result<(i64, usize)> {
    let s = svc.clone();
    tokio::task::spawn_blocking(move || {
        let end = s.events_end(Principal::User)?;
        let mut q = EventQuery {
            after,
            kinds: vec!["tool.called".to_owned()],
            limit: Some(1000),
            ..EventQuery::default()
        };
        let mut steps = 0;
        loop {
            let page = s.events_read(Principal::User, &q)?;
            steps += page.events.len();
            if page.events.is_empty() {
                return anyhow::Ok((end - after, steps));
            }
            q.after = page.next;
        }
    })
    .await
    .context("failed to join a task")?
}

/// CPU time of the calling thread so far.
pub(crate) fn thread_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        t.tv_sec.max(0) as u64,
        t.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

/// Item 6.
pub async fn run(cfg: Cfg) -> Result<Vec<Section>> {
    let n = cfg.pick(500, 50);
    let few = 8;
    let bin = agency_bin()?;
    let dir = tempfile::tempdir().context("failed to create a temporary directory")?;
    let script_path = dir.path().join("script.json");
    std::fs::write(&script_path, script()).context("failed to write the model script")?;
    let model = ModelServer::start(&bin, &script_path)?;
    let base = one_run(&bin, &model.url, few, SERIAL, PLAIN).await?;
    let many = one_run(&bin, &model.url, n, SERIAL, PLAIN).await?;
    let batched = one_run(&bin, &model.url, n, BATCHED, PLAIN).await?;
    let single = one_run(&bin, &model.url, n, SINGLE, PLAIN).await?;
    drop(model);
    let per_agent = |r: &RunStats| r.wall / r.n.max(1) as u32;
    let per_call = |r: &RunStats| r.cpu / r.tool_calls.max(1) as u32;
    let mut s = Section::new(format!(
        "6. Many agents: {n} builtin agents × {CALLS} tool calls"
    ));
    s.rows.push(Row::new(
        "agents completed without error",
        format!("{} of {}", many.ok, many.n),
        format!("{} of {} ({few} agents)", base.ok, base.n),
        ratio(
            many.ok as f64 / many.n as f64,
            base.ok as f64 / base.n.max(1) as f64,
        ),
    ));
    s.rows.push(Row::new(
        "tool calls answered (as the agents counted them)",
        many.tool_calls.to_string(),
        format!("{} ({few} agents)", base.tool_calls),
        ratio(
            many.tool_calls as f64 / many.n as f64,
            base.tool_calls as f64 / base.n.max(1) as f64,
        ),
    ));
    s.rows.push(Row::new(
        "wall time",
        fmt_dur(many.wall),
        format!("{} ({few} agents)", fmt_dur(base.wall)),
        ratio(many.wall.as_secs_f64(), base.wall.as_secs_f64()),
    ));
    s.rows.push(Row::times(
        "wall time per agent",
        per_agent(&many),
        (&format!("{few} agents"), per_agent(&base)),
    ));
    s.rows.push(Row::times(
        "daemon CPU per tool call",
        per_call(&many),
        (&format!("{few} agents"), per_call(&base)),
    ));
    let parts = Parts::of(&many, &batched, &single);
    let all_in = per_call(&many);
    s.rows.push(Row::times(
        "… of which a tool call itself (T, derived)",
        parts.tool_call,
        ("daemon CPU per tool call", all_in),
    ));
    s.rows.push(Row::times(
        "… of which the model calls through the gateway, 21 per 20 tool calls (21M/20, derived)",
        parts.model_call * 21 / CALLS as u32,
        ("daemon CPU per tool call", all_in),
    ));
    s.rows.push(Row::times(
        "… of which the agent's start, MCP session and run record, over 20 tool calls (F/20, derived)",
        parts.agent / CALLS as u32,
        ("daemon CPU per tool call", all_in),
    ));
    s.rows.push(Row::times(
        "daemon CPU per model call through the gateway (M, derived)",
        parts.model_call,
        ("a tool call itself", parts.tool_call),
    ));
    s.shows = "that hundreds of agent processes complete through one daemon, and what each tool call costs the daemon when spawning, sessions, bookkeeping and the agents' model calls are shared out over the calls; the derived rows split that cost into its parts.".to_owned();
    s.notes.push(format!(
        "max_concurrent = {MAX_CONCURRENT}; each agent is `agency agent` (Anthropic Messages API, streaming) against `agency model-server` in its own process; the daemon runs in this process and its CPU time (user + system, /proc/self/stat, children excluded, minus the CPU time of the bench's own polls of the store every 100 ms, each measured on its thread with CLOCK_THREAD_CPUTIME_ID) covers spawning, MCP sessions (initialize, tools/list), the tool calls, every model call (the agents' model calls pass through the daemon's gateway: token check, budget reservation and settlement, the streamed relay; 21 per agent) and recording each run, divided by the tool calls the agents reported. Handlers are made through the service (outcome_create + delegate by the root handler's agent) before the clock starts; wall time runs from `Daemon::start` to the last agent's exit with no handler left with work. Success: exit 0, `completed`, {CALLS} tool calls, and the handler's root outcome awaiting verification (no work left)."
    ));
    s.notes.push(format!(
        "the bench's polls took {} of CPU in the {n}-agent run and {} in the {few}-agent one, not counted as the daemon's",
        fmt_dur(many.polls_cpu),
        fmt_dur(base.polls_cpu)
    ));
    s.notes.push(format!(
        "derived rows: two more runs of {n} agents each, one making the same {CALLS} tool calls in a single model turn (2 model calls; {} of {} completed, {} tool calls, {} of daemon CPU per agent) and one making only the completion request (1 tool call, 2 model calls; {} of {} completed, {} tool calls, {} per agent), against {} per agent in the {n}-agent run above. Per agent the three cost F + 20T + 21M, F + 20T + 2M and F + T + 2M: M = (first − second) / 19, T = (second − third) / 19, F = third − T − 2M. T is a `state_read` (the calls the runs differ by); M covers the token check, budget reservation and settlement, and the streamed relay of one model call.",
        batched.ok,
        batched.n,
        batched.tool_calls,
        fmt_dur(per_agent_cpu(&batched)),
        single.ok,
        single.n,
        single.tool_calls,
        fmt_dur(per_agent_cpu(&single)),
        fmt_dur(per_agent_cpu(&many)),
    ));
    if cfg.quick {
        s.notes
            .push(format!("quick mode: {n} agents instead of 500."));
    }
    Ok(vec![s])
}

/// Daemon CPU per agent of one run.
pub(crate) fn per_agent_cpu(r: &RunStats) -> Duration {
    r.cpu / r.n.max(1) as u32
}

/// M in nanoseconds: the CPU per agent a serial run spends beyond a
/// batched one, over the 19 model calls it makes more.
fn model_call_ns(serial: &RunStats, batched: &RunStats) -> f64 {
    let ns = |r: &RunStats| per_agent_cpu(r).as_nanos() as f64;
    (ns(serial) - ns(batched)) / (CALLS - 1) as f64
}

/// M (see [`model_call_ns`]); noise that makes it negative shows as zero.
pub(crate) fn model_call_cpu(serial: &RunStats, batched: &RunStats) -> Duration {
    Duration::from_nanos(model_call_ns(serial, batched).max(0.0) as u64)
}

/// The daemon's CPU per agent split into its parts (see the module doc);
/// a part the noise makes negative shows as zero.
struct Parts {
    tool_call: Duration,
    model_call: Duration,
    agent: Duration,
}

impl Parts {
    fn of(serial: &RunStats, batched: &RunStats, single: &RunStats) -> Parts {
        let ns = |r: &RunStats| per_agent_cpu(r).as_nanos() as f64;
        let model_call = model_call_ns(serial, batched);
        let tool_call = (ns(batched) - ns(single)) / (CALLS - 1) as f64;
        let agent = ns(single) - tool_call - 2.0 * model_call;
        let d = |x: f64| Duration::from_nanos(x.max(0.0) as u64);
        Parts {
            tool_call: d(tool_call),
            model_call: d(model_call),
            agent: d(agent),
        }
    }
}
