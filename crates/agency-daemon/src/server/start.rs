//! `Daemon::start`: the order of start-up, one named step each. Each step
//! builds one part from the configuration and the parts before it; none
//! decides a policy (that is the service's, the sandbox's, the parts').

use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agency_config::Config;
use agency_config::home::{DaemonInfo, Home};
use agency_config::mcp_servers::McpServers;
use agency_config::secrets::Secrets;
use agency_config::upstreams::{ModelRoutes, Models};
use agency_egress::{EgressKeys, EgressProxy};
use agency_http::{Activity, AdminHash, AgentGuard, ListenerPort};
use agency_repos::{GitRepoCache, UploadPacks};
use agency_service::System;
use agency_supervisor::LiveRuns;
use agency_supervisor::claude::ClaudeCodeRuntime;
use agency_supervisor::confine::Confiner;
use agency_supervisor::runtime::{BuiltinRuntime, CommandRuntime, Runtime};
use agency_supervisor::warm::WarmRegistry;
use agency_supervisor::{LeaseSettings, Supervisor, SupervisorSetup};
use agency_tools::{LaunchNonces, StdioServers, Tools};
use axum::Router;
use axum::middleware::from_fn_with_state;
use axum::serve::ListenerExt;
use tokio::sync::{Notify, oneshot};

use super::{AppState, Daemon, bind_admin_socket, deliver_deferred_mail, not_found};
use crate::error::DaemonError;
use crate::reload::{self, Reloader};
use crate::rest;

impl Daemon {
    /// Open the home's store and start serving on 127.0.0.1 (the port from
    /// the configuration; 0 picks one). The address goes to `daemon.json`.
    pub async fn start(home: &Home) -> Result<Daemon, DaemonError> {
        let cfg = home.config()?;
        for notice in &cfg.notices {
            tracing::warn!("{notice}");
        }
        let lock = lock_home(home)?;
        let lease = lease_settings(home, &cfg)?;
        // Checked before anything starts: a bad OTEL_* variable stops the start.
        let telemetry = cfg
            .telemetry
            .resolve(|k| std::env::var(k).ok())
            .map_err(|e| invalid(home, e))?;
        let secrets = read_secrets(home, &cfg).await?;
        let models =
            reload::build_models(&cfg, &secrets).map_err(|e| invalid(home, e.to_string()))?;
        let svc = open_system(home, &cfg, &secrets, &models, lease.is_some()).await?;
        let listener = bind_agents_listener(home, &cfg).await?;
        let addr = listener.local_addr().map_err(|cause| DaemonError::Listen {
            addr: format!("127.0.0.1:{}", cfg.server.port),
            cause,
        })?;
        let program = agency_program(&cfg)?;
        let confiner = start_sandbox(home, &cfg, &program, addr).await?;
        let parts = Parts::build(home, &cfg, &svc, secrets, models, confiner, addr).await?;
        let shutdown_requested = Arc::new(Notify::new());
        let spec = lease.as_ref().map(|l| l.spec.clone());
        let (app, v1) = mount_routes(home, &cfg, &svc, &parts, addr, &shutdown_requested, spec)?;
        let (server, shutdown) = serve_agents(listener, app);
        let (admin_server, admin_shutdown) = serve_admin(bind_admin_socket(home)?, v1);
        reap_left_over(&svc, &cfg, lease.as_ref()).await;
        let relay = lease
            .as_ref()
            .map(|l| relay_events(svc.clone(), l.heartbeat, &cfg));
        let runner_lease = lease.clone();
        let supervisor = start_supervisor(home, &cfg, &svc, &parts, addr, program, lease);
        if let Some(sup) = &supervisor {
            parts.reloader.set_supervisor(sup.reconfigure());
        }
        home.write_daemon_info(&DaemonInfo {
            addr,
            pid: std::process::id(),
        })?;
        let mail = tokio::spawn(deliver_deferred_mail(svc.clone()));
        tracing::info!(%addr, home = %home.dir().display(), "daemon listening");
        let gc = crate::retention::spawn(svc.clone(), cfg.retention.gc_interval_hours);
        let problems = crate::problems::spawn(svc.clone(), cfg.watch.tick_seconds);
        let telemetry = start_telemetry(home, telemetry, &svc)?;
        // With no supervisor (no agent runtime) the runner renews the
        // leases of the runs it drives.
        let runner_lease = runner_lease.map(|l| agency_pipeline::runner::RunnerLease {
            spec: l.spec,
            sweep: l.heartbeat,
            renew: supervisor.is_none(),
        });
        let pipelines = start_pipelines(home, &svc, &parts, addr, runner_lease);
        Ok(Daemon {
            pipelines,
            gc,
            problems,
            telemetry,
            mcp_shutdown: parts.mcp_shutdown,
            metering: parts.metering.clone(),
            addr,
            home: home.clone(),
            svc,
            shutdown: Some(shutdown),
            server: Some(server),
            admin_shutdown: Some(admin_shutdown),
            admin_server: Some(admin_server),
            shutdown_requested,
            mail,
            supervisor,
            egress: Some(parts.egress),
            sandbox: parts.confiner.status(),
            confiner: parts.confiner,
            stdio: parts.stdio,
            reloader: parts.reloader,
            relay,
            _lock: lock,
        })
    }
}

fn invalid(home: &Home, message: String) -> DaemonError {
    DaemonError::Config {
        path: home.config_path(),
        message,
    }
}

/// One daemon per home: the lock is held for the daemon's lifetime.
fn lock_home(home: &Home) -> Result<File, DaemonError> {
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
    Ok(lock)
}

/// Secrets are read once, now: a password manager's CLI is not run at
/// every spawn, and a missing secret stops the start, clearly.
async fn read_secrets(home: &Home, cfg: &Config) -> Result<Secrets, DaemonError> {
    let sources = cfg.secrets.clone();
    let dir = home.dir().to_owned();
    Ok(
        tokio::task::spawn_blocking(move || Secrets::load(&sources, &dir))
            .await
            .map_err(|e| {
                DaemonError::io(
                    "read the secrets of",
                    home.config_path(),
                    std::io::Error::other(e),
                )
            })??,
    )
}

/// The OpenTelemetry exporter, when `[telemetry]` enabled it (resolved
/// with the standard `OTEL_*` variables, which win over the file).
fn start_telemetry(
    home: &Home,
    resolved: Option<agency_config::telemetry::TelemetryConfig>,
    svc: &Arc<System>,
) -> Result<Option<agency_telemetry::Exporter>, DaemonError> {
    let Some(t) = resolved else {
        return Ok(None);
    };
    tracing::info!(traces = %t.traces_url, metrics = %t.metrics_url, "exporting telemetry over OTLP/HTTP");
    agency_telemetry::Exporter::start(
        svc.service().clone(),
        t,
        home.dir().join("telemetry.cursor"),
    )
    .map(Some)
    .map_err(|e| invalid(home, e.to_string()))
}

/// The service with its configuration (a bad `policy.toml` stops the
/// start here, naming file:line), bootstrapped.
async fn open_system(
    home: &Home,
    cfg: &Config,
    secrets: &Secrets,
    models: &Models,
    shared: bool,
) -> Result<Arc<System>, DaemonError> {
    // The embeddings endpoint of semantic memory search, if configured
    // (its key filled in from the secrets, like a model's).
    let embedder = match &cfg.memory.embeddings {
        Some(e) => Some(
            crate::memory_embed::HttpEmbedder::new(e, secrets)
                .map_err(|e| invalid(home, e.to_string()))?,
        ),
        None => None,
    };
    let policy = agency_tools::tool_check::load_policy(
        home.dir(),
        &agency_tools::tool_check::policy_tool_names(cfg),
    )?;
    let mut builder = home
        .service_builder()?
        .policy(policy)
        .memory(cfg.memory.service_config())
        .declared(reload::declared(cfg, models));
    if let Some(e) = embedder {
        builder = builder.embedder(Arc::new(e));
    }
    let svc = Arc::new(builder.build());
    let s = svc.clone();
    // No model call of this daemon is in flight before it listens: a
    // budget reservation left by a daemon that died mid-call is released.
    // A shared store holds other daemons' calls in flight: there, the
    // reservations of the agents reaped or taken over are released with
    // them (`agents_reap_owned`, the lease takeover).
    tokio::task::spawn_blocking(move || {
        s.bootstrap()?;
        if shared {
            return Ok(0);
        }
        s.budget_clear_reservations()
    })
    .await
    .map_err(|e| DaemonError::Listen {
        addr: "bootstrap".into(),
        cause: std::io::Error::other(e),
    })??;
    Ok(svc)
}

/// The agents' listener on 127.0.0.1 (`[server] port`; 0 picks one).
async fn bind_agents_listener(
    home: &Home,
    cfg: &Config,
) -> Result<tokio::net::TcpListener, DaemonError> {
    let want = SocketAddr::from((Ipv4Addr::LOCALHOST, cfg.server.port));
    tokio::net::TcpListener::bind(want)
        .await
        .map_err(|e| match e.kind() {
            // A pinned port (`agency init` pins one) that something else
            // took: say which setting holds it and the ways out.
            std::io::ErrorKind::AddrInUse if cfg.server.port != 0 => DaemonError::PortTaken {
                port: cfg.server.port,
                config: home.config_path(),
                cause: e,
            },
            _ => DaemonError::Listen {
                addr: want.to_string(),
                cause: e,
            },
        })
}

/// The `agency` binary agents' launchers and the sandbox run.
fn agency_program(cfg: &Config) -> Result<PathBuf, DaemonError> {
    if cfg.agents.agency_program.is_empty() {
        std::env::current_exe()
            .map_err(|e| DaemonError::io("find the running executable", "agency", e))
    } else {
        Ok(PathBuf::from(&cfg.agents.agency_program))
    }
}

/// Probe the sandbox and open the cgroups (which kills what a crashed
/// daemon left in them), and say how agents will run.
async fn start_sandbox(
    home: &Home,
    cfg: &Config,
    program: &std::path::Path,
    addr: SocketAddr,
) -> Result<Arc<Confiner>, DaemonError> {
    let confiner = {
        let (cfg, dir, program) = (cfg.clone(), home.dir().to_owned(), program.to_owned());
        tokio::task::spawn_blocking(move || Confiner::start(&cfg, &dir, program, addr.port()))
            .await
            .map_err(|e| {
                DaemonError::io("open the cgroups of", home.dir(), std::io::Error::other(e))
            })?
            .map_err(|refused| invalid(home, refused.to_string()))?
    };
    let limits = confiner.limits();
    match confiner.status().as_str() {
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
    Ok(Arc::new(confiner))
}

/// The parts the routes and the supervisor share.
struct Parts {
    confiner: Arc<Confiner>,
    activity: Arc<Activity>,
    nonces: Arc<LaunchNonces>,
    keys: Arc<EgressKeys>,
    servers: Arc<McpServers>,
    /// Organisation tools' headers and environment reference secrets too.
    tool_secrets: Arc<Secrets>,
    egress: EgressProxy,
    stdio: Arc<StdioServers>,
    tools: Arc<Tools>,
    reloader: Arc<Reloader>,
    warm: Arc<WarmRegistry>,
    /// The runs live now, which the supervisor adds and `/v1` follows.
    live: Arc<LiveRuns>,
    upload_packs: Arc<UploadPacks>,
    /// Cancelled at stop so open MCP event streams end.
    mcp_shutdown: agency_mcp::CancellationToken,
    /// The gateway's metering queue, flushed at stop after the agents.
    metering: Arc<agency_gateway::Metering>,
}

impl Parts {
    async fn build(
        home: &Home,
        cfg: &Config,
        svc: &Arc<System>,
        secrets: Secrets,
        models: Models,
        confiner: Arc<Confiner>,
        addr: SocketAddr,
    ) -> Result<Parts, DaemonError> {
        let tool_secrets = Arc::new(secrets.clone());
        let servers = Arc::new(McpServers::new(cfg.mcp_servers.clone(), secrets.clone()));
        let activity = Arc::new(Activity::default());
        let nonces = Arc::new(LaunchNonces::default());
        let keys = Arc::new(EgressKeys::default());
        let egress =
            EgressProxy::start(svc.clone(), activity.clone(), keys.clone(), servers.clone())
                .await?;
        let reloader = Arc::new(Reloader::new(
            home,
            cfg.clone(),
            svc.clone(),
            secrets,
            models,
            confiner.clone(),
            servers.clone(),
        ));
        let stdio = Arc::new(StdioServers::new(
            confiner.clone(),
            agency_tools::org_tools::run_root(home.dir()),
            Some(egress.addr()),
            keys.clone(),
            servers.clone(),
        ));
        let tools = Arc::new(Tools {
            svc: svc.clone(),
            addr,
            nonces: nonces.clone(),
            servers: servers.clone(),
            guard: Default::default(),
            proxy_client: Tools::proxy_client()?,
            stdio: stdio.clone(),
        });
        Ok(Parts {
            confiner,
            activity,
            nonces,
            keys,
            servers,
            tool_secrets,
            egress,
            stdio,
            tools,
            reloader,
            warm: Arc::default(),
            live: LiveRuns::new(),
            upload_packs: Arc::default(),
            mcp_shutdown: agency_mcp::CancellationToken::new(),
            metering: agency_gateway::Metering::start(svc.clone()),
        })
    }
}

/// The pipeline runner: carries on the runs a stop interrupted and each
/// new one. Its llm stages call the gateway on `addr` like agents, with
/// the upstreams as they are now (`agency reload` reaches runs started
/// after a restart). ToolRunner's live commands run confined like agents'
/// processes, in each run's workspace under `<home>/pipelines/`.
fn start_pipelines(
    home: &Home,
    svc: &Arc<System>,
    parts: &Parts,
    addr: SocketAddr,
    lease: Option<agency_pipeline::runner::RunnerLease>,
) -> agency_pipeline::runner::RunnerHandle {
    use agency_config::models::Api;
    use agency_pipeline::{Upstream, WireApi};
    let models = parts.reloader.models.load();
    let upstreams: std::collections::BTreeMap<String, Upstream> = models
        .usable()
        .filter_map(|name| {
            let u = models.get(name)?;
            let api = match u.api {
                Api::Anthropic => WireApi::Anthropic,
                Api::OpenAi => WireApi::OpenAi,
            };
            Some((
                name.to_owned(),
                Upstream {
                    api,
                    // The gateway sends the upstream's own model when it
                    // names one; otherwise this is what the provider sees.
                    model: u.model.clone().unwrap_or_else(|| "default".to_owned()),
                    // A constrained request an upstream refuses as malformed
                    // is asked again without the constraint (the ladder).
                    constrained: true,
                },
            ))
        })
        .collect();
    let default_upstream = models
        .allowed_for(None)
        .map(str::to_owned)
        .or_else(|| upstreams.keys().next().cloned())
        .unwrap_or_default();
    agency_pipeline::runner::spawn(
        svc.clone(),
        agency_pipeline::runner::RunnerConfig {
            base_url: format!("http://{addr}"),
            default_upstream,
            upstreams,
            timeout: Duration::from_secs(300),
            backoff: agency_pipeline::Backoff::default(),
            live_tools: Some(agency_pipeline::tool_runner::LiveTools {
                confiner: parts.confiner.clone(),
                root: agency_pipeline::tool_runner::root_of(home.dir()),
                timeout: agency_pipeline::tool_runner::DEFAULT_TIMEOUT,
            }),
            lease,
        },
    )
}

/// The agents' application (MCP, the tools' routes, the model gateway,
/// messages to agencies, each behind its guard, all behind the loopback
/// guard) and the user's `/v1` (behind the admin token).
fn mount_routes(
    home: &Home,
    cfg: &Config,
    svc: &Arc<System>,
    parts: &Parts,
    addr: SocketAddr,
    shutdown_requested: &Arc<Notify>,
    lease: Option<agency_service::LeaseSpec>,
) -> Result<(Router, Router), DaemonError> {
    let state = Arc::new(AppState {
        lease,
        runtime: cfg.agents.runtime.clone(),
        sandbox: parts.confiner.status(),
        limits: parts.confiner.limits(),
        agency_rate: crate::rate_limit::KeyRateLimiter::new(
            cfg.agency_api.messages_per_minute,
            cfg.agency_api.burst,
        ),
        shutdown_requested: shutdown_requested.clone(),
        svc: svc.clone(),
        admin_hash: blake3::hash(home.admin_token()?.as_bytes()),
        addr,
        home: home.dir().to_owned(),
        keep_warm: parts.reloader.keep_warm.clone(),
        reloader: parts.reloader.clone(),
        confiner: parts.confiner.clone(),
        live: parts.live.clone(),
        metering: parts.metering.clone(),
    });
    // The dashboard: its pages on this TCP listener (its own session
    // guard), its login URLs minted on `/v1`.
    let dashboard = agency_dashboard::Dashboard::new(svc.clone(), addr.port());
    // Still behind the admin token: the socket's mode and the home's are
    // the first wall, the token the second.
    let v1 = rest::routes(cfg.limits.max_file_bytes, &parts.tools)
        .merge(agency_dashboard::login_routes(dashboard.clone()))
        .layer(from_fn_with_state(
            AdminHash(state.admin_hash),
            agency_http::admin_only,
        ))
        .with_state(state.clone())
        // Messages to agencies have their own guard: the admin token or an
        // agency key (`rest/agency.rs`).
        .merge(rest::agency::routes(state.clone(), true))
        .fallback(not_found)
        .layer(crate::logging::http_trace_layer());
    let agent_guard = AgentGuard {
        svc: svc.clone(),
        activity: parts.activity.clone(),
    };
    let mut repo_cache = GitRepoCache::new(
        home.dir().join("repos"),
        cfg.repos.clone(),
        &cfg.repos_cache,
    );
    repo_cache.upload_packs = parts.upload_packs.clone();
    repo_cache.clear_staging();
    // MCP acts for agents only: it gets the caller-checked service, never
    // the system handle.
    let mcp = agency_mcp::router_with(
        svc.service().clone(),
        agency_mcp::RouterOptions {
            shutdown: parts.mcp_shutdown.clone(),
            repos: Some(Arc::new(repo_cache)),
            org_tools: Some(Arc::new(agency_tools::org_tools::OrgToolRunner {
                svc: svc.clone(),
                confiner: parts.confiner.clone(),
                keys: parts.keys.clone(),
                egress_proxy: parts.egress.addr(),
                run_root: agency_tools::org_tools::run_root(home.dir()),
                secrets: parts.tool_secrets.clone(),
            })),
            warm: Some(parts.warm.clone()),
            ..Default::default()
        },
    )
    .merge(agency_tools::agent_routes(parts.tools.clone()))
    .layer(from_fn_with_state(
        agent_guard.clone(),
        agency_http::agent_only,
    ))
    // The model gateway has its own token guard (it also reads
    // `x-api-key`, as Anthropic clients send their key there).
    .merge(agency_gateway::routes(
        Arc::new(agency_gateway::Gateway {
            svc: svc.clone(),
            models: parts.reloader.models.clone(),
            bodies: Arc::default(),
            client: parts.tools.proxy_client.clone(),
            metering: parts.metering.clone(),
        }),
        agent_guard,
    ))
    // The one part of `/v1` on TCP: messages to agencies, for holders of
    // an agency key (never the admin token; `rest/agency.rs`).
    .merge(rest::agency::routes(state, false))
    .merge(agency_dashboard::routes(dashboard));
    // An unknown path is a 404 for everyone, not a token complaint from
    // whichever guard's router supplied the fallback. The rest of `/v1` is
    // not on TCP at all: a 404 here too.
    let app = mcp
        .fallback(not_found)
        .layer(from_fn_with_state(
            ListenerPort(addr.port()),
            agency_http::loopback_only,
        ))
        // Outermost: every request gets its span, refused ones too.
        .layer(crate::logging::http_trace_layer());
    Ok((app, v1))
}

type Served = (
    tokio::task::JoinHandle<std::io::Result<()>>,
    oneshot::Sender<()>,
);

/// Serve the agents' application until the sender is used or dropped.
fn serve_agents(listener: tokio::net::TcpListener, app: Router) -> Served {
    // Without TCP_NODELAY every two-event SSE reply waits ~40 ms for Nagle
    // and delayed ACK (measured; see DESIGN.md §4).
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
    (server, tx)
}

/// Serve `/v1` on the home's Unix socket until the sender is used.
fn serve_admin(listener: tokio::net::UnixListener, v1: Router) -> Served {
    let (tx, rx) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        axum::serve(listener, v1)
            .with_graceful_shutdown(async {
                let _ = rx.await;
            })
            .await
    });
    (server, tx)
}

/// Agents recorded as live belonged to a previous daemon's processes:
/// whatever of them still runs (the daemon was killed) is stopped, then
/// they are ended in the store. On a shared store only this home's
/// previous daemon's (and those no daemon leases): the others run theirs.
async fn reap_left_over(svc: &Arc<System>, cfg: &Config, lease: Option<&LeaseSettings>) {
    let svc = svc.clone();
    let grace = Duration::from_millis(cfg.agents.kill_grace_ms);
    let owner = lease.map(|l| l.spec.owner.clone());
    let _ = tokio::task::spawn_blocking(move || {
        let reason = "reaped: the daemon restarted";
        let Some(owner) = owner else {
            agency_supervisor::process::reap_left_over(&svc, grace);
            return svc.agents_reap(reason).map(drop);
        };
        let ours: std::collections::HashSet<_> = svc
            .agents_owned_live(&owner)?
            .into_iter()
            .map(|a| a.id)
            .collect();
        agency_supervisor::process::reap_left_over_of(&svc, Some(&ours), grace);
        svc.agents_reap_owned(&owner, reason).map(drop)
    })
    .await;
}

/// On a shared store, what other daemons did reaches this daemon's
/// scheduler, mail waits and event streams through the log, read from
/// where it stood at start whenever the database notifies a commit of new
/// events (`LISTEN`), and every `every` in case a notification was missed
/// (the listener reconnecting).
fn relay_events(svc: Arc<System>, every: Duration, cfg: &Config) -> tokio::task::JoinHandle<()> {
    const PAGE: usize = 1000;
    let mut heard = match cfg.store.location() {
        Ok(agency_config::store::StoreLocation::Postgres(url)) => {
            match agency_postgres::EventNotifications::listen(&url) {
                Ok(n) => Some(n),
                Err(e) => {
                    tracing::warn!(error = %e, "failed to listen for other daemons' events; reading them every heartbeat instead");
                    None
                }
            }
        }
        _ => None,
    };
    tokio::spawn(async move {
        let s = svc.clone();
        let mut cursor = match tokio::task::spawn_blocking(move || s.event_log_end()).await {
            Ok(Ok(end)) => end,
            _ => 0,
        };
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            match heard.as_mut() {
                Some(n) => {
                    tokio::select! {
                        _ = tick.tick() => {}
                        got = n.next() => if got.is_none() { heard = None },
                    }
                }
                None => {
                    tick.tick().await;
                }
            }
            loop {
                let s = svc.clone();
                let from = cursor;
                match tokio::task::spawn_blocking(move || s.relay_logged_events(from, PAGE)).await {
                    Ok(Ok(next)) if next > from => cursor = next,
                    Ok(Ok(_)) => break,
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "failed to read other daemons' events");
                        break;
                    }
                    Err(_) => break,
                }
            }
        }
    })
}

/// With a PostgreSQL store, several daemons may share it: this one runs
/// agents under leases. Its identity is its home's (host and directory),
/// the same at every start: a restarted daemon takes its own leases back
/// at once (the home's lock proves the previous one gone), while another
/// home's daemon waits for them to expire.
fn lease_settings(home: &Home, cfg: &Config) -> Result<Option<LeaseSettings>, DaemonError> {
    let location = cfg.store.location().map_err(|e| invalid(home, e))?;
    if location == agency_config::store::StoreLocation::Sqlite {
        return Ok(None);
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned());
    let dir = home
        .dir()
        .canonicalize()
        .unwrap_or_else(|_| home.dir().to_owned());
    Ok(Some(LeaseSettings {
        spec: agency_service::LeaseSpec {
            owner: format!("{host}:{}", dir.display()),
            ttl_ms: i64::try_from(cfg.store.lease_ms).unwrap_or(i64::MAX),
        },
        heartbeat: Duration::from_millis(cfg.store.heartbeat_ms),
    }))
}

/// The configured runtime (`none`: no agent runs). Every runtime reaches
/// its model only through the gateway: each agent's upstream is its
/// handler's (`agency model set`) or the runtime's `upstream`.
fn runtime(cfg: &Config, program: &std::path::Path) -> Option<Arc<dyn Runtime>> {
    let routes = |default: &str, only| ModelRoutes::new(&cfg.models, default, only);
    let a = &cfg.agents;
    match a.runtime.as_str() {
        "command" => Some(Arc::new(CommandRuntime {
            program: a.command.program.clone(),
            args: a.command.args.clone(),
            routes: routes(&a.command.upstream, None),
        })),
        "builtin" => Some(Arc::new(BuiltinRuntime {
            program: program.to_owned(),
            cfg: a.builtin.clone(),
            routes: routes(&a.builtin.upstream, None),
        })),
        "claude-code" => Some(Arc::new(ClaudeCodeRuntime::new(
            a.claude_code.clone(),
            routes(
                &a.claude_code.upstream,
                Some(agency_config::models::Api::Anthropic),
            ),
        ))),
        _ => None,
    }
}

/// The scheduler and supervisor of agents, unless no runtime runs them.
fn start_supervisor(
    home: &Home,
    cfg: &Config,
    svc: &Arc<System>,
    parts: &Parts,
    addr: SocketAddr,
    program: PathBuf,
    lease: Option<LeaseSettings>,
) -> Option<Supervisor> {
    let runtime = runtime(cfg, &program)?;
    Some(Supervisor::start(
        svc.clone(),
        runtime,
        parts.activity.clone(),
        SupervisorSetup {
            cfg: cfg.agents.clone(),
            runs: home.dir().join("run"),
            mcp_url: format!("http://{addr}/mcp"),
            servers: parts.servers.clone(),
            launcher: program,
            hooks: Arc::new(crate::hooks::AgentParts {
                nonces: parts.nonces.clone(),
                keys: parts.keys.clone(),
                stdio: parts.stdio.clone(),
            }),
            log: cfg.log.clone(),
            egress_proxy: parts.egress.addr(),
            confiner: parts.confiner.clone(),
            upload_packs: parts.upload_packs.clone(),
            extra_connect_ports: vec![parts.egress.addr().port()],
            warm: parts.warm.clone(),
            live: parts.live.clone(),
            lease,
        },
    ))
}
