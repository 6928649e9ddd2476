//! Agent processes: each starts in a process group of its own, so that
//! stopping it reaches every process it started; stopping is SIGTERM to the
//! group, a grace period, then SIGKILL ([`agency_sandbox::process_group`],
//! the one implementation of it). Killing an already-gone group is not an
//! error, so a stop can be repeated safely. What is the supervisor's own:
//! telling a recorded group from a reused id ([`still_ours`]) and stopping
//! the groups a previous daemon left running ([`reap_left_over`]).

use std::time::Duration;

use agency_sandbox::process_group::stop_groups;

/// SIGTERM the group, wait up to `grace` for it to empty, then SIGKILL.
pub async fn stop_group(pgid: u32, grace: Duration) {
    // The wait is a poll of the group: on a blocking thread, so that a
    // long grace holds no async worker.
    let _ = tokio::task::spawn_blocking(move || stop_groups(&[pgid], grace)).await;
}

/// The `/proc/PID/stat` fields after the command name: `(pgrp, starttime)`.
fn stat_of(pid: u32) -> Option<(u32, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields resume
    // after its last ")". Then: state(3) ppid(4) pgrp(5) … starttime(22).
    let rest: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let pgrp = rest.get(2)?.parse().ok()?;
    let started = rest.get(19)?.parse().ok()?;
    Some((pgrp, started))
}

/// The start time (clock ticks since boot) of process `pid`, recorded with
/// its group so that a later daemon can tell it from a reused pid.
pub fn start_time(pid: u32) -> Option<u64> {
    stat_of(pid).map(|(_, started)| started)
}

/// Whether the group recorded for `agent` (leader `pgid`, started at
/// `started`) is still that agent's: its leader is the very process we
/// started, or a member still carries the agent's mark in its environment
/// (`AGENCY_AGENT`, set by [`crate::runtime::clean_env`]; readable only for
/// our own user's processes). A group id some unrelated process reused is
/// left alone.
pub fn still_ours(agent: agency_core::AgentId, pgid: u32, started: u64) -> bool {
    if pgid <= 1 {
        return false;
    }
    if stat_of(pgid) == Some((pgid, started)) {
        return true;
    }
    let mark = format!("AGENCY_AGENT={agent}");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|e| {
        let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) else {
            return false;
        };
        stat_of(pid).is_some_and(|(g, _)| g == pgid)
            && std::fs::read(e.path().join("environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == mark.as_bytes()))
    })
}

/// At start, before the store reaps the agents a previous daemon left
/// recorded as live: stop every process group of theirs that still runs
/// (the daemon was killed and could not), all at once — SIGTERM, one
/// grace period, SIGKILL. Blocking: run it off the async threads.
pub fn reap_left_over(svc: &agency_service::System, grace: Duration) {
    reap_left_over_of(svc, None, grace);
}

/// [`reap_left_over`] limited to the agents `only` names (a store shared
/// with other daemons: their agents are theirs to run).
pub fn reap_left_over_of(
    svc: &agency_service::System,
    only: Option<&std::collections::HashSet<agency_core::AgentId>>,
    grace: Duration,
) {
    let rows = match svc.live_agent_processes() {
        Ok(rows) => rows
            .into_iter()
            .filter(|r| only.is_none_or(|o| o.contains(&r.agent)))
            .collect::<Vec<_>>(),
        Err(e) => {
            tracing::error!(error = %e, "failed to read the process groups of agents left live");
            return;
        }
    };
    let mut groups: Vec<u32> = rows
        .iter()
        .filter_map(|r| {
            let pgid = u32::try_from(r.pgid).ok()?;
            let started = u64::try_from(r.started).ok()?;
            still_ours(r.agent, pgid, started).then(|| {
                tracing::warn!(
                    agent = %r.agent,
                    pgid,
                    "stopping an agent left running by the previous daemon"
                );
                pgid
            })
        })
        .collect();
    groups.extend(unrecorded_groups(svc, &rows, only));
    groups.sort_unstable();
    groups.dedup();
    stop_groups(&groups, grace);
}

/// The groups of processes carrying the mark of a live agent whose group
/// was never recorded (the daemon died between the spawn and the record):
/// found by their `AGENCY_AGENT` variable, never the daemon's own group.
fn unrecorded_groups(
    svc: &agency_service::System,
    rows: &[agency_store::AgentProcessRow],
    only: Option<&std::collections::HashSet<agency_core::AgentId>>,
) -> Vec<u32> {
    let recorded: std::collections::HashSet<_> = rows.iter().map(|r| r.agent).collect();
    let marks: std::collections::HashSet<Vec<u8>> = svc
        .agents_live(agency_core::Principal::User)
        .unwrap_or_default()
        .into_iter()
        .filter(|a| !recorded.contains(&a.id) && only.is_none_or(|o| o.contains(&a.id)))
        .map(|a| format!("AGENCY_AGENT={}", a.id).into_bytes())
        .collect();
    if marks.is_empty() {
        return Vec::new();
    }
    let own = nix::unistd::getpgrp().as_raw();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<u32>().ok()?;
            let env = std::fs::read(e.path().join("environ")).ok()?;
            env.split(|b| *b == 0)
                .any(|kv| marks.contains(kv))
                .then(|| stat_of(pid).map(|(g, _)| g))
                .flatten()
        })
        .filter(|g| i32::try_from(*g).is_ok_and(|g| g > 1 && g != own))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_process_has_a_start_time_and_a_stranger_group_is_not_ours() {
        let me = std::process::id();
        assert!(start_time(me).is_some());
        let agent = agency_core::AgentId(uuid::Uuid::new_v4());
        // The test process's group carries no agent mark, and a start time
        // that is not the leader's does not match.
        let pgid = nix::unistd::getpgrp().as_raw() as u32;
        let leader_started = start_time(pgid).unwrap_or(0);
        assert!(!still_ours(agent, pgid, leader_started + 1));
        assert!(!still_ours(agent, 1, 0));
        assert!(!still_ours(agent, 0, 0));
    }
}
