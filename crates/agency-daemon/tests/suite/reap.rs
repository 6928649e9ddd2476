//! Issue 14 item 2: a daemon starting on a home whose previous daemon died
//! stops the process groups of the agents still recorded as live — found by
//! the recorded group and its leader's start time, or (never recorded) by
//! the agent's mark in their environment — and leaves alone a process whose
//! recorded pid was reused by something else. The processes stand in for
//! agents: the test starts them as the supervisor would (a group of their
//! own, `AGENCY_AGENT` in the environment), so the test is their parent
//! and sees them end.

#![allow(clippy::unwrap_used)]

use crate::fixture;

use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use agency_core::{AgentId, Principal};
use agency_daemon::Daemon;
use fixture::{delegate_new, home_with_config};

fn sleeper(mark: Option<AgentId>) -> Child {
    let mut cmd = Command::new("sleep");
    cmd.arg("300").process_group(0);
    if let Some(a) = mark {
        cmd.env("AGENCY_AGENT", a.to_string());
    }
    cmd.spawn().unwrap()
}

fn start_time(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    stat.rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .nth(19)
        .unwrap()
        .parse()
        .unwrap()
}

async fn ended(child: &mut Child) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue14_item2_a_starting_daemon_stops_the_groups_its_predecessor_left() {
    let (_dir, home) = home_with_config("[agents]\nkill_grace_ms = 300\n");
    let (mut recorded, mut unrecorded, mut stranger, root) = {
        let svc = home.open_service().unwrap();
        svc.bootstrap().unwrap();
        let root = svc.root_handler().unwrap().unwrap();
        // Agent 1: its group recorded at spawn. (No mark: the start time
        // alone identifies it.)
        let a1 = svc.agent_start(root).unwrap();
        let recorded = sleeper(None);
        svc.agent_record_process(a1, recorded.id(), start_time(recorded.id()))
            .unwrap();
        // Agent 2: the daemon died before recording the group; the process
        // carries the agent's mark.
        let other = delegate_new(&svc, Principal::agent(root, a1), root, "Work");
        let a2 = svc.agent_start(other).unwrap();
        let unrecorded = sleeper(Some(a2));
        // Agent 3: its recorded pid now belongs to an unrelated process
        // (another start time, no mark).
        let third = delegate_new(&svc, Principal::agent(root, a1), root, "More");
        let a3 = svc.agent_start(third).unwrap();
        let stranger = sleeper(None);
        svc.agent_record_process(a3, stranger.id(), start_time(stranger.id()) + 1)
            .unwrap();
        (recorded, unrecorded, stranger, root)
    };
    let daemon = Daemon::start(&home).await.unwrap();
    assert!(ended(&mut recorded).await, "the recorded group still runs");
    assert!(
        ended(&mut unrecorded).await,
        "the marked process still runs"
    );
    assert!(
        stranger.try_wait().unwrap().is_none(),
        "a reused pid was killed"
    );
    let svc = daemon.service().clone();
    assert!(svc.agents_live(Principal::User).unwrap().is_empty());
    let log = svc.audit_read(Principal::User, Some(root)).unwrap();
    assert!(log.iter().any(|e| e.summary.contains("reaped")), "{log:?}");
    daemon.stop().await.unwrap();
    stranger.kill().unwrap();
    stranger.wait().unwrap();
}
