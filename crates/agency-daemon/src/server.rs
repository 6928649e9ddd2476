//! Starting and stopping the daemon: the lock that makes it one per home,
//! the listeners (`/mcp` and the MCP launcher on 127.0.0.1 for agents; the
//! admin REST API `/v1` on the home's Unix socket `daemon.sock` only, but
//! for messages to agencies, also on 127.0.0.1 for agency keys; the
//! egress proxy on 127.0.0.1),
//! their guards, the address file, and graceful shutdown (on a signal or
//! `POST /v1/shutdown`).

mod start;

use std::fs::File;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agency_config::home::Home;
use agency_egress::EgressProxy;
use agency_service::System;
use agency_supervisor::Supervisor;
use agency_supervisor::confine::Confiner;
use agency_tools::StdioServers;
use axum::http::StatusCode;
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;

use crate::error::DaemonError;

/// What the daemon's own routes (`/v1`, messages to agencies) read.
pub(crate) struct AppState {
    pub svc: Arc<System>,
    pub admin_hash: blake3::Hash,
    pub addr: SocketAddr,
    pub home: PathBuf,
    /// `agents.runtime` from the configuration (`none` when no agent runs).
    pub runtime: String,
    /// Whether agents run confined: `on`, `off`, `unavailable: CAUSE`.
    pub sandbox: String,
    /// The limits confined agents run under, and what keeps each.
    pub limits: Vec<agency_api::LimitView>,
    /// How often each agency API key may post a message (`[agency_api]`).
    pub agency_rate: crate::rate_limit::KeyRateLimiter,
    /// Notified by `POST /v1/shutdown`; whoever runs the daemon stops it.
    pub shutdown_requested: Arc<Notify>,
    /// `[agents]` keep-warm defaults, for `agency keep-warm`'s answers.
    pub keep_warm: Arc<agency_config::live::Live<agency_service::KeepWarmDefaults>>,
    /// Applies `agency reload` (`reload.rs`).
    pub reloader: Arc<crate::reload::Reloader>,
    /// The sandbox's grants, for `agency up`'s report of a tool program
    /// whose toolchain it does not grant.
    pub confiner: Arc<Confiner>,
    /// The runs live now (`rest/follow.rs` streams them).
    pub live: Arc<agency_supervisor::LiveRuns>,
    /// This daemon's lease owner name and lease time on a shared store
    /// (`None`: the store is its alone).
    pub lease: Option<agency_service::LeaseSpec>,
    /// The gateway's metering queue: flushed before costs and budgets are
    /// read, so `agency cost` after a call counts it.
    pub metering: Arc<agency_gateway::Metering>,
}

/// A running daemon (in this process).
#[derive(Debug)]
pub struct Daemon {
    addr: SocketAddr,
    home: Home,
    svc: Arc<System>,
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<std::io::Result<()>>>,
    admin_shutdown: Option<oneshot::Sender<()>>,
    admin_server: Option<JoinHandle<std::io::Result<()>>>,
    shutdown_requested: Arc<Notify>,
    mail: JoinHandle<()>,
    /// The periodic garbage collection (`None`: `gc_interval_hours = 0`).
    gc: Option<JoinHandle<()>>,
    /// The problem detector's ticks (`problems.rs`).
    problems: JoinHandle<()>,
    /// On a store shared with other daemons: their events, relayed to this
    /// daemon's listeners (`None`: the store is this daemon's alone).
    relay: Option<JoinHandle<()>>,
    supervisor: Option<Supervisor>,
    /// The model gateway's metering queue (flushed at stop).
    metering: Arc<agency_gateway::Metering>,
    /// Drives pipeline runs (`agency-pipeline`'s runner).
    pipelines: agency_pipeline::runner::RunnerHandle,
    /// The OpenTelemetry exporter (`None`: `[telemetry]` off).
    telemetry: Option<agency_telemetry::Exporter>,
    /// The forward proxy agents reach the network through (`egress.rs`).
    egress: Option<EgressProxy>,
    /// `on`, `off` or `unavailable: CAUSE` (see [`Daemon::sandbox`]).
    sandbox: String,
    /// Removes the daemon's cgroups at stop.
    confiner: Arc<Confiner>,
    /// Stopped at stop, before the cgroups are removed.
    stdio: Arc<StdioServers>,
    // Cancelled at stop so open MCP event streams end and shutdown finishes.
    mcp_shutdown: agency_mcp::CancellationToken,
    /// Re-reads agency.toml and policy.toml (`agency reload`, SIGHUP).
    reloader: Arc<crate::reload::Reloader>,
    // Held for the daemon's lifetime: a second daemon on the same home fails
    // to take it.
    _lock: File,
}

impl Daemon {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn service(&self) -> &Arc<System> {
        &self.svc
    }

    /// Wait until the model calls that have ended are settled (the gateway
    /// commits settlements in batches, a few milliseconds after the call).
    pub async fn flush_settlements(&self) {
        let metering = self.metering.clone();
        let _ = tokio::task::spawn_blocking(move || metering.flush()).await;
    }

    /// The egress proxy's address (127.0.0.1, any port), which agents get
    /// in `HTTP(S)_PROXY`.
    pub fn egress_proxy_addr(&self) -> Option<SocketAddr> {
        self.egress.as_ref().map(EgressProxy::addr)
    }

    /// Whether agents run confined: `on`, `off` (`agents.sandbox = "off"`:
    /// unconfined) or `unavailable: CAUSE` (none can start).
    pub fn sandbox(&self) -> &str {
        &self.sandbox
    }

    /// Read `agency.toml` and `policy.toml` again and apply what applies
    /// live (SIGHUP to `agency serve`; `agency reload` comes through the
    /// REST API). Invalid files change nothing.
    pub async fn reload(&self) -> Result<crate::reload::ReloadView, DaemonError> {
        self.reloader.reload().await
    }

    /// Completes when the user asked the daemon to stop (`agency
    /// shutdown`, `POST /v1/shutdown`); the owner then calls [`stop`].
    ///
    /// [`stop`]: Daemon::stop
    pub async fn shutdown_requested(&self) {
        self.shutdown_requested.notified().await;
    }

    /// Stop accepting, finish in-flight requests, remove `daemon.json`.
    pub async fn stop(mut self) -> Result<(), DaemonError> {
        // Agents first: their processes are stopped while the server still
        // answers, so an agent saving its state can finish its call.
        if let Some(sup) = self.supervisor.take() {
            sup.shutdown().await;
        }
        // The calls of the agents just stopped, settled before their runs'
        // ends are exported.
        self.flush_settlements().await;
        // A stage in flight is handed out again at the next start.
        self.pipelines.stop();
        // After the agents, so their runs' ends are exported; a collector
        // that is down holds the stop 5 s at most.
        if let Some(t) = self.telemetry.take() {
            t.shutdown(Duration::from_secs(5)).await;
        }
        // The MCP servers of attached clients (agents' went with them).
        self.stdio.stop_all().await;
        if let Some(egress) = self.egress.take() {
            egress.stop().await;
        }
        let confiner = self.confiner.clone();
        let _ = tokio::task::spawn_blocking(move || confiner.shutdown()).await;
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(tx) = self.admin_shutdown.take() {
            let _ = tx.send(());
        }
        self.mcp_shutdown.cancel();
        self.mail.abort();
        if let Some(r) = self.relay.take() {
            r.abort();
        }
        if let Some(gc) = self.gc.take() {
            gc.abort();
        }
        self.problems.abort();
        if let Some(server) = self.server.take() {
            // In-flight requests get a grace period; long-lived SSE streams
            // would otherwise hold shutdown open.
            let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
        }
        if let Some(server) = self.admin_server.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
        }
        // And those of attached clients' calls that ended in the grace.
        self.flush_settlements().await;
        self.home.remove_daemon_info();
        Ok(())
    }
}

/// Run the daemon until `shutdown` completes or the user asks it to stop.
pub async fn serve(
    home: &Home,
    shutdown: impl Future<Output = ()>,
) -> Result<SocketAddr, DaemonError> {
    let daemon = Daemon::start(home).await?;
    let addr = daemon.addr();
    tokio::select! {
        () = shutdown => {}
        () = daemon.shutdown_requested() => {}
    }
    daemon.stop().await?;
    Ok(addr)
}

async fn not_found(req: axum::extract::Request) -> axum::response::Response {
    agency_http::error(
        StatusCode::NOT_FOUND,
        "not_found",
        &format!(
            "failed to find {} {}: no such route",
            req.method(),
            req.uri().path()
        ),
    )
}

/// Bind `daemon.sock` in the home, readable and writable by its owner only.
/// A file left there is a previous daemon's (this one holds the home's
/// lock), so it is replaced.
fn bind_admin_socket(home: &Home) -> Result<tokio::net::UnixListener, DaemonError> {
    use std::os::unix::fs::PermissionsExt;
    let path = home.admin_socket_path();
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(DaemonError::io("remove the stale socket", &path, e)),
    }
    let listener = tokio::net::UnixListener::bind(&path).map_err(|e| DaemonError::Listen {
        addr: path.display().to_string(),
        cause: e,
    })?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| DaemonError::io("restrict permissions of", &path, e))?;
    Ok(listener)
}

/// Deliver deferred mail when it falls due: sleep until the next due time,
/// woken early when a message is scheduled (it may be due sooner), and
/// deliver what fell due while the daemon was down as soon as it starts.
/// The hour-long cap only guards against the wall clock jumping.
async fn deliver_deferred_mail(svc: Arc<System>) {
    let mut events = svc.subscribe();
    loop {
        let s = svc.clone();
        let next = tokio::task::spawn_blocking(move || {
            s.deliver_due(s.now())?;
            Ok::<_, agency_service::ServiceError>((s.next_due()?, s.now()))
        })
        .await;
        let wait = match next {
            Ok(Ok((Some(due), now))) => {
                Duration::from_millis(u64::try_from(due.0 - now.0).unwrap_or(0))
            }
            _ => Duration::from_secs(3600),
        }
        .min(Duration::from_secs(3600));
        let sleep = tokio::time::sleep(wait);
        tokio::pin!(sleep);
        loop {
            tokio::select! {
                _ = &mut sleep => break,
                e = events.recv() => match e {
                    Ok(agency_service::Event::MailScheduled { .. })
                    | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => break,
                    Ok(_) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                },
            }
        }
    }
}
