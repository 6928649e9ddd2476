//! Process groups: how Agency stops a child together with everything it
//! started. The one place that signals a group, for the supervisor's
//! agents, the built-in agent's `bash` tool, the repos cache's `git`, and
//! the daemon's organisation tools and extra MCP servers.
//!
//! A child is made the leader of a group of its own with the standard
//! library's `process_group(0)` (on std's or tokio's `Command`), which
//! `posix_spawn` can do without the slow fork a `setsid` in a `pre_exec`
//! hook would force. The group is then stopped here: [`kill_group`] at
//! once, or [`stop_groups`] with SIGTERM, a grace period, then SIGKILL. A
//! group that is gone is not an error, so a stop can be repeated; group 0
//! (the caller's own) and 1 (init's) are never signalled, so that a bug
//! cannot become a kill of the daemon or of the machine.
//!
//! Why not the `process-wrap` crate (in the lock file through rmcp): it
//! signals only the group of a child it spawned and still holds, while the
//! supervisor stops groups by the id it recorded (after their leader was
//! reaped, and groups a previous daemon left running), and the `bash` tool
//! kills its group before it reaps the leader, so that the id cannot have
//! been reused, which `process-wrap`'s `wait` (reap, then reach the group)
//! cannot express.

use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// How often [`stop_groups`] looks whether the groups are empty yet.
const POLL: Duration = Duration::from_millis(20);

/// The group id as nix takes it; `None` for 0, 1 and ids out of range.
fn group_pid(pgid: u32) -> Option<Pid> {
    i32::try_from(pgid)
        .ok()
        .filter(|raw| *raw > 1)
        .map(Pid::from_raw)
}

/// Send `signal` to every process of group `pgid`; true if the group
/// still existed (a refusal other than "no such group" counts as existing).
pub fn signal_group(pgid: u32, signal: Signal) -> bool {
    group_pid(pgid).is_some_and(|g| !matches!(killpg(g, signal), Err(Errno::ESRCH)))
}

/// SIGKILL every process of group `pgid`, if it still exists.
pub fn kill_group(pgid: u32) {
    signal_group(pgid, Signal::SIGKILL);
}

/// Whether any process of group `pgid` is still alive (an unreaped leader
/// counts: reap it before waiting for its group to empty).
pub fn group_alive(pgid: u32) -> bool {
    group_pid(pgid).is_some_and(|g| !matches!(killpg(g, None), Err(Errno::ESRCH)))
}

/// Stop the groups, all at once: SIGTERM to each, up to `grace` for them
/// to empty, then SIGKILL to what is left. Blocking: async callers run it
/// with `spawn_blocking`.
pub fn stop_groups(groups: &[u32], grace: Duration) {
    let live: Vec<u32> = groups
        .iter()
        .copied()
        .filter(|g| signal_group(*g, Signal::SIGTERM))
        .collect();
    let deadline = Instant::now() + grace;
    while live.iter().any(|g| group_alive(*g)) {
        if Instant::now() >= deadline {
            for g in &live {
                kill_group(*g);
            }
            return;
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::{Child, Command};

    /// `script` run by `sh` as the leader of a group of its own, with a
    /// second process in the group; its leader is reaped on a thread of
    /// its own as soon as it exits, so that the group can empty.
    fn group(script: &str) -> (u32, std::thread::JoinHandle<()>) {
        let mut child: Child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .process_group(0)
            .spawn()
            .expect("sh starts");
        let pgid = child.id();
        let reaper = std::thread::spawn(move || {
            let _ = child.wait();
        });
        (pgid, reaper)
    }

    fn gone_within(pgid: u32, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while group_alive(pgid) {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(POLL);
        }
        true
    }

    #[test]
    fn a_group_that_obeys_sigterm_stops_within_the_grace() {
        let (pgid, reaper) = group("sleep 300 & wait");
        assert!(group_alive(pgid));
        let began = Instant::now();
        stop_groups(&[pgid], Duration::from_secs(20));
        assert!(
            began.elapsed() < Duration::from_secs(10),
            "waited out the grace"
        );
        assert!(gone_within(pgid, Duration::from_secs(5)));
        reaper.join().expect("reaped");
        // Gone: stopping it again is no error, and takes no grace.
        assert!(!signal_group(pgid, Signal::SIGTERM));
        let again = Instant::now();
        stop_groups(&[pgid], Duration::from_secs(20));
        assert!(again.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn a_group_that_ignores_sigterm_is_killed_after_the_grace() {
        // Both the shell and its background child ignore SIGTERM.
        let (pgid, reaper) = group("trap '' TERM; sleep 300 & wait");
        std::thread::sleep(Duration::from_millis(200));
        let began = Instant::now();
        stop_groups(&[pgid], Duration::from_millis(300));
        assert!(began.elapsed() >= Duration::from_millis(300));
        assert!(
            gone_within(pgid, Duration::from_secs(5)),
            "SIGKILL followed"
        );
        reaper.join().expect("reaped");
    }

    #[test]
    fn kill_group_reaches_every_process_of_the_group() {
        let (pgid, reaper) = group("sleep 300 & sleep 300");
        kill_group(pgid);
        assert!(gone_within(pgid, Duration::from_secs(5)));
        reaper.join().expect("reaped");
    }

    #[test]
    fn our_own_group_and_inits_are_never_signalled() {
        for g in [0, 1, u32::MAX] {
            assert!(!signal_group(g, Signal::SIGKILL));
            assert!(!group_alive(g));
        }
    }
}
