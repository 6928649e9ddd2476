//! `agency demo --pipeline`: seed 001's AgencyCore, offline. A fresh home,
//! the real daemon, and the scripted model server answering AgencyCore's
//! eight llm stages (`demo_pipeline_script.json`); the three code stages
//! (Retriever, SafetyGuard, ToolRunner in mock mode) are the daemon's own.
//! The run is started through the REST API like `agency pipeline run`,
//! followed until it ends, and each stage's status and the Gatekeeper's
//! scorecard are printed.

use std::time::{Duration, Instant};

use agency_api::{FileText, PipelineRunView};
use agency_config::Home;
use agency_core::status::PipelineRunStatus;
use agency_daemon::Daemon;
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use super::demo::rest;

const SCRIPT: &str = include_str!("../demo_pipeline_script.json");
const REQUEST: &str = "Add a /health endpoint to our web API";

pub(super) async fn run(home: &Home) -> Result<()> {
    let script =
        agency_testkit::Script::from_json(SCRIPT).context("failed to load the demo script")?;
    let model = agency_testkit::ModelServer::start(script)
        .await
        .context("failed to start the model server")?;
    // No agent runtime is needed: only the model upstream the stages use.
    let cfg = format!(
        "[models.default]\napi = \"anthropic\"\nbase_url = {:?}\nmodel = \"scripted\"\ndefault_price = {{ input = 0.0, output = 0.0 }}\n",
        model.base_url()
    );
    std::fs::write(home.config_path(), cfg).context("failed to write the demo configuration")?;
    eprintln!(
        "Agency demo (pipeline): home {} (inspect it later with `agency --home {} pipeline runs`)",
        home.dir().display(),
        home.dir().display()
    );
    eprintln!("model server (scripted) at {}", model.base_url());
    let daemon = Daemon::start(home).await?;
    let pipeline = agency_org::pipeline::agencycore()
        .map_err(|e| anyhow::anyhow!("failed to compile the built-in AgencyCore: {e}"))?;
    println!("agency pipeline run agencycore {REQUEST:?}");
    let body = json!({ "model": pipeline, "input": REQUEST, "level": 0 });
    let started: PipelineRunView = rest(home, "pipeline run", move |c| {
        c.post(c.url(&["pipelines", "runs"]), &body)
    })
    .await?;
    let id = started.run.id.to_string();
    let deadline = Instant::now() + Duration::from_secs(120);
    let done = loop {
        let id = id.clone();
        let v: PipelineRunView = rest(home, "pipeline run", move |c| {
            c.get(c.url(&["pipelines", "runs", &id]))
        })
        .await?;
        if v.run.status != PipelineRunStatus::Running || Instant::now() > deadline {
            break v;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    println!("\nrun {} ({}):", done.run.id, done.run.status.as_str());
    for s in &done.stages_detail {
        println!(
            "  {:>2}. {:<15} {:<5} {:<17} calls {}",
            s.idx + 1,
            s.name,
            s.kind,
            s.status.as_str(),
            s.attempts
        );
        if let Some(e) = &s.error {
            println!("      {e}");
        }
    }
    let gatekeeper = done
        .stages_detail
        .iter()
        .find(|s| s.name == "Gatekeeper")
        .and_then(|s| s.artifact);
    if let Some(file) = gatekeeper {
        let f = file.to_string();
        let text: FileText = rest(home, "KB file", move |c| c.get(c.url(&["kb", &f]))).await?;
        let v: Value = serde_json::from_str(&text.text).unwrap_or(Value::Null);
        println!("\nGatekeeper scorecard (kb://{file}):");
        if let Some(card) = v.get("scorecard").and_then(Value::as_object) {
            for (k, s) in card {
                println!("  {k:<13} {s}/5");
            }
        }
        println!("  {:<13} {}/25", "total", v["totalScore"]);
        println!("  decision      {}", v["decision"]);
    }
    daemon.stop().await?;
    if done.run.status != PipelineRunStatus::Done {
        bail!(
            "failed to finish the AgencyCore run: it is {} at stage {}",
            done.run.status.as_str(),
            done.run.stage + 1
        );
    }
    Ok(())
}
