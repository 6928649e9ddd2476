//! The supervisor's [`AgentHooks`], wired to the parts that keep state per
//! agent: the launchers' nonces, the egress proxy's keys, and the stdio MCP
//! servers the daemon runs for agents.

use std::sync::Arc;

use agency_core::AgentId;

use agency_egress::EgressKeys;
use agency_supervisor::AgentHooks;
use agency_tools::{LaunchNonces, StdioServers};

#[derive(Debug)]
pub(crate) struct AgentParts {
    pub nonces: Arc<LaunchNonces>,
    pub keys: Arc<EgressKeys>,
    pub stdio: Arc<StdioServers>,
}

impl AgentHooks for AgentParts {
    fn launch_nonce(&self, agent: AgentId, server: &str) -> String {
        self.nonces.issue(agent, server)
    }

    fn agent_ended(&self, agent: AgentId) {
        self.nonces.forget_agent(agent);
        self.keys.forget_agent(agent);
        let stdio = self.stdio.clone();
        // Stopping a server waits for its process; the supervisor does not.
        tokio::spawn(async move { stdio.forget_agent(agent).await });
    }
}
