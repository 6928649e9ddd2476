//! The scheduler and supervisor of agents, built as a dispatcher that owns
//! all state and reacts to messages: service events (mail delivered, status
//! changed, handler created or stopped), agent exits, and backoff timers.
//! Nothing scans every handler on a timer; only a start (or a lagged event
//! stream) walks the indexed work query once.
//!
//! Per agent (`spawn.rs`: one store transaction prepares it): a fresh
//! token and workspace, the seed's prompt, a process group of its own. On
//! exit (`finish.rs`, off the dispatcher): usage and transcript are
//! recorded, the workspace is deleted, and the handler is respawned — at
//! once after progress, with exponential backoff otherwise, and marked
//! stalled after `stall_after_exits` exits in a row without progress.
//!
//! When a handler gains or loses an MCP-server capability while its agent
//! runs, the agent is told (a message) to save its state and exit, and is
//! stopped if it has not after `config_restart_grace_ms`; the next agent is
//! started at once, with the new servers, and the exit does not count as
//! one without progress.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agency_core::{AgentId, HandlerId, MailTarget, Resource};
use agency_service::{Event, RunOutcome, ServiceError, System};
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::agent_log::LogCapture;
use crate::confine::Confiner;
use crate::live::{LiveGuard, LiveRuns};
use crate::process::stop_group;
use crate::runtime::{Runtime, SpawnSpec};
use crate::warm::WarmRegistry;
use agency_config::mcp_servers::McpServers;
use agency_config::{AgentsConfig, LogConfig};
use agency_http::Activity;

mod finish;
mod lease;
mod reconfigure;
mod spawn;
mod standby;

use finish::Finish;
pub use lease::LeaseSettings;
pub use reconfigure::Reconfigure;
use spawn::SpawnError;
use standby::Standby;

enum Msg {
    Consider(HandlerId),
    /// The user decided one of the handler's approval requests: new
    /// information, so its spawn decision is made now, past any backoff.
    Decided(HandlerId),
    IdleCheck(AgentId),
    Rescan,
    Exited {
        handler: HandlerId,
        agent: AgentId,
        status: Option<i32>,
        signalled: bool,
    },
    /// An exited agent's run is recorded (`outcome`: what the store said,
    /// none if recording failed).
    Finished {
        handler: HandlerId,
        outcome: Option<RunOutcome>,
        config_restart: bool,
    },
    Kill(Vec<AgentId>),
    /// An agent ended in the store (its token revoked, its process gone,
    /// a client detached): the handler may need an agent.
    Ended {
        handler: HandlerId,
        agent: AgentId,
    },
    /// A handler's MCP-server capabilities changed.
    McpChanged(HandlerId),
    /// The grace period of an agent told to restart for new MCP servers.
    ConfigDeadline(AgentId),
    /// The grace of a warm agent released to free its slot.
    ReleaseDeadline(AgentId),
    /// An agent parked in `mail_wait`: a queued handler may take its slot.
    WarmParked,
    /// `agency reload`: the `[agents]` settings that apply live, and
    /// agents started from now get the new sandbox (`reconfigure.rs`).
    Reloaded(Box<AgentsConfig>),
    /// The user changed the handler's keep-warm setting (`reconfigure.rs`).
    KeepWarmChanged(HandlerId),
    /// A heartbeat's answer: the leases this daemon still holds
    /// (`lease.rs`).
    /// With when the renewal began.
    Renewed(Instant, Result<Vec<agency_service::HeldLease>, String>),
    Shutdown(oneshot::Sender<()>),
}

struct Running {
    agent: AgentId,
    pgid: u32,
    spec: SpawnSpec,
    /// Set when the supervisor itself stops the agent, to record why.
    stop_reason: Option<String>,
    /// The agent was told to exit for a new MCP configuration: its exit is
    /// expected, and the next agent starts at once.
    config_restart: bool,
    /// Its stdout and stderr, captured (bounded) for the run record.
    log: Option<LogCapture>,
    /// Its entry among the live runs, for followers.
    live: Option<LiveGuard>,
    /// Its cgroup (sandbox on): killed with the group, removed after exit.
    cgroup: Option<Arc<agency_sandbox::AgentCgroup>>,
    /// The handler's lease it runs under (several daemons on one store).
    lease: Option<agency_service::HeldLease>,
    /// When it was recorded here, after its lease was claimed: a renewal
    /// begun earlier may not know that lease yet, and does not judge it.
    leased_at: Instant,
}

impl Running {
    /// Stop the agent: SIGTERM to its group, the grace period, SIGKILL,
    /// then its cgroup is killed too, which reaches the processes that left
    /// the group (`setsid`, a double fork, a leader that changed group).
    fn stop(&self, grace: Duration) {
        let (pgid, cgroup) = (self.pgid, self.cgroup.clone());
        tokio::spawn(async move {
            stop_group(pgid, grace).await;
            if let Some(cg) = cgroup {
                crate::confine::kill(cg).await;
            }
        });
    }
}

/// What the supervisor needs besides the service and the runtime.
#[derive(Debug, Clone)]
pub struct SupervisorSetup {
    pub cfg: AgentsConfig,
    /// Where agents' workspaces and run directories are made.
    pub runs: PathBuf,
    pub mcp_url: String,
    pub servers: Arc<McpServers>,
    /// The `agency` binary (`mcp-launch` for extra servers).
    pub launcher: PathBuf,
    /// Issues each spawn's launch nonces and hears of each agent's end
    /// (the tools and the egress proxy keep per-agent state).
    pub hooks: Arc<dyn AgentHooks>,
    /// Bounds of each run's captured output.
    pub log: LogConfig,
    /// The egress proxy (127.0.0.1): agents get it as `HTTP(S)_PROXY`; its
    /// port is one the sandbox must let them connect to.
    pub egress_proxy: SocketAddr,
    /// Builds each spawn's sandbox (or runs it unconfined, `off`).
    pub confiner: Arc<Confiner>,
    /// Per agent, how `repo_push` reads its clones: through the agent's own
    /// sandbox when it has one (`agency-repos`).
    pub upload_packs: Arc<agency_repos::UploadPacks>,
    /// Ports agents may connect to besides the daemon's MCP port (the
    /// egress proxy's).
    pub extra_connect_ports: Vec<u16>,
    /// Agents parked in `mail_wait` (warm), shared with the MCP tool.
    pub warm: Arc<WarmRegistry>,
    /// The runs live now, for their followers (the daemon's routes).
    pub live: Arc<LiveRuns>,
    /// Several daemons on one store: run agents only under leases.
    pub lease: Option<LeaseSettings>,
}

/// What the supervisor tells the parts that keep state per agent which it
/// does not own (launch nonces, egress keys, the stdio MCP servers the
/// daemon runs for an agent). The daemon implements it; the supervisor
/// depends on none of those parts.
pub trait AgentHooks: Send + Sync + std::fmt::Debug {
    /// A fresh single-use nonce for `agent`'s launcher of MCP server
    /// `server`.
    fn launch_nonce(&self, agent: AgentId, server: &str) -> String;
    /// `agent` ended (or never started): what was issued for it dies and
    /// what runs for it stops.
    fn agent_ended(&self, agent: AgentId);
}

/// Handle to the running dispatcher.
#[derive(Debug)]
pub struct Supervisor {
    tx: mpsc::UnboundedSender<Msg>,
    dispatcher: JoinHandle<()>,
    parked: JoinHandle<()>,
    heartbeat: Option<JoinHandle<()>>,
}

impl Supervisor {
    pub fn start(
        svc: Arc<System>,
        runtime: Arc<dyn Runtime>,
        activity: Arc<Activity>,
        setup: SupervisorSetup,
    ) -> Supervisor {
        let (tx, rx) = mpsc::unbounded_channel();
        // Subscribe before the first scan, so nothing that happens in
        // between is missed.
        let events = svc.subscribe();
        // Each run directory in a block group of its own, so the files an
        // agent run makes and leaves do not slow every other file creation
        // (`agency_store::spread_subdirectories`). A home that cannot be
        // written fails at the first spawn, with the path named.
        if std::fs::create_dir_all(&setup.runs).is_ok() {
            agency_store::spread_subdirectories(&setup.runs);
        }
        let parked = tokio::spawn(listen_parked(setup.warm.clone(), tx.clone()));
        let heartbeat = setup
            .lease
            .clone()
            .map(|l| tokio::spawn(lease::heartbeat(svc.clone(), l, tx.clone())));
        let state = State {
            svc,
            runtime,
            activity,
            cfg: setup.cfg,
            runs: setup.runs,
            mcp_url: setup.mcp_url,
            servers: setup.servers,
            launcher: setup.launcher,
            hooks: setup.hooks,
            log: setup.log,
            egress_proxy: setup.egress_proxy,
            confiner: setup.confiner,
            upload_packs: setup.upload_packs,
            extra_connect_ports: setup.extra_connect_ports,
            warm: setup.warm,
            live: setup.live,
            lease: setup.lease,
            renewed_at: Instant::now(),
            finishing_leases: HashMap::new(),
            tx: tx.clone(),
            running: HashMap::new(),
            by_agent: HashMap::new(),
            queue: VecDeque::new(),
            queued: HashSet::new(),
            failures: HashMap::new(),
            not_before: HashMap::new(),
            timers: HashSet::new(),
            finishing: HashSet::new(),
            decided: HashSet::new(),
            standby: None,
            shutting_down: false,
        };
        let dispatcher = tokio::spawn(state.run(rx, events));
        let _ = tx.send(Msg::Rescan);
        Supervisor {
            tx,
            dispatcher,
            parked,
            heartbeat,
        }
    }

    /// How `agency reload` reaches the dispatcher.
    pub fn reconfigure(&self) -> Reconfigure {
        Reconfigure(self.tx.clone())
    }

    /// Stop every agent (process groups get SIGTERM, then SIGKILL after the
    /// grace period) and the dispatcher.
    pub async fn shutdown(self) {
        let (done, wait) = oneshot::channel();
        if self.tx.send(Msg::Shutdown(done)).is_ok() {
            let _ = wait.await;
        }
        self.parked.abort();
        if let Some(h) = &self.heartbeat {
            h.abort();
        }
        let _ = self.dispatcher.await;
    }
}

/// Tell the dispatcher each time an agent parks warm.
async fn listen_parked(warm: Arc<WarmRegistry>, tx: mpsc::UnboundedSender<Msg>) {
    loop {
        warm.parked().await;
        if tx.send(Msg::WarmParked).is_err() {
            return;
        }
    }
}

/// The dispatcher's message for a service event, if it cares.
fn event_msg(event: Result<Event, broadcast::error::RecvError>) -> Option<Msg> {
    Some(match event {
        Ok(Event::MessageDelivered {
            to: MailTarget::Handler(h),
            ..
        }) => Msg::Consider(h),
        Ok(Event::OutcomeStatusChanged { responsible, .. }) => Msg::Consider(responsible),
        Ok(Event::HandlerCreated { handler, .. }) => Msg::Consider(handler),
        Ok(Event::ApprovalDecided { handler, .. }) => Msg::Decided(handler),
        Ok(Event::KeepWarmChanged { handler }) => Msg::KeepWarmChanged(handler),
        Ok(Event::HandlerStopped { agents, .. }) if !agents.is_empty() => Msg::Kill(agents),
        Ok(Event::AgentEnded { agent, handler }) => Msg::Ended { handler, agent },
        // A lifted budget: its subtree's pending work may run again.
        Ok(Event::BudgetResumed { .. }) => Msg::Rescan,
        Ok(
            Event::CapabilityGranted {
                holder,
                resource: Resource::McpServer(_),
                ..
            }
            | Event::CapabilityRevoked {
                holder,
                resource: Resource::McpServer(_),
                ..
            },
        ) => Msg::McpChanged(holder),
        Ok(_) | Err(broadcast::error::RecvError::Closed) => return None,
        // Missed events: fall back to the indexed work query once.
        Err(broadcast::error::RecvError::Lagged(_)) => Msg::Rescan,
    })
}

struct State {
    svc: Arc<System>,
    runtime: Arc<dyn Runtime>,
    activity: Arc<Activity>,
    cfg: AgentsConfig,
    runs: PathBuf,
    mcp_url: String,
    servers: Arc<McpServers>,
    launcher: PathBuf,
    hooks: Arc<dyn AgentHooks>,
    log: LogConfig,
    egress_proxy: SocketAddr,
    confiner: Arc<Confiner>,
    upload_packs: Arc<agency_repos::UploadPacks>,
    extra_connect_ports: Vec<u16>,
    warm: Arc<WarmRegistry>,
    live: Arc<LiveRuns>,
    lease: Option<LeaseSettings>,
    /// When a heartbeat last renewed this daemon's leases.
    renewed_at: Instant,
    /// The leases of handlers whose exited agent is being recorded.
    finishing_leases: HashMap<HandlerId, agency_service::HeldLease>,
    tx: mpsc::UnboundedSender<Msg>,
    running: HashMap<HandlerId, Running>,
    by_agent: HashMap<AgentId, HandlerId>,
    queue: VecDeque<HandlerId>,
    queued: HashSet<HandlerId>,
    /// Exits in a row without progress, per handler.
    failures: HashMap<HandlerId, u32>,
    not_before: HashMap<HandlerId, Instant>,
    timers: HashSet<HandlerId>,
    /// Handlers whose exited agent is being recorded (off the dispatcher):
    /// none of them starts again before its run is recorded and the
    /// backoff decided.
    finishing: HashSet<HandlerId>,
    /// Handlers one of whose approval requests was decided while their
    /// agent ran or was being recorded (`decided`).
    decided: HashSet<HandlerId>,
    /// The next agent's sandbox, ready before it is needed (`standby.rs`).
    standby: Option<Standby>,
    shutting_down: bool,
}

impl State {
    /// The dispatcher's loop: its own messages and the service's events,
    /// the latter read here rather than relayed by a task of their own,
    /// which would add a thread hop between a delivery and its spawn.
    async fn run(
        mut self,
        mut rx: mpsc::UnboundedReceiver<Msg>,
        mut events: broadcast::Receiver<Event>,
    ) {
        let mut shutdown_reply = None;
        let mut events_open = true;
        loop {
            let msg = tokio::select! {
                m = rx.recv() => match m {
                    Some(m) => m,
                    None => break,
                },
                e = events.recv(), if events_open => {
                    if matches!(e, Err(broadcast::error::RecvError::Closed)) {
                        events_open = false;
                    }
                    match event_msg(e) {
                        Some(m) => m,
                        None => continue,
                    }
                }
            };
            match msg {
                Msg::Consider(h) => self.consider(h).await,
                Msg::Decided(h) => self.decided(h).await,
                Msg::IdleCheck(agent) => self.idle_check(agent),
                Msg::Rescan => self.rescan().await,
                Msg::Exited {
                    handler,
                    agent,
                    status,
                    signalled,
                } => self.exited(handler, agent, status, signalled),
                Msg::Finished {
                    handler,
                    outcome,
                    config_restart,
                } => self.finished(handler, outcome, config_restart).await,
                Msg::Kill(agents) => self.kill(&agents),
                Msg::Ended { handler, agent } => self.ended(handler, agent).await,
                Msg::McpChanged(h) => self.mcp_changed(h).await,
                Msg::ConfigDeadline(agent) => self.config_deadline(agent),
                Msg::ReleaseDeadline(agent) => self.release_deadline(agent),
                Msg::Reloaded(cfg) => self.reloaded(*cfg).await,
                Msg::KeepWarmChanged(h) => self.keep_warm_changed(h).await,
                Msg::Renewed(began, r) => self.renewed(began, r).await,
                Msg::WarmParked => {
                    if !self.shutting_down && !self.queue.is_empty() {
                        self.yield_warm_slots();
                    }
                }
                Msg::Shutdown(reply) => {
                    self.shutting_down = true;
                    let agents: Vec<AgentId> = self.running.values().map(|r| r.agent).collect();
                    self.kill(&agents);
                    shutdown_reply = Some(reply);
                }
            }
            if self.shutting_down && self.running.is_empty() && self.finishing.is_empty() {
                break;
            }
            self.pump().await;
        }
        if let Some(sb) = self.standby.take() {
            sb.discard(true).await;
        }
        if let Some(reply) = shutdown_reply {
            let _ = reply.send(());
        }
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&System) -> Result<T, ServiceError> + Send + 'static,
    ) -> Result<T, ServiceError> {
        let svc = self.svc.clone();
        tokio::task::spawn_blocking(move || f(&svc))
            .await
            .unwrap_or_else(|e| {
                Err(ServiceError::invalid(format!(
                    "failed to run a store call: {e}"
                )))
            })
    }

    async fn rescan(&mut self) {
        // Sharing the store: only the work this daemon may claim (every
        // other handler's would cost a refused claim each).
        if let Some(l) = self.lease.clone() {
            self.sweep(&l.spec.owner).await;
            return;
        }
        let mut after = None;
        loop {
            let page = self
                .blocking(move |s| s.handlers_with_work(after, 500))
                .await;
            let Ok(page) = page else { return };
            let Some(last) = page.last().copied() else {
                return;
            };
            after = Some(last);
            for h in page {
                self.consider(h).await;
            }
        }
    }

    /// Queue a handler that has work, no live agent here, is not stalled
    /// and is past its backoff.
    async fn consider(&mut self, h: HandlerId) {
        if self.shutting_down
            || self.running.contains_key(&h)
            || self.queued.contains(&h)
            || self.finishing.contains(&h)
        {
            return;
        }
        if let Some(at) = self.not_before.get(&h).copied()
            && at > Instant::now()
        {
            if self.timers.insert(h) {
                let tx = self.tx.clone();
                tokio::spawn(async move {
                    tokio::time::sleep_until(at).await;
                    let _ = tx.send(Msg::Consider(h));
                });
            }
            return;
        }
        self.timers.remove(&h);
        // A free slot and nobody ahead: straight to the spawn, whose one
        // store transaction checks the same as below (one
        // transaction from a delivery to the agent's process).
        if self.queue.is_empty() && self.slot_free() {
            self.start(h).await;
            return;
        }
        // A paused budget holds the handler until it is lifted
        // (`BudgetResumed` rescans): not queued, so no retry spin.
        let ready = self.blocking(move |s| s.spawn_ready(h)).await;
        if ready.unwrap_or(false) {
            self.queued.insert(h);
            self.queue.push_back(h);
        }
    }

    /// Whether an agent may start: live agents and exited ones whose run
    /// is still being recorded hold the `max_concurrent` slots (the store
    /// still counts the latter as live, e.g. against a budget's live-agent
    /// limit).
    fn slot_free(&self) -> bool {
        self.running.len() + self.finishing.len() < self.cfg.max_concurrent
    }

    /// Spawn an agent for `h`; a failure is logged (and counted as an
    /// exit without progress by the spawn).
    async fn start(&mut self, h: HandlerId) {
        if let Err(e) = self.spawn(h).await {
            match e {
                // An attached client is this handler's agent: not ours to run.
                SpawnError::Service(ServiceError::AgentLive { .. }) => {}
                e => tracing::warn!(handler = %h, error = %e, "failed to start an agent"),
            }
        }
    }

    async fn pump(&mut self) {
        while !self.shutting_down && self.slot_free() {
            let Some(h) = self.queue.pop_front() else {
                return;
            };
            self.queued.remove(&h);
            self.start(h).await;
        }
        if !self.shutting_down && !self.queue.is_empty() {
            self.yield_warm_slots();
        }
    }

    /// Every slot is taken and handlers wait: warm agents give theirs
    /// back (`warm.rs`), each stopped only if it has not ended after
    /// `RELEASE_GRACE`.
    fn yield_warm_slots(&mut self) {
        let running = self.running.values().filter(|r| r.stop_reason.is_none());
        let released =
            crate::warm::yield_slots(&self.warm, self.queue.len(), running.map(|r| r.agent));
        for agent in released {
            tracing::info!(agent = %agent, "warm agent released: a handler waits for its slot");
            let tx = self.tx.clone();
            tokio::spawn(async move {
                tokio::time::sleep(crate::warm::RELEASE_GRACE).await;
                let _ = tx.send(Msg::ReleaseDeadline(agent));
            });
        }
    }

    /// A released warm agent has not ended within its grace: stop it.
    fn release_deadline(&mut self, agent: AgentId) {
        let Some(run) = self
            .by_agent
            .get(&agent)
            .and_then(|h| self.running.get_mut(h))
        else {
            return;
        };
        if run.agent == agent && run.stop_reason.is_none() {
            run.stop_reason =
                Some("released: a warm agent did not give its slot back in time".to_owned());
            run.stop(Duration::from_millis(self.cfg.kill_grace_ms));
        }
    }

    /// A handler's MCP-server capabilities changed: if its live agent runs
    /// with a different set, tell it to save state and exit, and stop it
    /// after the grace period.
    async fn mcp_changed(&mut self, h: HandlerId) {
        let Some(run) = self.running.get(&h) else {
            return;
        };
        if run.config_restart {
            return;
        }
        let Ok(granted) = self.blocking(move |s| s.mcp_servers_granted(h)).await else {
            return;
        };
        let now = self.usable_servers(h, granted);
        let Some(run) = self.running.get_mut(&h) else {
            return;
        };
        if now == run.spec.mcp_servers {
            return;
        }
        let added: Vec<String> = now
            .iter()
            .filter(|n| !run.spec.mcp_servers.contains(n))
            .cloned()
            .collect();
        let removed: Vec<String> = run
            .spec
            .mcp_servers
            .iter()
            .filter(|n| !now.contains(n))
            .cloned()
            .collect();
        run.config_restart = true;
        let agent = run.agent;
        let notified = self
            .blocking(move |s| s.notify_mcp_servers_changed(h, &added, &removed))
            .await;
        if let Err(e) = notified {
            tracing::warn!(handler = %h, error = %e, "failed to tell the handler that its MCP servers changed");
        }
        let tx = self.tx.clone();
        let grace = Duration::from_millis(self.cfg.config_restart_grace_ms);
        tokio::spawn(async move {
            tokio::time::sleep(grace).await;
            let _ = tx.send(Msg::ConfigDeadline(agent));
        });
    }

    /// The agent told to restart for new MCP servers has not exited: stop
    /// it. (Aimed at that agent: a later one of the handler is untouched.)
    fn config_deadline(&mut self, agent: AgentId) {
        let Some(h) = self.by_agent.get(&agent).copied() else {
            return;
        };
        let Some(run) = self.running.get_mut(&h) else {
            return;
        };
        if run.agent != agent || run.stop_reason.is_some() {
            return;
        }
        run.stop_reason = Some("restarted: its MCP servers changed".to_owned());
        run.stop(Duration::from_millis(self.cfg.kill_grace_ms));
    }

    fn schedule_idle_check(&self, agent: AgentId, after_ms: u64) {
        if self.cfg.idle_timeout_ms == 0 {
            return;
        }
        let tx = self.tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(after_ms)).await;
            let _ = tx.send(Msg::IdleCheck(agent));
        });
    }

    /// Stop an agent silent for longer than the idle timeout; otherwise
    /// check again when it would reach it. (A check for an agent that has
    /// ended finds nothing and does nothing.)
    fn idle_check(&mut self, agent: AgentId) {
        let Some(h) = self.by_agent.get(&agent).copied() else {
            return;
        };
        let timeout = Duration::from_millis(self.cfg.idle_timeout_ms);
        // A warm agent parked in `mail_wait` is waiting, not stuck: its
        // silence counts from now.
        if self.warm.is_parked(agent) {
            self.activity.touch(agent);
        }
        let silent = self.activity.last(agent).map_or(timeout, |t| t.elapsed());
        if silent < timeout {
            let left = (timeout - silent).as_millis();
            self.schedule_idle_check(agent, u64::try_from(left).unwrap_or(u64::MAX).max(1));
            return;
        }
        let Some(run) = self.running.get_mut(&h) else {
            return;
        };
        if run.stop_reason.is_some() {
            return;
        }
        run.stop_reason = Some(format!(
            "stalled: no MCP call for {} ms",
            self.cfg.idle_timeout_ms
        ));
        run.stop(Duration::from_millis(self.cfg.kill_grace_ms));
    }

    /// An agent's process exited: what takes time (stopping what is left
    /// of an unconfined agent's group, the end of its output, the record,
    /// deleting the workspace) runs in a task of its own, so the
    /// dispatcher goes on with other handlers meanwhile; the
    /// task reports back with [`Msg::Finished`], which frees the slot.
    fn exited(&mut self, h: HandlerId, agent: AgentId, status: Option<i32>, signalled: bool) {
        let Some(run) = self.running.remove(&h).filter(|r| r.agent == agent) else {
            return;
        };
        self.by_agent.remove(&agent);
        self.hooks.agent_ended(agent);
        self.upload_packs.forget_agent(agent);
        self.warm.forget(agent);
        self.activity.forget(agent);
        self.finishing.insert(h);
        // Whatever the agent left behind goes with it.
        let unconfined = match run.cgroup {
            Some(cg) => {
                // Confined: every process it started is in its cgroup (none
                // can leave it), so one kill reaches them all, `setsid` and
                // double forks included. Not a wait on its process group:
                // the sandbox's forwarder, orphaned when the agent exits,
                // stays in that group as a zombie until init reaps it
                // (seconds on some machines); nor for the cgroup's
                // removal, which waits for the same.
                if let Err(e) = cg.kill() {
                    tracing::warn!(agent = %agent, error = %e, "failed to kill the cgroup of agent {agent}");
                }
                tokio::spawn(crate::confine::release(cg));
                None
            }
            None => Some(run.pgid),
        };
        let finish = Finish {
            handler: h,
            agent,
            status,
            signalled,
            spec: run.spec,
            log: run.log,
            stop_reason: run.stop_reason,
            config_restart: run.config_restart,
            unconfined,
            live: run.live,
            lease_token: run.lease.map(|l| l.token),
        };
        if let Some(l) = run.lease {
            self.finishing_leases.insert(h, l);
        }
        let (svc, runtime, tx) = (self.svc.clone(), self.runtime.clone(), self.tx.clone());
        let grace = Duration::from_millis(self.cfg.kill_grace_ms);
        tokio::spawn(async move {
            let config_restart = finish.config_restart;
            let outcome = finish.run(svc, runtime, grace).await;
            let _ = tx.send(Msg::Finished {
                handler: h,
                outcome,
                config_restart,
            });
        });
    }

    /// The run of `h`'s exited agent is recorded: respawn at once after
    /// progress, back off otherwise, or mark the handler stalled.
    async fn finished(&mut self, h: HandlerId, outcome: Option<RunOutcome>, config_restart: bool) {
        self.finishing.remove(&h);
        let decided = self.decided.remove(&h);
        let lease = self.finishing_leases.remove(&h);
        // Not recorded (a lost lease, a failing store): nothing to decide.
        let Some(outcome) = outcome else { return };
        if !outcome.has_work || self.shutting_down {
            self.failures.remove(&h);
            // Nothing left to do here: the lease goes back, so that any
            // daemon may take the handler's next work at once.
            if let Some(l) = lease {
                self.release_lease(l).await;
            }
            return;
        }
        if outcome.made_progress || config_restart || decided {
            // An agent asked to restart for new MCP servers did as told;
            // an approval decided during the run is news for the next.
            self.failures.remove(&h);
            self.not_before.remove(&h);
        } else if self.note_failure(h) {
            let k = self.cfg.stall_after_exits;
            let reason = match k {
                1 => "its agent exited without progress while work remains".to_owned(),
                k => format!("{k} agents in a row exited without progress while work remains"),
            };
            let _ = self
                .blocking(move |s| s.handler_mark_stalled(h, &reason))
                .await;
            self.failures.remove(&h);
            return;
        }
        self.consider(h).await;
    }

    /// An approval request of `h` was decided. The agents that
    /// exited without progress may have been waiting for exactly this, so
    /// their backoff no longer applies: the next agent, which finds the
    /// decision's notice in its inbox, starts as soon as a slot is free.
    /// Decided while its agent runs or is being recorded, the exit of that
    /// agent does not count as one without progress either: it may have
    /// read its inbox before the notice came, and the next one must not
    /// wait out a backoff to read it.
    async fn decided(&mut self, h: HandlerId) {
        self.failures.remove(&h);
        self.not_before.remove(&h);
        if self.running.contains_key(&h) || self.finishing.contains(&h) {
            self.decided.insert(h);
        }
        self.consider(h).await;
    }

    /// Count an exit without progress; set the backoff. True when the
    /// handler should now be marked stalled.
    fn note_failure(&mut self, h: HandlerId) -> bool {
        let n = self.failures.entry(h).or_insert(0);
        *n += 1;
        let shift = (*n - 1).min(20);
        let delay = self
            .cfg
            .respawn_backoff_ms
            .saturating_mul(1 << shift)
            .min(self.cfg.max_backoff_ms);
        self.not_before
            .insert(h, Instant::now() + Duration::from_millis(delay));
        *n >= self.cfg.stall_after_exits
    }

    /// An agent ended in the store. Ours (its token revoked while its
    /// process runs): stop the process, whose exit then decides the next
    /// spawn. Not ours (an attached client's token revoked, an agent
    /// reaped): nothing else will start the handler's next agent, so the
    /// spawn decision is made now.
    async fn ended(&mut self, h: HandlerId, agent: AgentId) {
        if let Some(run) = self.running.get(&h) {
            // The store keeps the reason it was ended for (token revoked,
            // force-stopped); a repeated stop of a group is harmless.
            if run.agent == agent {
                run.stop(Duration::from_millis(self.cfg.kill_grace_ms));
            }
            return;
        }
        self.consider(h).await;
    }

    fn kill(&mut self, agents: &[AgentId]) {
        let grace = Duration::from_millis(self.cfg.kill_grace_ms);
        for a in agents {
            let Some(h) = self.by_agent.get(a) else {
                continue;
            };
            let Some(run) = self.running.get(h) else {
                continue;
            };
            // Aimed at this agent instance only: a stale stop for an
            // earlier agent finds nothing here and does nothing.
            run.stop(grace);
        }
    }
}
