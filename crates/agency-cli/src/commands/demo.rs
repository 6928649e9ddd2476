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

use agency_api::MailBody;
use agency_config::Home;
use agency_core::{MailTarget, Principal};
use agency_daemon::Daemon;
use anyhow::{Context, Result, bail};

use crate::output;

const SCRIPT: &str = include_str!("../demo_script.json");
const REQUEST: &str =
    "Plan a community garden\n\nFour raised beds in the sunny corner; we have about 300 EUR.";
const ANSWER_SUBJECT: &str = "Your garden plan is ready";

pub fn demo(home: Option<PathBuf>, org: bool) -> Result<ExitCode> {
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
    if org {
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
    let svc = daemon.service().clone();
    let root = svc
        .root_handler()?
        .context("failed to find the root handler")?;
    eprintln!(
        "you -> root handler: {}",
        REQUEST.lines().next().unwrap_or("")
    );
    let body = MailBody::Text {
        subject: None,
        text: REQUEST.to_owned(),
    };
    svc.mail_send(Principal::User, MailTarget::Handler(root), &body)?;

    let deadline = Instant::now() + Duration::from_secs(120);
    let answered = loop {
        let s = svc.clone();
        let inbox =
            tokio::task::spawn_blocking(move || s.mail_inbox(Principal::User, None)).await??;
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
    while !svc.agents_live(Principal::User)?.is_empty() && Instant::now() < settle {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let handlers = svc.handlers(Principal::User, None, None)?;
    let tree = svc.outcome_subtree(Principal::User, root.root(), Some(10_000))?;
    let inbox = svc.mail_inbox(Principal::User, None)?;
    let agents = svc.agents_recent(Principal::User, Some(100))?;
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
