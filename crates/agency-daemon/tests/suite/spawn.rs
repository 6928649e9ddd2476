//! Issue 15 item 3, through the daemon: an agent started on mail has what
//! its one preparation transaction wrote (its run record), its process
//! group is recorded after it started, and recording its end off the
//! dispatcher still deletes its workspace and frees its slot for another
//! handler's agent.

#![allow(clippy::unwrap_used)]

use crate::fixture;

use agency_core::Principal;
use fixture::{
    command_agents, delegate_new, home_with_config, mail_from_user, processes_of, start, wait_for,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_15_a_spawned_agent_has_its_run_and_its_process_group_recorded() {
    let (_dir, home) = home_with_config(&command_agents("", "sleep 300"));
    let (daemon, svc, root) = start(&home).await;
    mail_from_user(&svc, root, "go");
    let agent = wait_for("the root's agent", || {
        svc.agents_live(Principal::User)
            .unwrap()
            .first()
            .map(|a| a.id)
    })
    .await;
    // Written by the preparation, before the process started.
    let run = svc.agent_run(Principal::User, agent).unwrap();
    assert_eq!(run.runtime, "command");
    assert_eq!(run.prompt_hash.len(), 64);
    // Recorded by the task that waits for its exit, after the start.
    let recorded = wait_for("the process group's record", || {
        svc.live_agent_processes()
            .unwrap()
            .into_iter()
            .find(|p| p.agent == agent)
    })
    .await;
    let procs = wait_for("the agent's process", || {
        Some(processes_of(agent)).filter(|p| !p.is_empty())
    })
    .await;
    assert_eq!(i64::from(procs[0].1), recorded.pgid);
    daemon.stop().await.unwrap();
    assert!(processes_of(agent).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_15_an_exit_recorded_off_the_dispatcher_deletes_the_workspace_and_frees_the_slot() {
    // Every agent exits at once without progress; an hour's backoff keeps
    // the root from coming back during the test.
    let (_dir, home) = home_with_config(&command_agents(
        "max_concurrent = 1\nrespawn_backoff_ms = 3600000\nmax_backoff_ms = 3600000\n",
        "exit 0",
    ));
    let (daemon, svc, root) = start(&home).await;
    let runs = home.dir().join("run");
    let spawn_dirs = || {
        std::fs::read_dir(&runs).map_or(0, |d| {
            d.filter_map(Result::ok)
                .filter(|e| e.path().join("workspace").exists())
                .count()
        })
    };
    mail_from_user(&svc, root, "go");
    let first = wait_for("the root's run to be recorded", || {
        svc.runs(Principal::User, Some(root), None, None)
            .unwrap()
            .into_iter()
            .find(|r| !r.live)
    })
    .await;
    assert_eq!(first.exit_status, Some(0), "{first:?}");
    wait_for("its workspace to be deleted", || {
        (spawn_dirs() == 0).then_some(())
    })
    .await;
    // The one slot is free again: an underling's agent starts and ends.
    let root_agent = svc.agent_start(root).unwrap();
    let u = delegate_new(&svc, Principal::agent(root, root_agent), root, "Work");
    svc.agent_end(root_agent, "test").unwrap();
    wait_for("the underling's run", || {
        svc.runs(Principal::User, Some(u), None, None)
            .unwrap()
            .into_iter()
            .find(|r| !r.live)
    })
    .await;
    daemon.stop().await.unwrap();
}
