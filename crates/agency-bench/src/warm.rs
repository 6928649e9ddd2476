//! Item 11: warm agents, from a message's delivery to
//! the first model request of its handler's agent arriving at the scripted
//! model server: warm (the built-in agent parked in `mail_wait`, woken by
//! the delivery) against cold (a new `agency agent` process started by the
//! supervisor for the same message), in the same run.
//!
//! The daemon runs in this process with the built-in runtime (the `agency`
//! binary) confined as by default; its model is the scripted server behind
//! the daemon's gateway. The clock starts when `mail_send` returns (the
//! delivery is committed and its event published) and stops when the
//! server has recorded one more request, watched by polling its record
//! every 100 µs (so the figures carry up to that much of polling).

use std::time::{Duration, Instant};

use agency_core::{HandlerId, MailTarget, Principal};
use agency_service::{MailBody, System};
use agency_testkit::{ModelServer, Script};
use anyhow::{Context, Result, bail};

use crate::Cfg;
use crate::report::{Row, Section};
use crate::util::{Pct, new_home};

/// The root's script: read the inbox, acknowledge its first message, end
/// the turn; again for every round (a warm conversation keeps growing).
fn script(rounds: usize) -> Result<Script> {
    let round = [
        serde_json::json!({ "tool_calls": [ { "name": "mail_inbox", "input": {} } ] }),
        serde_json::json!({ "tool_calls": [ { "name": "mail_ack", "input": { "messages": ["{{result:/messages/0/id}}"] } } ] }),
        serde_json::json!({ "text": "Handled." }),
    ];
    let turns: Vec<serde_json::Value> = (0..rounds + 1).flat_map(|_| round.clone()).collect();
    let s = serde_json::json!({
        "scenarios": [{ "name": "root", "match": {}, "turns": turns }],
        "fallback": { "text": "ok" }
    });
    Script::from_json(&s.to_string()).context("failed to build the model script")
}

fn send(svc: &System, h: HandlerId) -> Result<()> {
    svc.mail_send(
        Principal::User,
        MailTarget::Handler(h),
        &MailBody::Text {
            subject: Some("Benchmark".to_owned()),
            text: "Please acknowledge.".to_owned(),
        },
    )
    .with_context(|| format!("failed to send mail to handler {h}"))?;
    Ok(())
}

/// Wait until the server has recorded more than `n` requests.
async fn wait_requests(model: &ModelServer, n: usize, timeout: Duration) -> Result<()> {
    let deadline = Instant::now() + timeout;
    while model.requests().len() <= n {
        if Instant::now() > deadline {
            bail!(
                "the model saw no request {} within {} s",
                n + 1,
                timeout.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_micros(100)).await;
    }
    Ok(())
}

/// Wait until `h` has no live agent (`false`) or one (`true`).
async fn wait_live(svc: &System, h: HandlerId, live: bool) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let now = svc
            .agents_live(Principal::User)
            .context("failed to list the live agents")?
            .iter()
            .any(|a| a.handler == h);
        if now == live {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "handler {h}'s agent did not {}",
                if live { "start" } else { "end" }
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// `rounds` deliveries to the root handler, one at a time, each after the
/// previous one was handled (and, cold, after its agent exited).
async fn measure(keep_warm_ms: u64, rounds: usize) -> Result<Pct> {
    let model = ModelServer::start(script(rounds)?)
        .await
        .context("failed to start the scripted model server")?;
    let dir = tempfile::tempdir().context("failed to create a temporary directory")?;
    let config = format!(
        "[agents]\nruntime = \"builtin\"\nagency_program = {:?}\nidle_timeout_ms = 0\nkeep_warm_ms = {keep_warm_ms}\n\
         [agents.builtin]\napi = \"anthropic\"\nbase_url = {:?}\nmodel = \"scripted\"\nmax_turns = 100000\nmax_total_tokens = 1000000000\n",
        crate::util::agency_bin()?.display().to_string(),
        model.base_url()
    );
    let home = new_home(&dir.path().join("home"), &config)?;
    let daemon = agency_daemon::Daemon::start(&home)
        .await
        .context("failed to start the daemon")?;
    let svc = daemon.service().clone();
    let root = svc
        .root_handler()
        .context("failed to read the root handler")?
        .context("the home has no root handler")?;
    let mut lat = Vec::with_capacity(rounds);
    // Round 0 warms up (a cold start either way) and is not counted.
    for i in 0..=rounds {
        let seen = model.requests().len();
        let s = svc.clone();
        let sent = tokio::task::spawn_blocking(move || {
            send(&s, root)?;
            Ok::<_, anyhow::Error>(Instant::now())
        })
        .await
        .context("failed to join the sending task")??;
        wait_requests(&model, seen, Duration::from_secs(60)).await?;
        if i > 0 {
            lat.push(sent.elapsed());
        }
        // The round's three requests, then parked (warm) or gone (cold).
        wait_requests(&model, seen + 2, Duration::from_secs(60)).await?;
        if keep_warm_ms == 0 {
            wait_live(&svc, root, false).await?;
        } else {
            // Let it reach mail_wait; a message delivered sooner is
            // answered at once all the same, only less fairly timed.
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
    }
    daemon.stop().await.context("failed to stop the daemon")?;
    model.shutdown().await;
    Ok(Pct::of(&lat))
}

/// Item 11.
pub async fn run(cfg: Cfg) -> Result<Vec<Section>> {
    let rounds = cfg.pick(50, 10);
    let cold = measure(0, rounds).await?;
    let warm = measure(600_000, rounds).await?;
    let mut s =
        Section::new("11. Warm agents: message delivered → first model request (warm vs cold)");
    s.rows.push(Row::times(
        "warm (agent parked in mail_wait), p50",
        warm.p50,
        ("cold (new agent process), p50", cold.p50),
    ));
    s.rows.push(Row::times(
        "warm (agent parked in mail_wait), p99",
        warm.p99,
        ("cold (new agent process), p99", cold.p99),
    ));
    s.shows = format!(
        "what keeping an agent warm saves per message: the process start, sandbox, MCP session and tool listing of a cold agent (×{:.1} at p50).",
        ratio_f(cold.p50, warm.p50)
    );
    s.notes.push(format!(
        "{rounds} deliveries each, one at a time, user → root handler through `Service::mail_send` on the in-process daemon, after one uncounted warm-up round; built-in runtime (`agency agent`), confined as by default, against the scripted model server through the daemon's gateway; the script reads the inbox, acknowledges and ends the turn. Cold: keep_warm_ms = 0, each message starts a new agent after the previous one exited. Warm: keep_warm_ms = 600000, the one agent is woken by each delivery. Arrival is seen by polling the server's record every 100 µs."
    ));
    if cfg.quick {
        s.notes
            .push(format!("quick mode: {rounds} rounds instead of 50."));
    }
    Ok(vec![s])
}

fn ratio_f(a: Duration, b: Duration) -> f64 {
    a.as_secs_f64() / b.as_secs_f64().max(1e-9)
}
