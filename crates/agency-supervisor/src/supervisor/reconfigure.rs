//! What changes under a running supervisor: `agency reload`'s `[agents]`
//! settings and sandbox, and a handler's keep-warm setting.
//!
//! A reload replaces the dispatcher's `[agents]` settings whole (the
//! daemon passes the old values for those that need a restart, so only
//! the live ones change) and discards the standby sandbox, which was built
//! under the old `[sandbox]` directories: the next agent gets a policy
//! built from the new ones.
//!
//! When the user turns a handler's keep-warm off (`agency keep-warm H
//! off`), its agent parked in `mail_wait` is released as it would be for
//! a handler waiting for its slot: the wait answers `released`, the agent
//! saves its state and ends normally, and is stopped only if it has not
//! after the release grace. An agent still working ends at its next wait.

use agency_core::HandlerId;
use tokio::sync::mpsc;

use super::{Msg, State};
use agency_config::AgentsConfig;

/// How `agency reload` reaches the dispatcher.
#[derive(Debug, Clone)]
pub struct Reconfigure(pub(super) mpsc::UnboundedSender<Msg>);

impl Reconfigure {
    /// The dispatcher's `[agents]` settings from now on.
    pub fn agents(&self, cfg: AgentsConfig) {
        let _ = self.0.send(Msg::Reloaded(Box::new(cfg)));
    }
}

impl State {
    pub(super) async fn reloaded(&mut self, cfg: AgentsConfig) {
        self.cfg = cfg;
        if let Some(sb) = self.standby.take() {
            sb.discard(true).await;
        }
    }

    pub(super) async fn keep_warm_changed(&mut self, h: HandlerId) {
        let Some(run) = self.running.get(&h) else {
            return;
        };
        // Only an agent started warm can be parked; one being stopped
        // already needs nothing more.
        if run.spec.keep_warm_ms == 0 || run.stop_reason.is_some() {
            return;
        }
        let agent = run.agent;
        let defaults = self.cfg.keep_warm_defaults();
        let effective = self
            .blocking(move |s| s.keep_warm_effective(h, defaults))
            .await;
        // Still kept warm (for another time: its next agent gets that), or
        // the setting could not be read: the agent keeps its wait.
        if !matches!(effective, Ok(None)) {
            return;
        }
        if self.running.get(&h).is_none_or(|r| r.agent != agent) {
            return;
        }
        tracing::info!(handler = %h, agent = %agent, "warm agent released: its keep-warm was turned off");
        if self.warm.release(agent) {
            let tx = self.tx.clone();
            tokio::spawn(async move {
                tokio::time::sleep(crate::warm::RELEASE_GRACE).await;
                let _ = tx.send(Msg::ReleaseDeadline(agent));
            });
        }
    }
}
