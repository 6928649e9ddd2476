//! Warm agents (issue 13 items 6 and 8) with the built-in runtime: a real
//! daemon (in this process, port 0) runs `agency agent` against the
//! scripted model server. A warm agent answers a second message in the
//! same process and conversation; it ends normally when its keep-warm time
//! has passed; an ordinary handler's agent (keep-warm off by default) exits
//! after its work; and with every slot taken, a warm agent gives its slot
//! up (ending normally, not killed) to a handler that waits for one.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agency_config::Home;
use agency_core::{AgentId, HandlerId, MailTarget, Principal};
use agency_daemon::Daemon;
use agency_service::{MailBody, NewOutcome, RunView, System};
use agency_testkit::{ModelServer, RecordedRequest, Script};

const BIN: &str = env!("CARGO_BIN_EXE_agency");

/// The root reads and acknowledges each message, then ends its turn; a
/// delegated handler ("Sweep the yard") ends its turn at once.
const SCRIPT: &str = r#"{
  "scenarios": [{
    "name": "root",
    "match": { "system_contains": "Help the user accomplish all their work" },
    "turns": [
      { "tool_calls": [ { "name": "mail_inbox", "input": {} } ] },
      { "tool_calls": [ { "name": "mail_ack", "input": { "messages": ["{{result:/messages/0/id}}"] } } ] },
      { "text": "First message handled." },
      { "tool_calls": [ { "name": "mail_inbox", "input": {} } ] },
      { "tool_calls": [ { "name": "mail_ack", "input": { "messages": ["{{result:/messages/0/id}}"] } } ] },
      { "text": "Second message handled." }
    ]
  }, {
    "name": "yard",
    "match": { "system_contains": "Sweep the yard" },
    "turns": [ { "text": "Swept." } ]
  }],
  "fallback": { "text": "ok" }
}"#;

struct Fixture {
    _dir: tempfile::TempDir,
    daemon: Daemon,
    svc: Arc<System>,
    root: HandlerId,
    model: ModelServer,
}

async fn start(agents: &str) -> Fixture {
    start_with(agents, |url| {
        format!(
            "runtime = \"builtin\"\n[agents.builtin]\napi = \"anthropic\"\nbase_url = {url:?}\nmodel = \"scripted\"\nmax_turns = 40\n"
        )
    })
    .await
}

/// `agents` goes into `[agents]`; `runtime(model URL)` adds the runtime
/// and its table.
async fn start_with(agents: &str, runtime: impl Fn(&str) -> String) -> Fixture {
    let model = ModelServer::start(Script::from_json(SCRIPT).unwrap())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path().join("home"));
    home.init().unwrap();
    // Unconfined: the sandbox has tests of its own; these are about slots.
    let cfg = format!(
        "[agents]\nagency_program = {BIN:?}\nsandbox = \"off\"\nkill_grace_ms = 300\n{agents}\n{}",
        runtime(&model.base_url())
    );
    std::fs::write(home.config_path(), cfg).unwrap();
    // The policy's defaults off: these tests are about slots, not approvals.
    std::fs::write(home.dir().join("policy.toml"), "defaults = false\n").unwrap();
    let daemon = Daemon::start(&home).await.unwrap();
    let svc = daemon.service().clone();
    let root = svc.root_handler().unwrap().unwrap();
    Fixture {
        _dir: dir,
        daemon,
        svc,
        root,
        model,
    }
}

fn mail(svc: &System, to: HandlerId, subject: &str) {
    svc.mail_send(
        Principal::User,
        MailTarget::Handler(to),
        &MailBody::Text {
            subject: Some(subject.into()),
            text: "Please read this.".into(),
        },
    )
    .unwrap();
}

/// Polls `f` every 20 ms until it yields, failing after 60 s.
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

fn requests_of(model: &ModelServer, scenario: &str) -> Vec<RecordedRequest> {
    model
        .requests()
        .into_iter()
        .filter(|r| r.scenario.as_deref() == Some(scenario))
        .collect()
}

fn live_agent(svc: &System, h: HandlerId) -> Option<AgentId> {
    svc.agents_live(Principal::User)
        .unwrap()
        .into_iter()
        .find(|a| a.handler == h)
        .map(|a| a.id)
}

/// Waits until `agent`'s run has ended and been recorded; its record.
async fn ended(svc: &System, agent: AgentId) -> RunView {
    wait_for("the agent to end", || {
        svc.run(Principal::User, agent)
            .ok()
            .filter(|r| !r.live && r.normal.is_some())
    })
    .await
}

fn transcript(svc: &System, agent: AgentId) -> String {
    String::from_utf8(svc.run_transcript(Principal::User, agent).unwrap()).unwrap()
}

/// Item 8 (a): the second message is answered by the same agent, in the
/// same process and conversation: one run, and the model's next request
/// continues the first one's history (its position counts the answers
/// the agent already gave).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_agent_answers_a_second_message_without_a_new_process() {
    let f = start("keep_warm_ms = 600000").await;
    mail(&f.svc, f.root, "First");
    let agent = wait_for("the root's agent", || live_agent(&f.svc, f.root)).await;
    wait_for("the first message handled", || {
        (requests_of(&f.model, "root").len() == 3).then_some(())
    })
    .await;
    mail(&f.svc, f.root, "Second");
    wait_for("the second message handled", || {
        (requests_of(&f.model, "root").len() == 6).then_some(())
    })
    .await;
    let reqs = requests_of(&f.model, "root");
    let turns: Vec<usize> = reqs.iter().map(|r| r.turn).collect();
    assert_eq!(turns, [0, 1, 2, 3, 4, 5], "{reqs:?}");
    assert!(reqs.iter().all(|r| r.status == 200), "{reqs:?}");
    // Still the one agent, still live; one run recorded for the handler.
    assert_eq!(live_agent(&f.svc, f.root), Some(agent));
    let runs = f
        .svc
        .runs(Principal::User, Some(f.root), None, None)
        .unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(runs[0].agent, agent);
    assert!(runs[0].live);
    // Both messages acknowledged by it.
    assert!(f.svc.inbox_subjects(f.root, 10).unwrap().is_empty());
    f.daemon.stop().await.unwrap();
    let log = transcript(&f.svc, agent);
    assert_eq!(log.matches("\"warm_wake\"").count(), 1, "{log}");
    f.model.shutdown().await;
}

/// Item 8 (c): the agent ends normally once its keep-warm time has passed
/// with no mail, after no more model calls than its work needed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_agent_ends_normally_after_its_keep_warm_time() {
    let f = start("keep_warm_ms = 1500").await;
    mail(&f.svc, f.root, "First");
    let agent = wait_for("the root's agent", || live_agent(&f.svc, f.root)).await;
    let run = ended(&f.svc, agent).await;
    assert_eq!(run.normal, Some(true), "{run:?}");
    assert_eq!(run.end_reason.as_deref(), Some("completed"));
    assert_eq!(requests_of(&f.model, "root").len(), 3);
    let log = transcript(&f.svc, agent);
    assert!(log.contains("\"warm_wait\""), "{log}");
    assert!(log.contains("keep_warm elapsed"), "{log}");
    f.daemon.stop().await.unwrap();
    f.model.shutdown().await;
}

/// Item 8 (d): keep-warm is off by default for an ordinary handler: its
/// agent exits when its work is done and never waits for mail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ordinary_handlers_agent_exits_after_its_work_by_default() {
    let f = start("").await;
    mail(&f.svc, f.root, "First");
    let agent = wait_for("the root's agent", || live_agent(&f.svc, f.root)).await;
    let run = ended(&f.svc, agent).await;
    assert_eq!(run.normal, Some(true), "{run:?}");
    let log = transcript(&f.svc, agent);
    assert!(!log.contains("warm_wait"), "{log}");
    f.daemon.stop().await.unwrap();
    f.model.shutdown().await;
}

/// Item 8 (b): one slot, held by the root's warm agent; a new handler gets
/// work and waits for it: the warm agent is released, ends normally (not
/// killed), and the new handler's agent starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_agent_gives_its_slot_up_under_pressure() {
    let f = start("max_concurrent = 1\nkeep_warm_ms = 600000").await;
    mail(&f.svc, f.root, "First");
    let root_agent = wait_for("the root's agent", || live_agent(&f.svc, f.root)).await;
    wait_for("the first message handled", || {
        (requests_of(&f.model, "root").len() == 3).then_some(())
    })
    .await;
    // The root's agent delegates (acting as it, as its model would): the
    // new handler has work and no slot.
    let by = Principal::agent(f.root, root_agent);
    let o = f
        .svc
        .outcome_create(
            by,
            &NewOutcome {
                title: "Sweep the yard".into(),
                parents: vec![f.root.root()],
                ..Default::default()
            },
        )
        .unwrap();
    let yard = f.svc.delegate(by, o, &[]).unwrap().handler;
    let yard_agent = wait_for("the new handler's agent", || live_agent(&f.svc, yard)).await;
    let run = f.svc.run(Principal::User, root_agent).unwrap();
    assert!(!run.live);
    assert_eq!(run.normal, Some(true), "{run:?}");
    assert_eq!(run.end_reason.as_deref(), Some("completed"), "{run:?}");
    assert_eq!(run.exit_status, Some(0));
    let log = transcript(&f.svc, root_agent);
    assert!(log.contains("\"released\""), "{log}");
    // The root's model calls were only those of its work: parked, it
    // made none, and being released cost none.
    assert_eq!(requests_of(&f.model, "root").len(), 3);
    wait_for("the new handler's model call", || {
        (!requests_of(&f.model, "yard").is_empty()).then_some(())
    })
    .await;
    assert_eq!(live_agent(&f.svc, yard), Some(yard_agent));
    f.daemon.stop().await.unwrap();
    f.model.shutdown().await;
}

/// Item 6 for Claude Code: in its stream-json input mode (`agency
/// claude-warm`), the agent answers the second message in the same
/// process and conversation, as the built-in one does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_claude_code_agent_answers_a_second_message_in_the_same_session() {
    let claude = claude_bin();
    let f = start_with("keep_warm_ms = 600000", |url| {
        format!(
            "runtime = \"claude-code\"\n[agents.claude_code]\nprogram = {claude:?}\nmodel = \"scripted\"\nmax_turns = 20\n\
             [agents.claude_code.env]\nANTHROPIC_BASE_URL = {url:?}\nANTHROPIC_API_KEY = \"test\"\nCLAUDE_CODE_MAX_RETRIES = \"1\"\n"
        )
    })
    .await;
    mail(&f.svc, f.root, "First");
    let agent = wait_for("the root's agent", || live_agent(&f.svc, f.root)).await;
    wait_for("the first message handled", || {
        (requests_of(&f.model, "root").len() == 3).then_some(())
    })
    .await;
    mail(&f.svc, f.root, "Second");
    wait_for("the second message handled", || {
        (requests_of(&f.model, "root").len() == 6).then_some(())
    })
    .await;
    let reqs = requests_of(&f.model, "root");
    let turns: Vec<usize> = reqs.iter().map(|r| r.turn).collect();
    assert_eq!(turns, [0, 1, 2, 3, 4, 5], "{reqs:?}");
    assert_eq!(live_agent(&f.svc, f.root), Some(agent));
    let runs = f
        .svc
        .runs(Principal::User, Some(f.root), None, None)
        .unwrap();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert!(f.svc.inbox_subjects(f.root, 10).unwrap().is_empty());
    // Two turns of one session in its transcript (the live file in its
    // run directory: the second turn's result follows the last request).
    let runs_dir = f._dir.path().join("home/run");
    wait_for("the second turn's result", || {
        let dir = std::fs::read_dir(&runs_dir).ok()?.flatten().next()?;
        let log = std::fs::read_to_string(dir.path().join("run/transcript.jsonl")).ok()?;
        (log.matches("\"type\":\"result\"").count() == 2).then_some(())
    })
    .await;
    f.daemon.stop().await.unwrap();
    let log = transcript(&f.svc, agent);
    assert_eq!(log.matches("\"type\":\"result\"").count(), 2, "{log}");
    let sessions: std::collections::BTreeSet<String> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["session_id"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(sessions.len(), 1, "{log}");
    f.model.shutdown().await;
}

/// The real Claude Code CLI, from `AGENCY_CLAUDE_BIN` (scripts/test.sh
/// installs it); this test fails without it, it is never skipped.
fn claude_bin() -> String {
    let p = std::env::var("AGENCY_CLAUDE_BIN").expect(
        "AGENCY_CLAUDE_BIN is not set: this test runs the real Claude Code CLI; \
         install it with `npm install --prefix target/claude-code @anthropic-ai/claude-code` \
         and set AGENCY_CLAUDE_BIN to target/claude-code/node_modules/.bin/claude",
    );
    std::fs::canonicalize(&p)
        .unwrap_or_else(|e| panic!("AGENCY_CLAUDE_BIN={p}: {e}"))
        .to_string_lossy()
        .into_owned()
}

/// `agency keep-warm` (REST `/v1/handlers/{id}/keep-warm`): the default,
/// the user's setting, its bound, going back to the default; and the
/// setting is what the handler's next agent gets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_user_sets_a_handlers_keep_warm_time_from_the_command_line() {
    let f = start("").await;
    let home = f._dir.path().join("home");
    let run = |args: &[&str]| {
        let out = std::process::Command::new(BIN)
            .args(args)
            .env("AGENCY_HOME", &home)
            .env("AGENCY_WIDE", "1")
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let root = f.root.to_string();
    let r8 = &root[..8];
    let (ok, out, err) = run(&["keep-warm", r8]);
    assert!(ok, "{err}");
    assert!(
        out.contains("exits when its work is done (the default)"),
        "{out}"
    );
    let (ok, out, err) = run(&["keep-warm", r8, "1500ms"]);
    assert!(ok, "{err}");
    assert!(
        out.contains("stays warm 1500 ms after its work is done (set by the user)"),
        "{out}"
    );
    let (ok, _, err) = run(&["keep-warm", r8, "25h"]);
    assert!(!ok);
    assert!(err.contains("longer than the 24 h"), "{err}");
    let (ok, out, err) = run(&["--json", "keep-warm", r8]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["user_ms"], 1500);
    assert_eq!(v["effective_ms"], 1500);
    assert_eq!(v["source"], "user");
    // The next agent of the handler gets it: it waits, then ends.
    mail(&f.svc, f.root, "First");
    let agent = wait_for("the root's agent", || live_agent(&f.svc, f.root)).await;
    ended(&f.svc, agent).await;
    let log = transcript(&f.svc, agent);
    assert!(log.contains("\"keep_warm_ms\":1500"), "{log}");
    let (ok, out, err) = run(&["keep-warm", r8, "default"]);
    assert!(ok, "{err}");
    assert!(out.contains("(the default)"), "{out}");
    f.daemon.stop().await.unwrap();
    f.model.shutdown().await;
}
