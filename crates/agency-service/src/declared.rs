//! The extra MCP servers and repos the configuration declares. A grant on
//! a name the configuration does not declare would only make the daemon
//! warn at every spawn, so it is refused, naming the declared ones. The
//! daemon tells the service the names at start; a service that was never
//! told (tests, `agency init`) checks nothing.

use std::sync::Arc;

use agency_core::Resource;

use crate::service::settings::Declared;
use crate::service::{Service, System};
use crate::{Result, ServiceError};

impl Service {
    /// The names declared, if the daemon said.
    pub(crate) fn declared(&self) -> Option<Arc<Declared>> {
        self.declared
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Refuse a grant on an MCP server or repo the configuration does not
    /// declare. Only the user is told which names are declared: an agent
    /// learns nothing about servers it holds no capability on.
    pub(crate) fn check_declared(&self, resource: &Resource, to_user: bool) -> Result<()> {
        let Some(d) = self.declared() else {
            return Ok(());
        };
        let (kind, what, name, names) = match resource {
            Resource::McpServer(n) => ("mcp_server", "server", n, &d.mcp_servers),
            Resource::Repo(n) => ("repo", "repo", n, &d.repos),
            // Tools are checked against the applied organisations where they
            // are granted (`agency up`), not against agency.toml.
            Resource::Kb(_) | Resource::Mail(_) | Resource::Egress(_) | Resource::Tool(_) => {
                return Ok(());
            }
        };
        if names.contains(name) {
            return Ok(());
        }
        let section = if kind == "repo" {
            "repos"
        } else {
            "mcp_servers"
        };
        if !to_user {
            return Err(ServiceError::invalid(format!(
                "failed to grant {kind}:{name}: no such {what} in agency.toml"
            )));
        }
        let list = if names.is_empty() {
            format!("none are declared; add [{section}.{name}] first")
        } else {
            format!(
                "declared: {}",
                names.iter().cloned().collect::<Vec<_>>().join(", ")
            )
        };
        Err(ServiceError::invalid(format!(
            "failed to grant {kind}:{name}: no such {what} in agency.toml ({list})"
        )))
    }
}

impl System {
    /// Daemon: the names the configuration declares (at start, and again
    /// when `agency reload` changes them).
    pub fn set_declared(&self, declared: Declared) {
        *self.declared.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(declared));
    }
}
