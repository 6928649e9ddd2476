//! Egress: whether an agent may connect to a host and
//! port through the daemon's forward proxy, and the audit record of every
//! connection allowed or refused.
//!
//! The decision is the handler's live `egress:PATTERN` capabilities
//! (`agency_core::egress`) and nothing else: no model host is implicitly
//! reachable, since every agent reaches its model through the daemon's
//! model gateway. The check is a read;
//! the record is written when the daemon knows how the connection ends
//! (a name granted may still resolve to a local address), so that each
//! connection gets one record and a refused name is never resolved.

use agency_core::egress::EgressPattern;
use agency_core::{
    CapabilityId, EgressTarget, HandlerId, Level, Principal, Resource, ResourceKind,
};
use agency_store::{CapabilityRow, Tx};

use crate::Result;
use crate::render::log;
use crate::render::{Author, render_audit_log_file};
use crate::service::{Caller, Service, authenticate};

/// What the check found for one destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EgressDecision {
    /// The user is bound by no capability.
    User,
    /// A live capability of the agent's handler allows it.
    Granted {
        capability: CapabilityId,
        pattern: EgressPattern,
    },
    /// An extra MCP server launched by Agency for the agent may reach it:
    /// its manifest's `egress` list has `pattern`, and the agent's handler
    /// holds a capability on `mcp_server:server` now.
    McpManifest {
        server: String,
        pattern: EgressPattern,
    },
    /// Nothing allows it; `message` says so and how to get it.
    Refused { message: String },
}

impl EgressDecision {
    pub fn allowed(&self) -> bool {
        !matches!(self, EgressDecision::Refused { .. })
    }

    /// Whether the addresses the host resolves to must be checked (none
    /// local) before connecting: a granted host name, not an address
    /// granted as written.
    pub fn check_resolved(&self) -> bool {
        matches!(
            self,
            EgressDecision::Granted { pattern, .. } | EgressDecision::McpManifest { pattern, .. }
                if !pattern.is_address()
        )
    }
}

impl Service {
    /// Whether `who` may connect to `host:port` through the egress proxy.
    /// An agent needs a live `egress` capability (Read or more) of its
    /// handler whose pattern matches; the user may connect anywhere. Reads
    /// only: the daemon records the connection with [`egress_record`].
    ///
    /// [`egress_record`]: Service::egress_record
    pub fn egress_check(&self, who: Principal, host: &str, port: u16) -> Result<EgressDecision> {
        let target = EgressTarget::new(host, port)?;
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            let Caller::Handler { row, .. } = &caller else {
                return Ok(EgressDecision::User);
            };
            if let Some((capability, pattern)) = matching_grant(tx, row.id, &target)? {
                return Ok(EgressDecision::Granted {
                    capability,
                    pattern,
                });
            }
            Ok(EgressDecision::Refused {
                message: format!(
                    "failed to connect to {target}: your handler holds no egress capability for it; ask your boss to grant egress:{}",
                    EgressPattern::exact(&target)
                ),
            })
        })
    }

    /// Whether extra MCP server `server`, launched by Agency for agent
    /// `who`, may connect to `host:port`: one of `manifest` (the server's
    /// manifest `egress` list, from the daemon's configuration) matches,
    /// and `who`'s handler still holds a capability on `mcp_server:server`.
    /// The agent's own `egress` capabilities count for nothing here, and
    /// the manifest for nothing in [`egress_check`]: each credential gets
    /// its own list. Reads only.
    ///
    /// [`egress_check`]: Service::egress_check
    pub fn mcp_egress_check(
        &self,
        who: Principal,
        server: &str,
        manifest: &[EgressPattern],
        host: &str,
        port: u16,
    ) -> Result<EgressDecision> {
        let target = EgressTarget::new(host, port)?;
        // A capability revoked since the launch: refused (and recorded)
        // like any other destination.
        if let Err(e) = self.mcp_server_check(who, server) {
            if e.kind() == "permission_denied" {
                return Ok(EgressDecision::Refused {
                    message: e.to_string(),
                });
            }
            return Err(e);
        }
        if let Some(p) = manifest.iter().find(|p| p.matches(&target)) {
            return Ok(EgressDecision::McpManifest {
                server: server.to_owned(),
                pattern: p.clone(),
            });
        }
        Ok(EgressDecision::Refused {
            message: format!(
                "failed to connect to {target}: the manifest of MCP server {server} declares no egress for it; the user may add {} to egress in [mcp_servers.{server}.manifest]",
                EgressPattern::exact(&target)
            ),
        })
    }

    /// Record one connection in the agent's handler's audit log: allowed as
    /// `decision` says, or refused (`refusal`: why, when the check allowed
    /// it but the daemon did not, e.g. the name resolved to a local
    /// address). Nothing is recorded for the user.
    pub fn egress_record(
        &self,
        who: Principal,
        host: &str,
        port: u16,
        decision: &EgressDecision,
        refusal: Option<&str>,
    ) -> Result<()> {
        let target = EgressTarget::new(host, port)?;
        let summary = match (decision, refusal) {
            (EgressDecision::User, _) => return Ok(()),
            (_, Some(why)) => format!("egress to {target} refused: {}", clip(why)),
            (EgressDecision::Refused { .. }, None) => {
                format!("egress to {target} refused: no egress capability matches")
            }
            (
                EgressDecision::Granted {
                    capability,
                    pattern,
                },
                None,
            ) => {
                format!("egress to {target} allowed by capability {capability} (egress:{pattern})")
            }
            (EgressDecision::McpManifest { server, pattern }, None) => {
                format!(
                    "egress to {target} by MCP server {server} allowed by its manifest (egress {pattern})"
                )
            }
        };
        self.write(|op| {
            let caller = authenticate(op.tx, who)?;
            let Caller::Handler { row, agent } = &caller else {
                return Ok(());
            };
            log(op, row.id, Some(*agent), summary)?;
            render_audit_log_file(op, row.id, Author::default())
        })
    }
}

/// A refusal reason comes from the daemon (resolver errors included): one
/// line, bounded, so a record stays small.
fn clip(why: &str) -> String {
    const MAX: usize = 300;
    let one_line: String = why
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match one_line.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &one_line[..i]),
        None => one_line,
    }
}

/// The oldest live egress capability (Read or more) of `holder` whose
/// pattern matches `target`.
fn matching_grant(
    tx: &mut dyn Tx,
    holder: HandlerId,
    target: &EgressTarget,
) -> Result<Option<(CapabilityId, EgressPattern)>> {
    Ok(tx
        .capabilities_of_kind(holder, ResourceKind::Egress)?
        .into_iter()
        .filter(|c| c.level >= Level::Read)
        .find_map(|c| {
            let p = pattern_of(&c)?;
            p.matches(target).then_some((c.id, p))
        }))
}

fn pattern_of(c: &CapabilityRow) -> Option<EgressPattern> {
    match &c.resource {
        Resource::Egress(k) => EgressPattern::parse(k).ok(),
        _ => None,
    }
}

/// The granter's live capabilities a grant of `resource` may derive from:
/// those on the resource itself, and for egress every pattern that covers
/// the one granted (a holder of `*.github.com` may grant `api.github.com`,
/// a restriction like granting a lower level).
pub(crate) fn grant_sources(
    tx: &mut dyn Tx,
    holder: HandlerId,
    resource: &Resource,
) -> Result<Vec<CapabilityRow>> {
    let Resource::Egress(key) = resource else {
        return Ok(tx.capabilities_on(holder, resource)?);
    };
    let wanted = EgressPattern::parse(key)?;
    Ok(tx
        .capabilities_of_kind(holder, ResourceKind::Egress)?
        .into_iter()
        .filter(|c| pattern_of(c).is_some_and(|p| p.covers(&wanted)))
        .collect())
}
