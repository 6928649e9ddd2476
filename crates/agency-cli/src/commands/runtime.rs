//! `agency agent` (one built-in agent run, started by the daemon) and
//! `agency model-server` (the scripted LLM server for offline runs).

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use tokio::signal::unix::{SignalKind, signal};

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")
}

/// Resolves on the first SIGINT or SIGTERM.
async fn stop_signal() {
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        // Without handlers, run until the work ends by itself.
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
}

pub fn agent(config: &Path) -> Result<ExitCode> {
    // The agent's warnings (an MCP server that failed to start, …) go to
    // stderr, which the daemon keeps with the run (`agency logs RUN`).
    let filter = std::env::var("RUST_LOG")
        .ok()
        .and_then(|v| tracing_subscriber::EnvFilter::builder().parse(v).ok())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .try_init();
    let cfg = agency_agent::load_config(config)?;
    let summary = runtime()?.block_on(agency_agent::run_with(&cfg, None, stop_signal()))?;
    eprintln!(
        "agent ended: {} ({} turns, {} tool calls, {} input / {} output tokens)",
        serde_json::to_value(&summary.ended)
            .map(|v| v.to_string())
            .unwrap_or_default(),
        summary.turns,
        summary.tool_calls,
        summary.input_tokens,
        summary.output_tokens
    );
    Ok(ExitCode::from(
        u8::try_from(summary.exit_code()).unwrap_or(1),
    ))
}

/// The script format, from the one place it is written: the testkit
/// crate's documentation (its "Script format" section).
const TESTKIT_DOCS: &str = include_str!("../../../agency-testkit/src/lib.rs");

pub fn script_format() -> String {
    let doc: Vec<&str> = TESTKIT_DOCS
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .map(|l| l.strip_prefix(' ').unwrap_or(l))
        .collect();
    let start = doc.iter().position(|l| *l == "# Script format");
    let end = doc.iter().position(|l| *l == "# Streaming shapes");
    match (start, end) {
        (Some(s), Some(e)) if s < e => {
            doc[s..e]
                .iter()
                .filter(|l| !l.starts_with("```"))
                .map(|l| format!("{l}\n"))
                .collect::<String>()
                .trim_end()
                .to_owned()
                + "\n"
        }
        _ => "See the agency-testkit crate documentation.\n".to_owned(),
    }
}

pub fn model_server(a: &crate::cli::ModelServerArgs) -> Result<ExitCode> {
    if a.help_format {
        super::emit(&script_format())?;
        return Ok(ExitCode::SUCCESS);
    }
    let (Some(script), port) = (&a.script, a.port) else {
        anyhow::bail!("failed to start the model server: give --script FILE");
    };
    let script = agency_testkit::Script::load(script)?;
    runtime()?.block_on(async {
        let server = agency_testkit::ModelServer::start_on(script, port)
            .await
            .context("failed to start the model server")?;
        println!("{}", server.base_url());
        eprintln!("model server listening on {}", server.base_url());
        stop_signal().await;
        server.shutdown().await;
        anyhow::Ok(())
    })?;
    Ok(ExitCode::SUCCESS)
}
