//! `agency demo --org`: a declarative organisation, offline. Seed 002's
//! WeatherAgency (its four source files, embedded) is compiled and stood
//! up in a fresh home; the real daemon runs built-in agents against the
//! scripted model server, and WeatherTool calls a local stand-in of the
//! weather API. An outside party asks "What is the weather in New York?"
//! the way `POST /v1/agency/messages` does; the answer comes back through
//! FrontDeskAgent → WeatherAgent → WeatherTool, and the organisation, the
//! conversation and the agent runs are printed.

use std::path::Path;
use std::time::{Duration, Instant};

use agency_api::{HandlerView, OrgMessageView, OrgPlan};
use agency_config::Home;
use agency_core::status::OrgMessageStatus;
use agency_daemon::Daemon;
use serde_json::json;

use super::demo::{agents, rest};
use anyhow::{Context, Result, bail};

const SCRIPT: &str = include_str!("../demo_org_script.json");
const QUESTION: &str = "What is the weather in New York?";

/// Seed 002 §6.1's files, as written there.
const SOURCES: &[(&str, &str)] = &[
    (
        "WeatherAgency.agency",
        include_str!("../../../../examples/weather-agency/WeatherAgency.agency"),
    ),
    (
        "FrontDeskAgent.agent",
        include_str!("../../../../examples/weather-agency/FrontDeskAgent.agent"),
    ),
    (
        "WeatherAgent.agent",
        include_str!("../../../../examples/weather-agency/WeatherAgent.agent"),
    ),
    (
        "WeatherTool.tool",
        include_str!("../../../../examples/weather-agency/WeatherTool.tool"),
    ),
];
const SEED_BASE_URL: &str = "https://api.example-weather.com";

pub(super) async fn run(home: &Home) -> Result<()> {
    let script =
        agency_testkit::Script::from_json(SCRIPT).context("failed to load the demo script")?;
    let model = agency_testkit::ModelServer::start(script)
        .await
        .context("failed to start the model server")?;
    let weather = agency_testkit::WeatherServer::start()
        .await
        .context("failed to start the stand-in weather API")?;
    let exe = std::env::current_exe().context("failed to find the agency executable")?;
    let cfg = format!(
        "[agents]\nruntime = \"builtin\"\nmax_concurrent = 1\nagency_program = {:?}\n[agents.builtin]\napi = \"anthropic\"\nbase_url = {:?}\nmodel = \"scripted\"\nmax_turns = 30\n",
        exe.display().to_string(),
        model.base_url()
    );
    std::fs::write(home.config_path(), cfg).context("failed to write the demo configuration")?;
    let src = home.dir().join("weather-agency");
    write_sources(&src, &weather.base_url())?;
    eprintln!(
        "Agency demo (organisation): home {}; sources in {}",
        home.dir().display(),
        src.display()
    );
    eprintln!(
        "model server (scripted) at {}; weather API stand-in at {}",
        model.base_url(),
        weather.base_url()
    );
    let compiled = match agency_org::compile(&src) {
        Ok(c) => c,
        Err(e) => bail!(
            "failed to compile the demo's sources in {}: {}",
            src.display(),
            e.diagnostics
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n")
        ),
    };
    let daemon = Daemon::start(home).await?;
    // Through the REST API only, as `agency up` and an outside party would.
    let model_json = compiled.model.clone();
    let plan: OrgPlan = rest(home, "organisation plan", move |c| {
        c.post(c.url(&["orgs"]), &model_json)
    })
    .await?;
    println!("agency up {}:", src.display());
    for a in &plan.agents {
        println!(
            "  {:<15} {} ({}) as handler {}",
            a.agent,
            serde_json::to_value(a.action)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            a.agency,
            a.handler.map(|h| h.to_string()).unwrap_or_default()
        );
    }
    println!("\noutside party -> WeatherAgency: {QUESTION}");
    let posted: OrgMessageView = rest(home, "message to an agency", |c| {
        c.post(
            c.url(&["agency", "messages"]),
            &json!({ "agency": "WeatherAgency", "message": QUESTION }),
        )
    })
    .await?;
    let deadline = Instant::now() + Duration::from_secs(120);
    let answer = loop {
        let id = posted.id.to_string();
        let v: OrgMessageView = rest(home, "message to an agency", move |c| {
            c.get(c.url(&["agency", "messages", &id]))
        })
        .await?;
        if v.status == OrgMessageStatus::Answered {
            break v.reply;
        }
        if Instant::now() > deadline {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Let the agents finish what they are doing. An agent without work is
    // done: the front desk, an executive, stays warm waiting for mail (for
    // `keep_warm_executive_ms`), and stopping the daemon ends it.
    let settle = Instant::now() + Duration::from_secs(10);
    loop {
        let live = agents(home).await?.live;
        let handlers: Vec<HandlerView> =
            rest(home, "handler list", |c| c.get(c.url(&["handlers"]))).await?;
        let busy = live
            .iter()
            .any(|a| handlers.iter().any(|h| h.id == a.handler && h.has_work));
        if !busy || Instant::now() >= settle {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let agents = agents(home).await?.recent;
    daemon.stop().await?;
    let calls = model.requests().len();
    model.shutdown().await;
    let Some(answer) = answer else {
        bail!(
            "failed to finish the demo: WeatherAgency did not answer within 120 s; see the audit logs in {}",
            home.dir().display()
        );
    };
    println!("WeatherAgency -> outside party: {answer}");
    println!(
        "\n{} agent runs, {calls} model calls, {} weather API call(s): {}",
        agents.len(),
        weather.requests().len(),
        weather.requests().join(", ")
    );
    Ok(())
}

/// The seed's files, with WeatherTool pointed at the stand-in API and
/// one line added to it: the egress it needs (`agency up` grants it to
/// WeatherAgent, which holds the tool).
fn write_sources(dir: &Path, base_url: &str) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("failed to create {}", dir.display()))?;
    let hostport = base_url.trim_start_matches("http://");
    for (name, text) in SOURCES {
        let text = match *name {
            "WeatherTool.tool" => text.replace(
                &format!("- Base URL: {SEED_BASE_URL}"),
                &format!("- Base URL: {base_url}\n- Egress: {hostport}"),
            ),
            _ => (*text).to_owned(),
        };
        let path = dir.join(name);
        std::fs::write(&path, text)
            .with_context(|| format!("failed to write {}", path.display()))?;
    }
    Ok(())
}
