//! Starting and stopping the daemon: the lock that makes it one per home,
//! the listener on 127.0.0.1, the routes (`/v1` REST, `/mcp`) behind their
//! guards, the address file for the CLI, and graceful shutdown.

use std::fs::File;
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agency_service::Service;
use axum::http::StatusCode;
use axum::middleware::from_fn_with_state;
use axum::serve::ListenerExt;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::activity::Activity;
use crate::claude::ClaudeCodeRuntime;
use crate::error::DaemonError;
use crate::home::{DaemonInfo, Home};
use crate::mcp_servers::McpServers;
use crate::repos::GitRepoCache;
use crate::runtime::{BuiltinRuntime, CommandRuntime, Runtime};
use crate::secrets::Secrets;
use crate::supervisor::{Supervisor, SupervisorSetup};
use crate::{http_auth, launch, rest};

pub(crate) struct AppState {
    pub svc: Arc<Service>,
    pub admin_hash: blake3::Hash,
    pub addr: SocketAddr,
    pub home: PathBuf,
    pub activity: Arc<Activity>,
    /// The extra MCP servers and the secrets read at start.
    pub servers: Arc<McpServers>,
}

/// A running daemon (in this process).
#[derive(Debug)]
pub struct Daemon {
    addr: SocketAddr,
    home: Home,
    svc: Arc<Service>,
    shutdown: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<std::io::Result<()>>>,
    mail: JoinHandle<()>,
    supervisor: Option<Supervisor>,
    // Cancelled at stop so open MCP event streams end and shutdown finishes.
    mcp_shutdown: agency_mcp::CancellationToken,
    // Held for the daemon's lifetime: a second daemon on the same home fails
    // to take it.
    _lock: File,
}

impl Daemon {
    /// Open the home's store and start serving on 127.0.0.1 (the port from
    /// the configuration; 0 picks one). The address goes to `daemon.json`.
    pub async fn start(home: &Home) -> Result<Daemon, DaemonError> {
        let cfg = home.config()?;
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
        let servers = Arc::new(McpServers::new(cfg.mcp_servers.clone(), secrets));
        let svc = Arc::new(home.open_service()?);
        {
            let svc = svc.clone();
            tokio::task::spawn_blocking(move || svc.bootstrap())
                .await
                .map_err(|e| DaemonError::Listen {
                    addr: "bootstrap".into(),
                    source: std::io::Error::other(e),
                })??;
        }
        let want = SocketAddr::from((Ipv4Addr::LOCALHOST, cfg.server.port));
        let listener =
            tokio::net::TcpListener::bind(want)
                .await
                .map_err(|e| DaemonError::Listen {
                    addr: want.to_string(),
                    source: e,
                })?;
        let addr = listener.local_addr().map_err(|e| DaemonError::Listen {
            addr: want.to_string(),
            source: e,
        })?;
        let activity = Arc::new(Activity::default());
        let state = Arc::new(AppState {
            activity: activity.clone(),
            svc: svc.clone(),
            admin_hash: blake3::hash(admin.as_bytes()),
            addr,
            home: home.dir().to_owned(),
            servers: servers.clone(),
        });
        let v1 = rest::routes()
            .layer(from_fn_with_state(state.clone(), http_auth::admin_only))
            .with_state(state.clone());
        let mcp_shutdown = agency_mcp::CancellationToken::new();
        let mcp = agency_mcp::router_with(
            svc.clone(),
            agency_mcp::RouterOptions {
                shutdown: mcp_shutdown.clone(),
                repos: Some(Arc::new(GitRepoCache::new(
                    home.dir().join("repos"),
                    cfg.repos.clone(),
                    &cfg.repos_cache,
                ))),
                ..Default::default()
            },
        )
        .merge(launch::routes().with_state(state.clone()))
        .layer(from_fn_with_state(state.clone(), http_auth::agent_only));
        // An unknown path is a 404 for everyone, not a token complaint from
        // whichever guard's router supplied the fallback.
        let app = v1
            .merge(mcp)
            .fallback(|req: axum::extract::Request| async move {
                http_auth::error(
                    StatusCode::NOT_FOUND,
                    "not_found",
                    &format!(
                        "failed to find {} {}: no such route",
                        req.method(),
                        req.uri().path()
                    ),
                )
            })
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
        // Agents recorded as live belonged to a previous daemon's processes.
        {
            let svc = svc.clone();
            let _ = tokio::task::spawn_blocking(move || {
                svc.agents_reap("reaped: the daemon restarted")
            })
            .await;
        }
        let agency_program = if cfg.agents.agency_program.is_empty() {
            std::env::current_exe()
                .map_err(|e| DaemonError::io("find the running executable", "agency", e))?
        } else {
            PathBuf::from(&cfg.agents.agency_program)
        };
        let runtime: Option<Arc<dyn Runtime>> = match cfg.agents.runtime.as_str() {
            "command" => Some(Arc::new(CommandRuntime {
                program: cfg.agents.command.program.clone(),
                args: cfg.agents.command.args.clone(),
            })),
            "builtin" => Some(Arc::new(BuiltinRuntime {
                program: agency_program.clone(),
                cfg: cfg.agents.builtin.clone(),
            })),
            "claude-code" => Some(Arc::new(ClaudeCodeRuntime {
                cfg: cfg.agents.claude_code.clone(),
            })),
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
                    log: cfg.log.clone(),
                },
            )
        });
        home.write_daemon_info(&DaemonInfo {
            addr,
            pid: std::process::id(),
        })?;
        let mail = tokio::spawn(deliver_deferred_mail(svc.clone()));
        tracing::info!(%addr, home = %home.dir().display(), "daemon listening");
        Ok(Daemon {
            mcp_shutdown,
            addr,
            home: home.clone(),
            svc,
            shutdown: Some(tx),
            server: Some(server),
            mail,
            supervisor,
            _lock: lock,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn service(&self) -> &Arc<Service> {
        &self.svc
    }

    /// Stop accepting, finish in-flight requests, remove `daemon.json`.
    pub async fn stop(mut self) -> Result<(), DaemonError> {
        // Agents first: their processes are stopped while the server still
        // answers, so an agent saving its state can finish its call.
        if let Some(sup) = self.supervisor.take() {
            sup.shutdown().await;
        }
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.mcp_shutdown.cancel();
        self.mail.abort();
        if let Some(server) = self.server.take() {
            // In-flight requests get a grace period; long-lived SSE streams
            // would otherwise hold shutdown open.
            let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
        }
        self.home.remove_daemon_info();
        Ok(())
    }
}

/// Run the daemon until `shutdown` completes.
pub async fn serve(
    home: &Home,
    shutdown: impl Future<Output = ()>,
) -> Result<SocketAddr, DaemonError> {
    let daemon = Daemon::start(home).await?;
    let addr = daemon.addr();
    shutdown.await;
    daemon.stop().await?;
    Ok(addr)
}

/// Deliver deferred mail when it falls due: sleep until the next due time,
/// woken early when a message is scheduled (it may be due sooner), and
/// deliver what fell due while the daemon was down as soon as it starts.
/// The hour-long cap only guards against the wall clock jumping.
async fn deliver_deferred_mail(svc: Arc<Service>) {
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
