//! Agent processes: each starts in a process group of its own, so that
//! stopping it reaches every process it started; stopping is SIGTERM to the
//! group, a grace period, then SIGKILL. Killing an already-gone group is not
//! an error, so a stop can be repeated safely.

use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

/// Send `signal` to process group `pgid`; true if the group still existed.
pub(crate) fn signal_group(pgid: u32, signal: Signal) -> bool {
    let Ok(raw) = i32::try_from(pgid) else {
        return false;
    };
    if raw <= 1 {
        // Never signal group 0 (our own) or 1 (init's): a bug must not
        // become a kill of the daemon or the machine.
        return false;
    }
    !matches!(killpg(Pid::from_raw(raw), signal), Err(Errno::ESRCH))
}

/// Whether any process of the group is still alive.
pub(crate) fn group_alive(pgid: u32) -> bool {
    let Ok(raw) = i32::try_from(pgid) else {
        return false;
    };
    raw > 1 && !matches!(killpg(Pid::from_raw(raw), None), Err(Errno::ESRCH))
}

/// SIGTERM the group, wait up to `grace` for it to empty, then SIGKILL.
pub(crate) async fn stop_group(pgid: u32, grace: Duration) {
    if !signal_group(pgid, Signal::SIGTERM) {
        return;
    }
    let deadline = tokio::time::Instant::now() + grace;
    while tokio::time::Instant::now() < deadline {
        if !group_alive(pgid) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    signal_group(pgid, Signal::SIGKILL);
}
