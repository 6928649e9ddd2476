//! Issue 28: `agency approve` and `agency deny` wake the handler that
//! asked, against a real `agency serve`. The agent (the `command` runtime
//! running `tests/fixtures/approval_agent.py`) is asked to run two
//! destructive commands, is told both are pending, and ends. Nothing but
//! the user's decisions follows — no mail is sent after them: the approval
//! alone starts the next agent, whose retried call runs exactly once and
//! consumes the request; the denial alone starts the one after, which
//! reads the tool, the arguments and the user's reason and does not retry.
//! Twice: with the handler left idle (no work: before the fix no agent was
//! ever started again), and with work left after exits without progress
//! (a backoff of an hour: before the fix the decision waited it out).

#![allow(clippy::unwrap_used)]

use crate::agent_story;

use std::path::Path;
use std::time::{Duration, Instant};

use agency_testkit::sandbox::fixtures_dir;
use agent_story::{Story, agency, json};
use serde_json::Value;

const A: &str = "rm -rf /tmp/agency-issue28-a";
const B: &str = "rm -rf /tmp/agency-issue28-b";
const REASON: &str = "that directory is shared with the build";

/// The `command` runtime running the fixture agent in `mode`, unconfined
/// (the sandbox has tests of its own), with an hour's backoff after an
/// exit without progress, so only a decision can explain a prompt start.
fn config(out: &Path, mode: &str) -> String {
    let agent = fixtures_dir()
        .canonicalize()
        .unwrap()
        .join("approval_agent.py");
    let script = format!(
        "exec python3 {:?} {:?} {mode}",
        agent.display().to_string(),
        out.display().to_string()
    );
    format!(
        "[agents]\nruntime = \"command\"\nsandbox = \"off\"\nkill_grace_ms = 300\n\
         respawn_backoff_ms = 3600000\nmax_backoff_ms = 3600000\n\
         [agents.command]\nprogram = \"sh\"\nargs = [\"-c\", {script:?}]\n"
    )
}

fn read(out: &Path, name: &str) -> String {
    std::fs::read_to_string(out.join(name)).unwrap_or_else(|_| panic!("{name} missing"))
}

/// Runs the agent has begun (`run-N` files).
fn runs(out: &Path) -> u32 {
    std::fs::read_dir(out)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("run-"))
        .count() as u32
}

/// Wait until the handler is quiet: every run begun has ended, no agent
/// is live, and no new one starts for a while (an exit right after a
/// request is one with progress, and the next agent starts at once).
/// Returns how many runs there were.
async fn quiet(story: &Story, out: &Path) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut since: Option<(u32, Instant)> = None;
    loop {
        let n = runs(out);
        let idle = out.join(format!("end-{n}")).exists()
            && json(&story.home, &["agents"])["live"]
                .as_array()
                .unwrap()
                .is_empty();
        match since {
            Some((m, at)) if idle && m == n => {
                if at.elapsed() > Duration::from_millis(1500) {
                    return n;
                }
            }
            _ => since = idle.then(|| (n, Instant::now())),
        }
        assert!(
            Instant::now() < deadline,
            "the agent did not settle\ndaemon log:\n{}",
            story.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Wait for run `n` to end: the one a decision must have started.
async fn run_ended(story: &Story, out: &Path, n: u32, after: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !out.join(format!("end-{n}")).exists() {
        assert!(
            Instant::now() < deadline,
            "no agent ran after {after}: the handler was not woken\ndaemon log:\n{}",
            story.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Request `id` as `agency approvals --all` shows it.
fn request(story: &Story, id: &str) -> Value {
    json(&story.home, &["approvals", "--all"])
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"].as_i64().map(|n| n.to_string()).as_deref() == Some(id))
        .unwrap_or_else(|| panic!("no request {id}"))
        .clone()
}

async fn decisions_wake_the_handler(mode: &str) {
    let out = tempfile::tempdir().unwrap();
    let out = out.path();
    // The default policy: a destructive command outside the workspace asks.
    let story = Story::start_with_policy(&config(out, mode), Duration::from_secs(120), None).await;
    let (code, _, err) = agency(&story.home, &["send", "Please run the two clean-ups"]);
    assert_eq!(code, 0, "{err}");
    let first = quiet(&story, out).await;
    let (a, b) = (read(out, "pending-A"), read(out, "pending-B"));
    for (id, command) in [(&a, A), (&b, B)] {
        let r = request(&story, id);
        assert_eq!(r["status"], "pending", "{r}");
        assert!(r["args"].as_str().unwrap().contains(command), "{r}");
    }
    assert!(!out.join("ran-A").exists());

    // Approve A; nothing else happens from outside.
    let (code, _, err) = agency(&story.home, &["approve", &a]);
    assert_eq!(code, 0, "{err}");
    let woken = first + 1;
    run_ended(&story, out, woken, "agency approve").await;
    // The agent was told, retried, and the call ran once.
    let inbox = read(out, &format!("run-{woken}"));
    assert!(
        inbox.contains(&format!("Approved: bash (request {a})")),
        "{inbox}"
    );
    assert!(
        inbox.contains("call it again with the same arguments"),
        "{inbox}"
    );
    assert_eq!(read(out, "ran-A"), format!("ran in run {woken}\n"));
    assert_eq!(request(&story, &a)["status"], "consumed");
    assert_eq!(request(&story, &b)["status"], "pending");
    let second = quiet(&story, out).await;

    // Deny B with a reason; again nothing else.
    let (code, _, err) = agency(&story.home, &["deny", &b, "--reason", REASON]);
    assert_eq!(code, 0, "{err}");
    let woken_again = second + 1;
    run_ended(&story, out, woken_again, "agency deny").await;
    // That agent read the notice: the tool, the arguments, the reason.
    let inbox = read(out, &format!("run-{woken_again}"));
    assert!(
        inbox.contains(&format!("Denied: bash (request {b})")),
        "{inbox}"
    );
    let told = read(out, "denied-B");
    for needle in ["tool `bash`", B, REASON, "Do not make this call again"] {
        assert!(told.contains(needle), "{needle:?} not in {told}");
    }
    assert!(!out.join("ran-B").exists());
    assert_eq!(request(&story, &b)["status"], "denied");

    // Settled: no further agent, A ran exactly once, no new request.
    assert_eq!(
        quiet(&story, out).await,
        woken_again,
        "an agent ran with nothing to do"
    );
    assert_eq!(read(out, "ran-A"), format!("ran in run {woken}\n"));
    let all = json(&story.home, &["approvals", "--all"]);
    assert_eq!(all.as_array().unwrap().len(), 2, "{all}");
    story.stop();
}

/// The agent acknowledged the user's message at once: the handler has no
/// work left, and only the decision's notice gives it some.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue28_approve_and_deny_wake_an_idle_handler() {
    decisions_wake_the_handler("early").await;
}

/// The agent keeps the user's message until both commands are settled:
/// each of its exits is one without progress, and the next agent is due
/// in an hour; the decision starts it now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue28_a_decision_wakes_a_handler_in_backoff() {
    decisions_wake_the_handler("late").await;
}
