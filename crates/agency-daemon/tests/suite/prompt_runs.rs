//! What reaches an agent through the real spawn path (the `command`
//! runtime's prompt and first-message files): every sentence of seed 000's
//! "Agent Prompt", Agency's additions after it, the prompt's version and
//! hash in the run record (issue 9 item 15); and how the previous agent of
//! the handler ended when that was not normally, also after a restart
//! that reaped it (item 14).

#![allow(clippy::unwrap_used)]

use crate::fixture;

use std::path::Path;
use std::sync::Arc;

use agency_core::prompt::{
    ADDITIONS_HEADING, PROMPT_VERSION, SEED_PROMPT, USER_AS_BOSS, sentences,
};
use agency_core::{AgentId, HandlerId, Principal};
use agency_daemon::{Daemon, Home};
use agency_service::System;
use fixture::{command_agents, home_with_config, mail_from_user, pids_of, start, wait_for};

/// A home whose agents copy their prompt and first message to `out` and
/// then sleep until stopped.
fn recording_home(out: &Path) -> (tempfile::TempDir, Home) {
    let script = format!(
        "cp \"$AGENCY_PROMPT_FILE\" {out:?}/\"$AGENCY_AGENT\".prompt; cp \"$AGENCY_MESSAGE_FILE\" {out:?}/\"$AGENCY_AGENT\".msg; exec sleep 300"
    );
    home_with_config(&command_agents(
        "max_concurrent = 4\nstall_after_exits = 5\nrespawn_backoff_ms = 20\n",
        &script,
    ))
}

/// A daemon on a recording home (writing to `out`) whose root has been
/// mailed "go".
async fn recording_daemon(out: &Path) -> (tempfile::TempDir, Daemon, Arc<System>, HandlerId) {
    let (dir, home) = recording_home(out);
    let (daemon, svc, root) = start(&home).await;
    mail_from_user(&svc, root, "go");
    (dir, daemon, svc, root)
}

/// The recorded message of `agent`, once its script has copied it.
async fn message_of(out: &Path, agent: AgentId) -> String {
    let path = out.join(format!("{agent}.msg"));
    wait_for("the agent's first message", || {
        std::fs::read_to_string(&path)
            .ok()
            .filter(|s| !s.is_empty())
    })
    .await
}

fn live_agent_other_than(svc: &System, not: Option<AgentId>) -> Option<AgentId> {
    svc.agents_live(Principal::User)
        .unwrap()
        .into_iter()
        .map(|a| a.id)
        .find(|a| Some(*a) != not)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue9_item15_every_sentence_of_the_seed_prompt_reaches_the_agent() {
    let out = tempfile::tempdir().unwrap();
    let (_dir, daemon, svc, root) = recording_daemon(out.path()).await;
    let agent = wait_for("an agent", || live_agent_other_than(&svc, None)).await;
    let path = out.path().join(format!("{agent}.prompt"));
    let prompt = wait_for("the prompt file", || {
        std::fs::read_to_string(&path)
            .ok()
            .filter(|s| !s.is_empty())
    })
    .await;
    let additions = prompt
        .find(ADDITIONS_HEADING)
        .expect("an Agency additions section");
    let seed_part = &prompt[..additions];
    let mut checked = 0;
    for sentence in sentences(SEED_PROMPT) {
        let filled = sentence
            .replace("{HANDLER_OUTCOME_UUID}", &root.to_string())
            .replace("{BOSS_OUTCOME_UUID}", USER_AS_BOSS);
        assert!(
            seed_part.contains(&filled),
            "this sentence of the seed's prompt does not reach the agent (before the additions): {filled}"
        );
        checked += 1;
    }
    assert!(
        checked > 60,
        "only {checked} sentences: the seed copy looks truncated"
    );
    assert!(prompt[additions..].contains("Unacknowledged mail is work"));
    // The run records the version and the hash of exactly this text.
    let run = svc.run(Principal::User, agent).unwrap();
    assert_eq!(run.prompt_version, Some(i64::from(PROMPT_VERSION)));
    assert_eq!(
        run.prompt_hash.as_deref(),
        Some(blake3::hash(prompt.as_bytes()).to_hex().as_str())
    );
    // The first agent of a handler is told nothing about a previous one.
    let message = message_of(out.path(), agent).await;
    assert!(!message.contains("did not end normally"));
    // Issue 30: the run keeps what it was told, exactly (`agency run
    // AGENT --prompt`); the user only.
    let kept = wait_for("the run's prompt", || {
        svc.run_prompt(Principal::User, agent).ok()
    })
    .await;
    assert_eq!(kept.system_prompt, prompt);
    assert_eq!(kept.first_message, message);
    assert_eq!(
        svc.run_prompt(Principal::agent(root, agent), agent)
            .unwrap_err()
            .kind(),
        "permission_denied"
    );
    daemon.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue9_item14_next_agent_is_told_the_previous_was_killed() {
    let out = tempfile::tempdir().unwrap();
    let (_dir, daemon, svc, _root) = recording_daemon(out.path()).await;
    let first = wait_for("the first agent", || live_agent_other_than(&svc, None)).await;
    message_of(out.path(), first).await;
    // Crash it from outside (the OOM killer, a user's kill -9).
    for pid in pids_of(first) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap()),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    let second = wait_for("the next agent", || {
        live_agent_other_than(&svc, Some(first))
    })
    .await;
    let msg = message_of(out.path(), second).await;
    assert!(msg.contains(&first.to_string()), "{msg}");
    assert!(msg.contains("did not end normally: killed"), "{msg}");
    let run = svc.run(Principal::User, first).unwrap();
    assert_eq!(run.normal, Some(false));
    daemon.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue9_item14_after_a_restart_the_next_agent_is_told_its_predecessor_was_reaped() {
    let out = tempfile::tempdir().unwrap();
    let (_dir, home) = recording_home(out.path());
    // A daemon that died with an agent live: the store still says live,
    // and the handler has unread mail (work).
    let ghost = {
        let svc = home.open_service().unwrap();
        let root = svc.root_handler().unwrap().unwrap();
        mail_from_user(&svc, root, "go");
        let ghost = svc.agent_start(root).unwrap();
        svc.agent_record_spawn(ghost, "command", "h", PROMPT_VERSION)
            .unwrap();
        ghost
    };
    let daemon = Daemon::start(&home).await.unwrap();
    let svc = daemon.service().clone();
    let next = wait_for("the next agent", || {
        live_agent_other_than(&svc, Some(ghost))
    })
    .await;
    let msg = message_of(out.path(), next).await;
    assert!(msg.contains(&ghost.to_string()), "{msg}");
    assert!(msg.contains("did not end normally: reaped"), "{msg}");
    daemon.stop().await.unwrap();
}
