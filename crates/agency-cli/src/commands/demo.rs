//! `agency demo`: Agency's main job, offline. A fresh home, the real daemon
//! with the built-in runtime, and the scripted model server playing the
//! LLM: the user asks for a community garden plan; the root handler writes
//! a brief and delegates two outcomes with read-only access to it; one
//! underling delegates further and blocks while it waits; each boss
//! verifies and completes; the answer reaches the user's inbox. Then the
//! handler tree, the outcome DAG and the user's inbox are printed.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use agency_api::{AgentsView, HandlerView, MessageView, StatusView, Subtree};
use agency_config::Home;
use agency_daemon::Daemon;
use anyhow::{Context, Result, bail};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::client::{Client, decode};
use crate::output;

const SCRIPT: &str = include_str!("../demo_script.json");
const REQUEST: &str =
    "Plan a community garden\n\nFour raised beds in the sunny corner; we have about 300 EUR.";
const ANSWER_SUBJECT: &str = "Your garden plan is ready";

pub fn demo(home: Option<PathBuf>, org: bool, pipeline: bool) -> Result<ExitCode> {
    let dir = match home {
        Some(d) => d,
        None => std::env::temp_dir().join(format!("agency-demo-{}", uuid::Uuid::new_v4().simple())),
    };
    let home = Home::new(&dir);
    if home.exists() {
        bail!(
            "failed to run the demo in {}: it is already an Agency home; give a new directory",
            dir.display()
        );
    }
    home.init()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("failed to start the async runtime")?;
    if pipeline {
        rt.block_on(super::demo_pipeline::run(&home))?;
    } else if org {
        rt.block_on(super::demo_org::run(&home))?;
    } else {
        rt.block_on(run(&home))?;
    }
    Ok(ExitCode::SUCCESS)
}

async fn run(home: &Home) -> Result<()> {
    let script =
        agency_testkit::Script::from_json(SCRIPT).context("failed to load the demo script")?;
    let model = agency_testkit::ModelServer::start(script)
        .await
        .context("failed to start the model server")?;
    let exe = std::env::current_exe().context("failed to find the agency executable")?;
    // One agent at a time keeps the story's order fixed.
    let cfg = format!(
        "[agents]\nruntime = \"builtin\"\nmax_concurrent = 1\nagency_program = {:?}\n[agents.builtin]\napi = \"anthropic\"\nbase_url = {:?}\nmodel = \"scripted\"\nmax_turns = 30\n",
        exe.display().to_string(),
        model.base_url()
    );
    std::fs::write(home.config_path(), cfg).context("failed to write the demo configuration")?;
    eprintln!(
        "Agency demo: home {} (inspect it later with `agency --home {} …`)",
        home.dir().display(),
        home.dir().display()
    );
    eprintln!("model server (scripted) at {}", model.base_url());
    let daemon = Daemon::start(home).await?;
    // The demo is a client like the CLI's other commands: it talks to the
    // daemon through its REST API only.
    let status: StatusView = rest(home, "status", |c| c.get(c.url(&["status"]))).await?;
    let root = status
        .root_handler
        .context("failed to find the root handler")?;
    eprintln!(
        "you -> root handler: {}",
        REQUEST.lines().next().unwrap_or("")
    );
    let _: Value = rest(home, "sent message", move |c| {
        c.post(
            c.url(&["mail"]),
            &json!({ "to": root.to_string(), "text": REQUEST }),
        )
    })
    .await?;

    let deadline = Instant::now() + Duration::from_secs(120);
    let answered = loop {
        let inbox: Vec<MessageView> = rest(home, "inbox", |c| c.get(c.url(&["inbox"]))).await?;
        if inbox.iter().any(|m| m.subject == ANSWER_SUBJECT) {
            break true;
        }
        if Instant::now() > deadline {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Let the last agent finish and record its run.
    let settle = Instant::now() + Duration::from_secs(10);
    while !agents(home).await?.live.is_empty() && Instant::now() < settle {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let handlers: Vec<HandlerView> =
        rest(home, "handler list", |c| c.get(c.url(&["handlers"]))).await?;
    let tree: Subtree = rest(home, "outcome tree", move |c| {
        let mut url = c.url(&["outcomes"]);
        url.query_pairs_mut()
            .append_pair("root", &root.root().to_string())
            .append_pair("limit", "10000");
        c.get(url)
    })
    .await?;
    let inbox: Vec<MessageView> = rest(home, "inbox", |c| c.get(c.url(&["inbox"]))).await?;
    let agents = agents(home).await?.recent;
    daemon.stop().await?;
    let calls = model.requests().len();
    model.shutdown().await;

    println!("Handlers:\n{}", output::handlers(&handlers));
    println!("Outcomes:\n{}", output::outcomes(&tree));
    println!("Your inbox:\n{}", output::inbox(&inbox));
    println!("{} agent runs, {calls} model calls.", agents.len());
    if !answered {
        bail!(
            "failed to finish the demo: no answer reached the user's inbox within 120 s; see the audit logs in {}",
            home.dir().display()
        );
    }
    Ok(())
}

/// One call of the daemon's REST API, off the async runtime (the CLI's
/// client blocks), decoded as a `what`.
pub(super) async fn rest<T, F>(home: &Home, what: &'static str, f: F) -> Result<T>
where
    T: DeserializeOwned + Send + 'static,
    F: FnOnce(&Client) -> Result<Value> + Send + 'static,
{
    let home = home.clone();
    tokio::task::spawn_blocking(move || {
        let c = Client::new(&home)?;
        decode(f(&c)?, what)
    })
    .await
    .context("failed to call the daemon: the worker stopped")?
}

/// The live agents and the recent runs (the last hundred).
pub(super) async fn agents(home: &Home) -> Result<AgentsView> {
    rest(home, "agent list", |c| {
        let mut url = c.url(&["agents"]);
        url.query_pairs_mut().append_pair("limit", "100");
        c.get(url)
    })
    .await
}
