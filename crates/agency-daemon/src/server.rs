//! Starting and stopping the daemon: the lock that makes it one per home,
//! the listeners (`/mcp` and the MCP launcher on 127.0.0.1 for agents; the
//! admin REST API `/v1` on the home's Unix socket `daemon.sock` only, but
//! for messages to agencies, also on 127.0.0.1 for agency keys; the
//! egress proxy on 127.0.0.1),
//! their guards, the address file, and graceful shutdown (on a signal or
//! `POST /v1/shutdown`).

use std::fs::File;
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agency_service::System;
use axum::http::StatusCode;
use axum::middleware::from_fn_with_state;
use axum::serve::ListenerExt;
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;

use crate::activity::Activity;
use crate::claude::ClaudeCodeRuntime;
use crate::confine::Confiner;
use crate::egress::EgressProxy;
use crate::error::DaemonError;
use crate::runtime::{BuiltinRuntime, CommandRuntime, Runtime};
use crate::supervisor::{Supervisor, SupervisorSetup};
use crate::{http_auth, launch, rest};
use agency_config::home::{DaemonInfo, Home};
use agency_config::mcp_servers::McpServers;
use agency_config::secrets::Secrets;
use agency_repos::GitRepoCache;

pub(crate) struct AppState {
    pub svc: Arc<System>,
    pub admin_hash: blake3::Hash,
    pub addr: SocketAddr,
    pub home: PathBuf,
    pub activity: Arc<Activity>,
    /// The extra MCP servers and the secrets read at start.
    pub servers: Arc<McpServers>,
    /// Single-use launch nonces of live agents' launchers.
    pub nonces: Arc<launch::LaunchNonces>,
    /// Forwards `/mcp-proxy` requests to HTTP MCP servers.
    pub proxy_client: reqwest::Client,
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
    /// The model gateway's upstreams (keys filled in) and price table,
    /// replaced by `agency reload`.
    pub models: Arc<agency_config::live::Live<crate::models::Models>>,
    /// The request bytes each agent has in flight through the gateway.
    pub gateway_bodies: Arc<crate::gateway::body::InFlight>,
    /// The extra MCP servers' guard: rate-limit windows (`mcp_guard.rs`).
    pub guard: Arc<crate::mcp_guard::Guard>,
    /// The stdio MCP servers the daemon runs for agents (`mcp_stdio.rs`).
    pub stdio: Arc<crate::mcp_stdio::StdioServers>,
    /// `[agents]` keep-warm defaults, for `agency keep-warm`'s answers.
    pub keep_warm: Arc<agency_config::live::Live<agency_service::KeepWarmDefaults>>,
    /// Applies `agency reload` (`reload.rs`).
    pub reloader: Arc<crate::reload::Reloader>,
    /// The sandbox's grants, for `agency up`'s report of a tool program
    /// whose toolchain it does not grant.
    pub confiner: Arc<Confiner>,
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
    supervisor: Option<Supervisor>,
    /// The forward proxy agents reach the network through (`egress.rs`).
    egress: Option<EgressProxy>,
    /// `on`, `off` or `unavailable: CAUSE` (see [`Daemon::sandbox`]).
    sandbox: String,
    /// Removes the daemon's cgroups at stop.
    confiner: Arc<Confiner>,
    /// Stopped at stop, before the cgroups are removed.
    stdio: Arc<crate::mcp_stdio::StdioServers>,
    // Cancelled at stop so open MCP event streams end and shutdown finishes.
    mcp_shutdown: agency_mcp::CancellationToken,
    /// Re-reads agency.toml and policy.toml (`agency reload`, SIGHUP).
    reloader: Arc<crate::reload::Reloader>,
    // Held for the daemon's lifetime: a second daemon on the same home fails
    // to take it.
    _lock: File,
}

impl Daemon {
    /// Open the home's store and start serving on 127.0.0.1 (the port from
    /// the configuration; 0 picks one). The address goes to `daemon.json`.
    pub async fn start(home: &Home) -> Result<Daemon, DaemonError> {
        let cfg = home.config()?;
        for notice in &cfg.notices {
            tracing::warn!("{notice}");
        }
        let admin = home.admin_token()?;
        let lock_path = home.lock_path();
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| DaemonError::io("open", &lock_path, e))?;
        if lock.try_lock().is_err() {
            let info = home.daemon_info().ok().flatten();
            return Err(DaemonError::AlreadyRunning {
                home: home.dir().to_owned(),
                addr: info
                    .as_ref()
                    .map_or("an unknown address".to_owned(), |i| i.addr.to_string()),
                pid: info.map_or(0, |i| i.pid),
            });
        }
        // Secrets are read once, now: a password manager's CLI is not run
        // at every spawn, and a missing secret stops the start, clearly.
        let secrets = {
            let sources = cfg.secrets.clone();
            let dir = home.dir().to_owned();
            tokio::task::spawn_blocking(move || Secrets::load(&sources, &dir))
                .await
                .map_err(|e| {
                    DaemonError::io(
                        "read the secrets of",
                        home.config_path(),
                        std::io::Error::other(e),
                    )
                })??
        };
        let models =
            crate::reload::build_models(&cfg, &secrets).map_err(|message| DaemonError::Config {
                path: home.config_path(),
                message,
            })?;
        // Issue 13: the embeddings endpoint of semantic memory search, if
        // configured (its key filled in from the secrets, like a model's).
        let embedder = match &cfg.memory.embeddings {
            Some(e) => Some(crate::memory_embed::HttpEmbedder::new(e, &secrets).map_err(
                |message| DaemonError::Config {
                    path: home.config_path(),
                    message,
                },
            )?),
            None => None,
        };
        let reload_secrets = secrets.clone();
        // Organisation tools' headers and environment reference them too.
        let tool_secrets = Arc::new(secrets.clone());
        let servers = Arc::new(McpServers::new(cfg.mcp_servers.clone(), secrets));
        // A bad policy.toml stops the start here, naming file:line.
        let policy = crate::tool_check::load_policy(
            home.dir(),
            &crate::tool_check::policy_tool_names(&cfg),
        )?;
        let mut builder = home
            .service_builder()?
            .policy(policy)
            .memory(cfg.memory.service_config())
            .declared(crate::reload::declared(&cfg, &models));
        if let Some(e) = embedder {
            builder = builder.embedder(Arc::new(e));
        }
        let svc = Arc::new(builder.build());
        {
            let svc = svc.clone();
            // No model call is in flight before the daemon listens: a budget
            // reservation left by a daemon that died mid-call is released.
            tokio::task::spawn_blocking(move || {
                svc.bootstrap()?;
                svc.budget_clear_reservations()
            })
            .await
            .map_err(|e| DaemonError::Listen {
                addr: "bootstrap".into(),
                cause: std::io::Error::other(e),
            })??;
        }
        let want = SocketAddr::from((Ipv4Addr::LOCALHOST, cfg.server.port));
        let listener = tokio::net::TcpListener::bind(want)
            .await
            .map_err(|e| match e.kind() {
                // A pinned port (`agency init` pins one) that something
                // else took: say which setting holds it and the ways out.
                std::io::ErrorKind::AddrInUse if cfg.server.port != 0 => DaemonError::PortTaken {
                    port: cfg.server.port,
                    config: home.config_path(),
                    cause: e,
                },
                _ => DaemonError::Listen {
                    addr: want.to_string(),
                    cause: e,
                },
            })?;
        let addr = listener.local_addr().map_err(|e| DaemonError::Listen {
            addr: want.to_string(),
            cause: e,
        })?;
        let agency_program = if cfg.agents.agency_program.is_empty() {
            std::env::current_exe()
                .map_err(|e| DaemonError::io("find the running executable", "agency", e))?
        } else {
            PathBuf::from(&cfg.agents.agency_program)
        };
        // Probing the sandbox and opening the cgroups (which kills what a
        // crashed daemon left in them) is blocking work.
        let confiner = {
            let (cfg, dir, program) = (cfg.clone(), home.dir().to_owned(), agency_program.clone());
            let port = addr.port();
            tokio::task::spawn_blocking(move || Confiner::start(&cfg, &dir, program, port))
                .await
                .map_err(|e| {
                    DaemonError::io("open the cgroups of", home.dir(), std::io::Error::other(e))
                })?
                .map_err(|message| DaemonError::Config {
                    path: home.config_path(),
                    message,
                })?
        };
        let sandbox = confiner.status();
        let limits = confiner.limits();
        match sandbox.as_str() {
            "on" => tracing::info!(
                "agents run confined; limits: {}",
                limits
                    .iter()
                    .map(agency_api::LimitView::describe)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "off" => tracing::warn!(
                "agents run UNCONFINED (agents.sandbox = \"off\" in {}): they can read this whole home, admin.token and agency.db included, and reach any address",
                home.config_path().display()
            ),
            why => tracing::error!(
                "no agent can start: the sandbox is {why}; fix the cause, or set agents.sandbox = \"off\" in {} to run agents unconfined",
                home.config_path().display()
            ),
        }
        let confiner = Arc::new(confiner);
        let activity = Arc::new(Activity::default());
        let nonces = Arc::new(launch::LaunchNonces::default());
        let egress = EgressProxy::start(
            svc.clone(),
            activity.clone(),
            nonces.clone(),
            servers.clone(),
        )
        .await?;
        let shutdown_requested = Arc::new(Notify::new());
        let reloader = Arc::new(crate::reload::Reloader::new(
            home,
            cfg.clone(),
            svc.clone(),
            reload_secrets,
            models,
            confiner.clone(),
            servers.clone(),
        ));
        let stdio = Arc::new(crate::mcp_stdio::StdioServers::new(
            confiner.clone(),
            crate::org_tools::command::run_root(home.dir()),
            Some(egress.addr()),
            nonces.clone(),
            servers.secret_values().map(str::to_owned).collect(),
        ));
        let state = Arc::new(AppState {
            stdio: stdio.clone(),
            nonces: nonces.clone(),
            proxy_client: crate::mcp_proxy::client()?,
            runtime: cfg.agents.runtime.clone(),
            sandbox: sandbox.clone(),
            limits,
            agency_rate: crate::rate_limit::KeyRateLimiter::new(
                cfg.agency_api.messages_per_minute,
                cfg.agency_api.burst,
            ),
            shutdown_requested: shutdown_requested.clone(),
            activity: activity.clone(),
            svc: svc.clone(),
            admin_hash: blake3::hash(admin.as_bytes()),
            addr,
            home: home.dir().to_owned(),
            servers: servers.clone(),
            models: reloader.models.clone(),
            gateway_bodies: Arc::default(),
            guard: Arc::default(),
            keep_warm: reloader.keep_warm.clone(),
            reloader: reloader.clone(),
            confiner: confiner.clone(),
        });
        let admin_listener = bind_admin_socket(home)?;
        // Still behind the admin token: the socket's mode and the home's
        // are the first wall, the token the second.
        let v1 = rest::routes(cfg.limits.max_file_bytes)
            .layer(from_fn_with_state(state.clone(), http_auth::admin_only))
            .with_state(state.clone())
            // Messages to agencies have their own guard: the admin token or
            // an agency key (`rest/agency.rs`).
            .merge(rest::agency::routes(state.clone(), true))
            .fallback(not_found)
            .layer(crate::logging::http_trace_layer());
        let mcp_shutdown = agency_mcp::CancellationToken::new();
        let upload_packs = Arc::new(agency_repos::UploadPacks::default());
        let mut repo_cache = GitRepoCache::new(
            home.dir().join("repos"),
            cfg.repos.clone(),
            &cfg.repos_cache,
        );
        repo_cache.upload_packs = upload_packs.clone();
        repo_cache.clear_staging();
        let warm = Arc::new(crate::warm::WarmRegistry::default());
        // MCP acts for agents only: it gets the caller-checked service, never
        // the system handle.
        let mcp = agency_mcp::router_with(
            svc.service().clone(),
            agency_mcp::RouterOptions {
                shutdown: mcp_shutdown.clone(),
                repos: Some(Arc::new(repo_cache)),
                org_tools: Some(Arc::new(crate::org_tools::OrgToolRunner {
                    svc: svc.clone(),
                    confiner: confiner.clone(),
                    nonces: nonces.clone(),
                    egress_proxy: egress.addr(),
                    run_root: crate::org_tools::command::run_root(home.dir()),
                    secrets: tool_secrets.clone(),
                })),
                warm: Some(warm.clone()),
                ..Default::default()
            },
        )
        .merge(launch::routes().with_state(state.clone()))
        .merge(crate::tool_check::agent_routes().with_state(state.clone()))
        .layer(from_fn_with_state(state.clone(), http_auth::agent_only))
        // The model gateway has its own token guard (it also reads
        // `x-api-key`, as Anthropic clients send their key there).
        .merge(crate::gateway::routes(state.clone()))
        // The one part of `/v1` on TCP: messages to agencies, for holders
        // of an agency key (never the admin token; `rest/agency.rs`).
        .merge(rest::agency::routes(state.clone(), false));
        // An unknown path is a 404 for everyone, not a token complaint from
        // whichever guard's router supplied the fallback. The rest of `/v1`
        // is not on TCP at all: a 404 here too.
        let app = mcp
            .fallback(not_found)
            .layer(from_fn_with_state(state.clone(), http_auth::loopback_only))
            // Outermost: every request gets its span, refused ones too.
            .layer(crate::logging::http_trace_layer());
        // Without TCP_NODELAY every two-event SSE reply waits ~40 ms for
        // Nagle and delayed ACK (measured; see DESIGN.md §4).
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let (tx, rx) = oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = rx.await;
                })
                .await
        });
        let (admin_tx, admin_rx) = oneshot::channel::<()>();
        let admin_server = tokio::spawn(async move {
            axum::serve(admin_listener, v1)
                .with_graceful_shutdown(async {
                    let _ = admin_rx.await;
                })
                .await
        });
        // Agents recorded as live belonged to a previous daemon's processes:
        // whatever of them still runs (the daemon was killed) is stopped,
        // then they are ended in the store.
        {
            let svc = svc.clone();
            let grace = Duration::from_millis(cfg.agents.kill_grace_ms);
            let _ = tokio::task::spawn_blocking(move || {
                crate::process::reap_left_over(&svc, grace);
                svc.agents_reap("reaped: the daemon restarted")
            })
            .await;
        }
        // Every runtime reaches its model only through the gateway: each
        // agent's upstream is its handler's (`agency model set`) or the
        // runtime's `upstream`.
        let routes =
            |default: &str, only| crate::models::ModelRoutes::new(&cfg.models, default, only);
        let runtime: Option<Arc<dyn Runtime>> = match cfg.agents.runtime.as_str() {
            "command" => Some(Arc::new(CommandRuntime {
                program: cfg.agents.command.program.clone(),
                args: cfg.agents.command.args.clone(),
                routes: routes(&cfg.agents.command.upstream, None),
            })),
            "builtin" => Some(Arc::new(BuiltinRuntime {
                program: agency_program.clone(),
                cfg: cfg.agents.builtin.clone(),
                routes: routes(&cfg.agents.builtin.upstream, None),
            })),
            "claude-code" => Some(Arc::new(ClaudeCodeRuntime::new(
                cfg.agents.claude_code.clone(),
                routes(
                    &cfg.agents.claude_code.upstream,
                    Some(agency_config::models::Api::Anthropic),
                ),
            ))),
            _ => None,
        };
        let supervisor = runtime.map(|runtime| {
            Supervisor::start(
                svc.clone(),
                runtime,
                activity.clone(),
                SupervisorSetup {
                    cfg: cfg.agents.clone(),
                    runs: home.dir().join("run"),
                    mcp_url: format!("http://{addr}/mcp"),
                    servers: servers.clone(),
                    launcher: agency_program.clone(),
                    nonces: nonces.clone(),
                    log: cfg.log.clone(),
                    egress_proxy: egress.addr(),
                    confiner: confiner.clone(),
                    upload_packs,
                    extra_connect_ports: vec![egress.addr().port()],
                    warm,
                    stdio: stdio.clone(),
                },
            )
        });
        if let Some(sup) = &supervisor {
            reloader.set_supervisor(sup.reconfigure());
        }
        home.write_daemon_info(&DaemonInfo {
            addr,
            pid: std::process::id(),
        })?;
        let mail = tokio::spawn(deliver_deferred_mail(svc.clone()));
        tracing::info!(%addr, home = %home.dir().display(), "daemon listening");
        let gc = crate::retention::spawn(svc.clone(), cfg.retention.gc_interval_hours);
        Ok(Daemon {
            gc,
            mcp_shutdown,
            addr,
            home: home.clone(),
            svc,
            shutdown: Some(tx),
            server: Some(server),
            admin_shutdown: Some(admin_tx),
            admin_server: Some(admin_server),
            shutdown_requested,
            mail,
            supervisor,
            egress: Some(egress),
            sandbox,
            confiner,
            stdio,
            reloader,
            _lock: lock,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn service(&self) -> &Arc<System> {
        &self.svc
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
        if let Some(gc) = self.gc.take() {
            gc.abort();
        }
        if let Some(server) = self.server.take() {
            // In-flight requests get a grace period; long-lived SSE streams
            // would otherwise hold shutdown open.
            let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
        }
        if let Some(server) = self.admin_server.take() {
            let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
        }
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
    http_auth::error(
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
