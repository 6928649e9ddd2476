//! Issue 28: `agency keep-warm HANDLER off` releases the handler's parked
//! warm agent. A real daemon (in this process) runs `agency agent`
//! against the scripted model server; the user turns keep-warm off with
//! the real binary; the agent ends normally (its state saved, as at the
//! end of its keep-warm time) and its process is gone, long before the
//! keep-warm time it was started with.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use agency_config::Home;
use agency_core::{AgentId, HandlerId, MailTarget, Principal};
use agency_daemon::Daemon;
use agency_service::{MailBody, System};
use agency_testkit::{ModelServer, Script};

const BIN: &str = env!("CARGO_BIN_EXE_agency");

/// The root reads and acknowledges the message, then ends its turn.
const SCRIPT: &str = r#"{
  "scenarios": [{
    "name": "root",
    "match": { "system_contains": "Help the user accomplish all their work" },
    "turns": [
      { "tool_calls": [ { "name": "mail_inbox", "input": {} } ] },
      { "tool_calls": [ { "name": "mail_ack", "input": { "messages": ["{{result:/messages/0/id}}"] } } ] },
      { "text": "Message handled." }
    ]
  }],
  "fallback": { "text": "ok" }
}"#;

/// Polls `f` every 20 ms until it yields, failing after 60 s (far less
/// than the agent's keep-warm time: a pass is never a timeout).
async fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn live_agent(svc: &System, h: HandlerId) -> Option<AgentId> {
    svc.agents_live(Principal::User)
        .unwrap()
        .into_iter()
        .find(|a| a.handler == h)
        .map(|a| a.id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue28_keep_warm_off_releases_the_parked_agent() {
    let model = ModelServer::start(Script::from_json(SCRIPT).unwrap())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path().join("home"));
    home.init().unwrap();
    // Unconfined: this is about the agent's life, not its walls. Warm for
    // an hour unless released.
    std::fs::write(
        home.config_path(),
        format!(
            "[agents]\nagency_program = {BIN:?}\nsandbox = \"off\"\nkill_grace_ms = 300\nkeep_warm_ms = 3600000\nruntime = \"builtin\"\n[agents.builtin]\napi = \"anthropic\"\nbase_url = {:?}\nmodel = \"scripted\"\nmax_turns = 40\n",
            model.base_url()
        ),
    )
    .unwrap();
    std::fs::write(home.dir().join("policy.toml"), "defaults = false\n").unwrap();
    let daemon = Daemon::start(&home).await.unwrap();
    let svc = daemon.service().clone();
    let root = svc.root_handler().unwrap().unwrap();
    svc.mail_send(
        Principal::User,
        MailTarget::Handler(root),
        &MailBody::Text {
            subject: Some("First".into()),
            text: "Please read this.".into(),
        },
    )
    .unwrap();
    let agent = wait_for("the root's agent", || live_agent(&svc, root)).await;
    let pgid = wait_for("the agent's process record", || {
        svc.live_agent_processes()
            .unwrap()
            .into_iter()
            .find(|p| p.agent == agent)
            .map(|p| p.pgid)
    })
    .await;
    // Its work done, the agent waits for mail (warm).
    wait_for("the message handled", || {
        (model
            .requests()
            .iter()
            .filter(|r| r.scenario.as_deref() == Some("root"))
            .count()
            == 3)
            .then_some(())
    })
    .await;
    assert_eq!(live_agent(&svc, root), Some(agent));

    let out = std::process::Command::new(BIN)
        .args(["keep-warm", &root.to_string()[..8], "off"])
        .env("AGENCY_HOME", home.dir())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // Released: it ends normally, as at the end of its keep-warm time.
    let run = wait_for("the agent to end", || {
        svc.run(Principal::User, agent)
            .ok()
            .filter(|r| !r.live && r.normal.is_some())
    })
    .await;
    assert_eq!(run.normal, Some(true), "{run:?}");
    assert_eq!(run.end_reason.as_deref(), Some("completed"), "{run:?}");
    assert_eq!(run.exit_status, Some(0), "{run:?}");
    let log = String::from_utf8(svc.run_transcript(Principal::User, agent).unwrap()).unwrap();
    assert!(log.contains("\"warm_wait\""), "{log}");
    assert!(log.contains("\"released\""), "{log}");
    // Its process group is gone.
    let group = nix::unistd::Pid::from_raw(-i32::try_from(pgid).unwrap());
    wait_for("the agent's processes to be gone", || {
        nix::sys::signal::kill(group, None).is_err().then_some(())
    })
    .await;
    // No new agent: the handler has no work.
    assert_eq!(live_agent(&svc, root), None);
    daemon.stop().await.unwrap();
    model.shutdown().await;
}
