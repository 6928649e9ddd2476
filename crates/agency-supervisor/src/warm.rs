//! The registry of warm agents (seed 004's option C): an
//! agent whose work is done and that waits for mail in `mail_wait` is
//! *parked*. It keeps its slot (warm agents are live agents, counted
//! against `max_concurrent`), the idle watchdog leaves it alone, and when a
//! handler waits for a slot the supervisor releases the longest-idle
//! parked agent: its wait answers `released`, it ends normally, and only
//! if it has not exited within [`RELEASE_GRACE`] is it stopped as any
//! other agent (SIGTERM, grace, SIGKILL).
//!
//! Shared by the MCP tool side (through [`agency_mcp::WarmPool`]) and the
//! supervisor; in memory only, since parked agents die with the daemon.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use agency_core::{AgentId, HandlerId};
use agency_mcp::{AgentIdentity, CancellationToken, WarmPool};

/// How long a released agent has to end its run before it is stopped: a
/// parked agent makes no model call, so it needs only to save and exit.
pub const RELEASE_GRACE: Duration = Duration::from_secs(10);

#[derive(Debug)]
struct Entry {
    /// Waits in progress (an agent may have more than one).
    waits: u32,
    /// Since when it has been parked (`None`: not parked now).
    since: Option<Instant>,
    /// Cancelled when the supervisor wants its slot back.
    release: CancellationToken,
}

/// Which agents are warm, since when, and which were asked to yield.
#[derive(Debug, Default)]
pub struct WarmRegistry {
    agents: Mutex<HashMap<AgentId, Entry>>,
    /// Signalled when an agent parks. A handler may have queued for a slot
    /// while every agent was still busy (nothing to release then); the
    /// supervisor must look again once one of them parks, or the queued
    /// handler waits for a whole keep-warm time.
    parked: tokio::sync::Notify,
}

impl WarmRegistry {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<AgentId, Entry>> {
        self.agents.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Resolves after an agent has parked (a park before the call counts:
    /// `Notify` keeps one permit, so none is missed).
    pub async fn parked(&self) {
        self.parked.notified().await;
    }

    /// Whether `agent` waits in `mail_wait` now (the idle watchdog spares it).
    pub fn is_parked(&self, agent: AgentId) -> bool {
        self.map().get(&agent).is_some_and(|e| e.waits > 0)
    }

    /// Release the parked agent of `among` that has been idle longest and
    /// was not released yet; returns it.
    pub fn release_longest_idle(&self, among: impl Iterator<Item = AgentId>) -> Option<AgentId> {
        let map = self.map();
        let (agent, e) = among
            .filter_map(|a| map.get(&a).map(|e| (a, e)))
            .filter(|(_, e)| !e.release.is_cancelled())
            .filter_map(|(a, e)| e.since.map(|s| (a, e, s)))
            .min_by_key(|(_, _, s)| *s)
            .map(|(a, e, _)| (a, e))?;
        e.release.cancel();
        Some(agent)
    }

    /// Release `agent` whatever its idle time (its keep-warm was turned
    /// off): a wait in progress answers `released` now, one begun later at
    /// once. Returns whether it was parked (so ends soon).
    pub fn release(&self, agent: AgentId) -> bool {
        let mut map = self.map();
        let e = map.entry(agent).or_insert_with(|| Entry {
            waits: 0,
            since: None,
            release: CancellationToken::new(),
        });
        e.release.cancel();
        e.waits > 0
    }

    /// Agents released and not yet gone: each frees a slot soon.
    pub fn releasing(&self) -> usize {
        self.map()
            .values()
            .filter(|e| e.release.is_cancelled())
            .count()
    }

    /// The agent has exited: nothing of it is kept.
    pub fn forget(&self, agent: AgentId) {
        self.map().remove(&agent);
    }
}

/// How long `h`'s agent stays warm, for its `SpawnSpec`: the effective
/// keep-warm time the spawn's preparation read (none when that read
/// failed: cold, the behaviour without warm agents) for a runtime that
/// keeps agents warm, else 0.
pub fn keep_warm_ms(effective: Option<Duration>, runtime: (&str, bool), h: HandlerId) -> u64 {
    let (name, keeps_warm) = runtime;
    let ms = effective.map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    if ms > 0 && !keeps_warm {
        tracing::info!(handler = %h, runtime = name, "keep-warm ignored: this runtime's agents exit when their work is done");
        return 0;
    }
    ms
}

/// Every slot is taken and `waiting` handlers wait for one: release as
/// many parked agents of `running` as are needed beyond those already
/// released (longest idle first). Returns the agents released now.
pub fn yield_slots(
    reg: &WarmRegistry,
    waiting: usize,
    running: impl Iterator<Item = AgentId> + Clone,
) -> Vec<AgentId> {
    let mut out = Vec::new();
    for _ in reg.releasing()..waiting {
        match reg.release_longest_idle(running.clone()) {
            Some(a) => out.push(a),
            None => break,
        }
    }
    out
}

impl WarmPool for WarmRegistry {
    fn park(&self, caller: &AgentIdentity) -> CancellationToken {
        let mut map = self.map();
        let e = map.entry(caller.agent).or_insert_with(|| Entry {
            waits: 0,
            since: None,
            release: CancellationToken::new(),
        });
        e.waits += 1;
        let newly = e.since.is_none();
        e.since.get_or_insert_with(Instant::now);
        let release = e.release.clone();
        drop(map);
        if newly {
            self.parked.notify_one();
        }
        release
    }

    fn unpark(&self, caller: &AgentIdentity) {
        if let Some(e) = self.map().get_mut(&caller.agent) {
            e.waits = e.waits.saturating_sub(1);
            if e.waits == 0 {
                e.since = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn who() -> AgentIdentity {
        AgentIdentity {
            handler: HandlerId::new_random(),
            agent: AgentId::new_random(),
            workspace: None,
        }
    }

    #[test]
    fn the_longest_idle_parked_agent_is_released_once() {
        let r = WarmRegistry::default();
        let (a, b, busy) = (who(), who(), who());
        let ta = r.park(&a);
        std::thread::sleep(Duration::from_millis(2));
        let tb = r.park(&b);
        assert!(r.is_parked(a.agent) && r.is_parked(b.agent));
        assert!(!r.is_parked(busy.agent));
        let all = [a.agent, b.agent, busy.agent];
        assert_eq!(r.release_longest_idle(all.into_iter()), Some(a.agent));
        assert!(ta.is_cancelled() && !tb.is_cancelled());
        assert_eq!(r.releasing(), 1);
        // Not twice: the next one is b.
        assert_eq!(r.release_longest_idle(all.into_iter()), Some(b.agent));
        assert_eq!(r.release_longest_idle(all.into_iter()), None);
        // A wait that begins after the release answers at once.
        assert!(r.park(&a).is_cancelled());
        r.forget(a.agent);
        r.forget(b.agent);
        assert_eq!(r.releasing(), 0);
    }

    #[test]
    fn an_agent_that_stopped_waiting_is_not_parked_and_not_released() {
        let r = WarmRegistry::default();
        let a = who();
        let _t = r.park(&a);
        let _t2 = r.park(&a);
        r.unpark(&a);
        assert!(r.is_parked(a.agent));
        r.unpark(&a);
        assert!(!r.is_parked(a.agent));
        assert_eq!(r.release_longest_idle([a.agent].into_iter()), None);
    }
}
