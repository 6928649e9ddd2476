//! When each agent last called Agency over MCP. The token guard touches it
//! on every authenticated `/mcp` request; the supervisor's watchdog stops an
//! agent that stayed silent longer than `idle_timeout_ms` (an LLM call that
//! hangs, a process stuck on something else).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use agency_core::AgentId;

#[derive(Debug, Default)]
pub struct Activity(Mutex<HashMap<AgentId, Instant>>);

impl Activity {
    pub fn touch(&self, agent: AgentId) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(agent, Instant::now());
    }

    pub fn last(&self, agent: AgentId) -> Option<Instant> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&agent)
            .copied()
    }

    pub fn forget(&self, agent: AgentId) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&agent);
    }
}
