//! The problem detector's clock: every `[watch] tick_seconds` the daemon
//! runs the service's detection tick (`agency_service::problems`), telling
//! it which live runs' processes are gone — the one fact only the daemon
//! can see. A run counts as gone only when two ticks in a row found no
//! process in its group: an agent that just exited normally is recorded
//! as ended within moments, and must not be reported for that.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use agency_core::AgentId;
use agency_service::System;
use tokio::task::JoinHandle;

/// Start the periodic detection.
pub(crate) fn spawn(svc: Arc<System>, tick_seconds: u32) -> JoinHandle<()> {
    let period = Duration::from_secs(u64::from(tick_seconds.max(1)));
    tokio::spawn(async move {
        let mut missing_before: BTreeSet<AgentId> = BTreeSet::new();
        loop {
            tokio::time::sleep(period).await;
            let s = svc.clone();
            let before = std::mem::take(&mut missing_before);
            let done = tokio::task::spawn_blocking(move || {
                let missing: BTreeSet<AgentId> = s
                    .live_agent_processes()
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|p| {
                        u32::try_from(p.pgid)
                            .is_ok_and(|g| !agency_sandbox::process_group::group_alive(g))
                    })
                    .map(|p| p.agent)
                    .collect();
                let gone: Vec<AgentId> = missing.intersection(&before).copied().collect();
                if let Err(e) = s.problems_tick(&gone) {
                    tracing::warn!(error = %e, "failed to look for problems; trying again at the next tick");
                }
                missing
            })
            .await;
            if let Ok(m) = done {
                missing_before = m;
            }
        }
    })
}
