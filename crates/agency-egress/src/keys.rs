//! The keys of the processes the daemon runs for agents: an egress
//! proxy password per stdio MCP server and per organisation command run.

use std::collections::HashMap;
use std::sync::Mutex;

use agency_core::{AgentId, Principal};

/// The proxy passwords of the processes the daemon runs for agents, in
/// memory only (a restart reaps every agent, so none survives one), keyed
/// by hash: the stdio MCP servers whose manifest declares `egress`
/// (`mcp_stdio.rs`), bound to the agent (with its handler) and server; and
/// running organisation command tools (`org_tools/command.rs`), bound to
/// the calling agent: the tool reaches what the agent's handler may reach,
/// for as long as the call runs.
#[derive(Debug, Default)]
pub struct EgressKeys {
    servers: Mutex<HashMap<blake3::Hash, (Principal, String)>>,
    tools: Mutex<HashMap<blake3::Hash, Principal>>,
}

impl EgressKeys {
    /// An egress key for the server the daemon starts for `who`: the
    /// proxy password (user [`crate::MCP_PROXY_USER`]) that lets the server reach
    /// its manifest's `egress` hosts and nothing else.
    pub fn issue_server(&self, who: Principal, server: &str) -> String {
        let key = fresh_key("age_");
        lock(&self.servers).insert(blake3::hash(key.as_bytes()), (who, server.to_owned()));
        key
    }

    /// The agent and server a server's key was issued for, if it is live.
    pub fn server_of(&self, key: &str) -> Option<(Principal, String)> {
        lock(&self.servers)
            .get(&blake3::hash(key.as_bytes()))
            .cloned()
    }

    /// An egress key for one run of an organisation command tool called by
    /// `who` (proxy user [`crate::TOOL_PROXY_USER`]); dropped with
    /// [`EgressKeys::drop_tool`] when the run ends.
    pub fn issue_tool(&self, who: Principal) -> String {
        let key = fresh_key("agt_");
        lock(&self.tools).insert(blake3::hash(key.as_bytes()), who);
        key
    }

    /// The agent a tool's key was issued for, while its run lasts.
    pub fn tool_of(&self, key: &str) -> Option<Principal> {
        lock(&self.tools)
            .get(&blake3::hash(key.as_bytes()))
            .copied()
    }

    pub fn drop_tool(&self, key: &str) {
        lock(&self.tools).remove(&blake3::hash(key.as_bytes()));
    }

    /// The agent ended: every key issued for it dies with it.
    pub fn forget_agent(&self, agent: AgentId) {
        let of = |who: &Principal| matches!(who, Principal::Agent { agent: a, .. } if *a == agent);
        lock(&self.servers).retain(|_, (who, _)| !of(who));
        lock(&self.tools).retain(|_, who| !of(who));
    }
}

fn fresh_key(prefix: &str) -> String {
    format!(
        "{prefix}{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// A panic while holding a map leaves it consistent (one insert or
/// remove): keep using it.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_egress_key_names_its_agent_and_server_until_the_agent_ends() {
        let keys = EgressKeys::default();
        let h = agency_core::HandlerId(uuid::Uuid::new_v4());
        let (a, b) = (AgentId(uuid::Uuid::new_v4()), AgentId(uuid::Uuid::new_v4()));
        let ka = keys.issue_server(Principal::agent(h, a), "web");
        let kb = keys.issue_server(Principal::agent(h, b), "web");
        let ta = keys.issue_tool(Principal::agent(h, a));
        assert_eq!(
            keys.server_of(&ka),
            Some((Principal::agent(h, a), "web".to_owned()))
        );
        assert_eq!(keys.tool_of(&ta), Some(Principal::agent(h, a)));
        assert_eq!(keys.server_of("age_made_up"), None);
        assert_eq!(keys.server_of(&ta), None, "a tool's key is not a server's");
        keys.forget_agent(a);
        assert_eq!(keys.server_of(&ka), None, "the agent ended");
        assert_eq!(keys.tool_of(&ta), None, "the agent ended");
        assert!(keys.server_of(&kb).is_some(), "another agent's key stays");
    }

    #[test]
    fn a_tool_key_dies_with_its_run() {
        let keys = EgressKeys::default();
        let who = Principal::agent(
            agency_core::HandlerId(uuid::Uuid::new_v4()),
            AgentId(uuid::Uuid::new_v4()),
        );
        let k = keys.issue_tool(who);
        keys.drop_tool(&k);
        assert_eq!(keys.tool_of(&k), None);
    }
}
