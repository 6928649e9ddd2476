//! `init`, `serve`, `status`, `shutdown` and `reload`: the home and its
//! daemon. `init` and `serve` work on the home directly; the others ask
//! the daemon.

use std::process::ExitCode;
use std::time::Duration;

use agency_config::InitReport;
use agency_daemon::Daemon;
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use tokio::signal::unix::{SignalKind, signal};

use super::{Ctx, emit, emit_json};
use crate::client::{ClientError, decode};
use crate::output::{self, StatusView};

pub fn init(ctx: &Ctx, a: &crate::cli::InitArgs) -> Result<ExitCode> {
    let report = if ctx.home.exists() {
        if let Some(url) = &a.model_server {
            bail!(
                "failed to configure the scripted model server {url} in {}: the home already exists and its agency.toml is left as it is; change [agents] runtime, [agents.builtin] upstream and model and add [models.local] there by hand (README, \"Offline quickstart\"), or name a new home with --home DIR",
                ctx.home.dir().display()
            );
        }
        existing(ctx)?
    } else {
        let url = a
            .model_server
            .as_deref()
            .map(super::quickstart::check_url)
            .transpose()?;
        let report = ctx.home.init()?;
        // A port pinned now is the one every restart listens on: agents'
        // and outside callers' address does not move (0 would).
        ctx.home.pin_free_port()?;
        if let Some(url) = url {
            super::quickstart::configure(&ctx.home, &url)?;
        }
        root_budget(ctx, a, &report)?;
        report
    };
    if ctx.json {
        emit_json(&report)?;
    } else if report.created {
        emit(&format!(
            "Initialized Agency home at {}\nroot handler  {}\n",
            report.home.display(),
            report.root_handler
        ))?;
        if let Some(url) = &a.model_server {
            emit(&format!(
                "agents: the built-in runtime, its model the scripted model server at {url}\n(agency.toml: [agents.builtin] upstream = \"local\", [models.local]); next: `agency serve &`\n"
            ))?;
        }
    } else {
        emit(&format!(
            "Agency home at {} already exists; nothing changed\nroot handler  {}\n",
            report.home.display(),
            report.root_handler
        ))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The budget a new root handler gets from `agency init` when no limit is
/// given (docs/budgets-and-approvals.md): generous for real work, a stop for runaways.
pub const DEFAULT_ROOT_BUDGET: agency_core::usage::BudgetLimits =
    agency_core::usage::BudgetLimits {
        tokens: None,
        micro_usd: Some(25_000_000),
        calls: None,
        tool_calls: None,
        spawns: Some(1000),
        live_agents: None,
        handlers: Some(200),
        depth: None,
        wall_clock_ms: None,
    };

/// Set the new root handler's budget (no daemon serves the new home yet,
/// so the store is opened here).
fn root_budget(ctx: &Ctx, a: &crate::cli::InitArgs, report: &InitReport) -> Result<()> {
    if a.no_budget {
        return Ok(());
    }
    let root = report.root_handler.to_string();
    let given = super::budget::limits_of(&root, &a.budget)?;
    let limits = if given.is_empty() {
        DEFAULT_ROOT_BUDGET
    } else {
        given
    };
    let svc = ctx.home.open_service()?;
    svc.budget_set(agency_core::Principal::User, report.root_handler, limits)?;
    Ok(())
}

/// An existing home is left alone. Its root handler comes from the daemon
/// when one runs (the CLI never opens a store a daemon is serving); else
/// `Home::init`, which keeps every existing file, reads it.
fn existing(ctx: &Ctx) -> Result<InitReport> {
    let status = ctx.client().and_then(|c| c.get(c.url(&["status"])));
    match status {
        Ok(v) => {
            let s: StatusView = decode(v, "status")?;
            let root_handler = s
                .root_handler
                .context("failed to find the root handler: the running daemon reports none")?;
            Ok(InitReport {
                home: ctx.home.dir().to_owned(),
                created: false,
                root_handler,
            })
        }
        Err(e)
            if matches!(
                e.downcast_ref::<ClientError>(),
                Some(ClientError::NoDaemon { .. })
            ) =>
        {
            Ok(ctx.home.init()?)
        }
        Err(e) => Err(e),
    }
}

/// Run the daemon until SIGINT or SIGTERM, then shut down cleanly (which
/// removes `daemon.json`). The only command that needs an async runtime.
pub fn serve(ctx: &Ctx) -> Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")?;
    let result = rt.block_on(async {
        // Install the handlers before announcing the address, so a signal
        // sent as soon as `daemon.json` appears is not lost.
        let mut int =
            signal(SignalKind::interrupt()).context("failed to install the SIGINT handler")?;
        let mut term =
            signal(SignalKind::terminate()).context("failed to install the SIGTERM handler")?;
        // The daemon's log file (logs/daemon.log), before anything can
        // go wrong worth logging.
        agency_daemon::logging::init(&ctx.home)?;
        let daemon = Daemon::start(&ctx.home).await?;
        eprintln!(
            "Agency daemon listening on http://{} (home {})",
            daemon.addr(),
            ctx.home.dir().display()
        );
        let config = ctx.home.config_path();
        match daemon.sandbox() {
            "on" => {}
            "off" => eprintln!(
                "warning: agents run UNCONFINED (agents.sandbox = \"off\" in {}): they can read this whole home, admin.token and agency.db included",
                config.display()
            ),
            why => eprintln!(
                "warning: no agent can start: the agent sandbox is {why}; fix the cause, or set agents.sandbox = \"off\" in {} to run agents unconfined",
                config.display()
            ),
        }
        let mut hup =
            signal(SignalKind::hangup()).context("failed to install the SIGHUP handler")?;
        let got = loop {
            tokio::select! {
                _ = int.recv() => break "SIGINT",
                _ = term.recv() => break "SIGTERM",
                () = daemon.shutdown_requested() => break "agency shutdown",
                // SIGHUP: `agency reload`, for whoever runs the daemon
                // under a service manager (`systemctl reload`).
                _ = hup.recv() => match daemon.reload().await {
                    Ok(view) => eprint!("{}", reload_report(&view, "SIGHUP")),
                    Err(e) => eprintln!(
                        "failed to reload on SIGHUP: {e}; nothing was changed"
                    ),
                },
            }
        };
        eprintln!("Agency daemon shutting down ({got})");
        tracing::info!(signal = got, "shutting down");
        daemon.stop().await?;
        anyhow::Ok(())
    });
    // Blocking store calls still running get a moment to finish; the
    // store's transactions are durable either way.
    rt.shutdown_timeout(Duration::from_secs(5));
    result?;
    eprintln!("Agency daemon stopped");
    Ok(ExitCode::SUCCESS)
}

/// Exit 0 with the daemon's facts, or print "not running" and exit 1.
pub fn status(ctx: &Ctx) -> Result<ExitCode> {
    let answer = ctx.client().and_then(|c| c.get(c.url(&["status"])));
    let mut v = match answer {
        Ok(v) => v,
        Err(e)
            if matches!(
                e.downcast_ref::<ClientError>(),
                Some(ClientError::NoDaemon { .. })
            ) =>
        {
            let home = ctx.home.dir().display().to_string();
            if ctx.json {
                emit_json(&json!({ "running": false, "home": home }))?;
            } else {
                emit(&output::not_running(&home))?;
            }
            return Ok(ExitCode::FAILURE);
        }
        Err(e) => return Err(e),
    };
    if ctx.json {
        if let Value::Object(m) = &mut v {
            m.insert("running".to_owned(), Value::Bool(true));
        }
        emit_json(&v)?;
    } else {
        let s: StatusView = decode(v, "status")?;
        emit(&output::status(&s))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `agency reload`: the daemon re-reads its files; each changed setting
/// is printed with "applied" or "needs a restart".
pub fn reload(ctx: &Ctx) -> Result<ExitCode> {
    let c = ctx.client()?;
    let answer = c.post(c.url(&["reload"]), &json!({}))?;
    if ctx.json {
        emit_json(&answer)?;
    } else {
        let view: agency_api::ReloadView = decode(answer, "reload")?;
        emit(&reload_report(&view, "agency reload"))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// One line per changed setting: its name, what became of it, and from
/// when it holds or why it waits.
fn reload_report(view: &agency_api::ReloadView, how: &str) -> String {
    if view.changes.is_empty() {
        return format!("{how}: nothing changed in agency.toml or policy.toml\n");
    }
    let width = view
        .changes
        .iter()
        .map(|c| c.setting.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for c in &view.changes {
        out.push_str(&format!(
            "{:width$}  {} ({})\n",
            c.setting, c.status, c.note
        ));
    }
    out
}

/// Ask the daemon to stop and wait until it has (its lock on the home is
/// released). Exit 0 when it stopped; 1 when none was running.
pub fn shutdown(ctx: &Ctx) -> Result<ExitCode> {
    let c = ctx.client()?;
    let answer = c.post(c.url(&["shutdown"]), &json!({}))?;
    let pid = answer.get("pid").and_then(Value::as_u64).unwrap_or(0);
    eprintln!(
        "stopping the Agency daemon (pid {pid}): its agents get their grace period to save state"
    );
    // Agents' grace (kill_grace_ms) plus the server's own 5 s, with room.
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while ctx.home.daemon_holds_lock() {
        if std::time::Instant::now() > deadline {
            anyhow::bail!(
                "failed to see the daemon (pid {pid}) stop within 120 s; it may still be stopping its agents: check with `agency status`, or send it SIGKILL"
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    if ctx.json {
        emit_json(&json!({ "stopped": true, "pid": pid }))?;
    } else {
        emit(&format!("Agency daemon stopped (pid {pid})\n"))?;
    }
    Ok(ExitCode::SUCCESS)
}
