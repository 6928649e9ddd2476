//! Capabilities: grant (derived from the granter's own, restricted at
//! will, scoped to the outcome it is for: the grantee's root or an outcome
//! below it) and listing.

use std::collections::BTreeSet;

use agency_core::capability::{GrantScopeFacts, grant_scope};
use agency_core::{
    CapabilityId, HandlerId, HeldCap, Level, OutcomeId, Principal, Resource, choose_grant_source,
};
use agency_store::{CapOrigin, HandlerStatus, NewCapability, RevokeSelector, Tx};

use crate::Result;
use crate::access::{file_at_level, visible_outcome};
use crate::error::ServiceError;
use crate::events::Event;
use crate::render::log;
use crate::render::{Author, render_audit_log_file};
use crate::service::{Caller, Op, Service, System, authenticate};
use crate::views::GrantRequest;

impl Service {
    /// Grant a capability to a direct underling (the user may grant to any
    /// active handler). The new capability is derived from one the granter
    /// holds at least at that level and that is delegatable, and is scoped
    /// to the outcome delegated to the grantee.
    pub fn grant(
        &self,
        who: Principal,
        grantee: HandlerId,
        req: &GrantRequest,
    ) -> Result<CapabilityId> {
        self.grant_for(who, grantee, req, None)
    }

    /// Grant for a named outcome: the grantee's root when
    /// `outcome` is `None`, else an unfinished outcome at or below it. The
    /// grant, and everything later derived from it, is revoked when that
    /// outcome finishes: a boss escalating for an underling's outcome
    /// names it, so the capability it obtains to pass down ends with it.
    pub fn grant_for(
        &self,
        who: Principal,
        grantee: HandlerId,
        req: &GrantRequest,
        outcome: Option<OutcomeId>,
    ) -> Result<CapabilityId> {
        self.check_declared(&req.resource, matches!(who, Principal::User))?;
        self.write(|op| {
            let caller = authenticate(op.tx, who)?;
            grant_in(op, &caller, grantee, req, outcome)
        })
    }

    /// The caller's live capabilities (for the user: those of `holder`).
    pub fn permissions_list(
        &self,
        who: Principal,
        holder: Option<HandlerId>,
    ) -> Result<Vec<agency_api::Capability>> {
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            let h = match (&caller, holder) {
                (Caller::Handler { row, .. }, None) => row.id,
                (Caller::Handler { row, .. }, Some(h)) if h == row.id => h,
                (Caller::Handler { .. }, Some(_)) => {
                    return Err(ServiceError::denied(
                        "failed to list capabilities: a handler may list only its own",
                    ));
                }
                (Caller::User, Some(h)) => h,
                (Caller::User, None) => {
                    return Err(ServiceError::invalid(
                        "failed to list capabilities: name the handler whose capabilities to list",
                    ));
                }
            };
            Ok(tx
                .capabilities_held(h)?
                .iter()
                .map(crate::wire::capability)
                .collect())
        })
    }
}

impl Service {
    /// Whether the caller may clone repo `name` from the repo cache: a
    /// handler needs a live capability on it (Read or more); the user may.
    pub fn repo_check(&self, who: Principal, name: &str) -> Result<()> {
        agency_core::validate::check_name("repo", name)?;
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            let Caller::Handler { row, .. } = &caller else { return Ok(()) };
            let held = tx.capabilities_on(row.id, &Resource::Repo(name.to_owned()))?;
            if held.iter().any(|c| c.level >= Level::Read) {
                return Ok(());
            }
            Err(ServiceError::denied(format!(
                "failed to clone repo {name}: you hold no capability on it; ask your boss to grant read on repo {name}"
            )))
        })
    }
}

impl Service {
    /// The user revokes a capability, and with it every capability derived
    /// from it (transitively). Mail capabilities follow the handler tree and
    /// cannot be revoked this way. Returns the ids revoked.
    pub fn revoke(&self, who: Principal, id: CapabilityId) -> Result<Vec<CapabilityId>> {
        if !who.is_user() {
            return Err(ServiceError::denied(
                "failed to revoke a capability: only the user may revoke; a capability you granted ends with the outcome it is scoped to",
            ));
        }
        self.write(|op| {
            let cap = op
                .tx
                .capability(id)?
                .filter(|c| c.revoked_at.is_none())
                .ok_or_else(|| ServiceError::not_found("live capability", id))?;
            if !cap.resource.grantable() {
                return Err(ServiceError::invalid(format!(
                    "failed to revoke capability {id} ({}): mail capabilities follow the handler tree",
                    cap.resource
                )));
            }
            let revoked = op.tx.revoke(&RevokeSelector::Ids(vec![id]), op.now)?;
            let holders: BTreeSet<HandlerId> = revoked.iter().map(|c| c.holder).collect();
            for c in &revoked {
                log(
                    op,
                    c.holder,
                    None,
                    format!("capability {} ({} {}) revoked by the user", c.id, c.level, c.resource),
                )?;
                op.emit(Event::CapabilityRevoked {
                    capability: c.id,
                    holder: c.holder,
                    resource: c.resource.clone(),
                });
            }
            for h in holders {
                render_audit_log_file(op, h, Author::default())?;
            }
            Ok(revoked.iter().map(|c| c.id).collect())
        })
    }
}

impl Service {
    /// Whether the caller may start extra MCP server `name`: a handler needs
    /// a live capability on it (Read or more); the user may. Checked again
    /// at every launch, so a config compiled before a revocation is useless.
    pub fn mcp_server_check(&self, who: Principal, name: &str) -> Result<()> {
        agency_core::validate::check_name("mcp server", name)?;
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            let Caller::Handler { row, .. } = &caller else { return Ok(()) };
            let held = tx.capabilities_on(row.id, &Resource::McpServer(name.to_owned()))?;
            if held.iter().any(|c| c.level >= Level::Read) {
                return Ok(());
            }
            Err(ServiceError::denied(format!(
                "failed to start MCP server {name}: you hold no capability on it; ask your boss to grant read on mcp_server {name}"
            )))
        })
    }
}

/// The grant rule, inside an open transaction (also used by `delegate`).
pub(crate) fn grant_in(
    op: &mut Op<'_>,
    caller: &Caller,
    grantee: HandlerId,
    req: &GrantRequest,
    outcome: Option<OutcomeId>,
) -> Result<CapabilityId> {
    let g = op
        .tx
        .handler(grantee)?
        .filter(|h| h.status == HandlerStatus::Active);
    let (derived_from, granted_by, origin) = match caller {
        Caller::User => {
            let Some(_) = g else {
                return Err(ServiceError::not_found("handler", grantee));
            };
            if let Resource::Kb(f) = &req.resource {
                file_at_level(op.tx, caller, *f, Level::None, "grant access to")?;
            }
            if !req.resource.grantable() {
                return Err(ServiceError::invalid(format!(
                    "failed to grant {}: mail capabilities follow the handler tree and are made by Agency",
                    req.resource
                )));
            }
            (None, None, CapOrigin::User)
        }
        Caller::Handler { row, .. } => {
            if g.as_ref().and_then(|g| g.boss) != Some(row.id) {
                return Err(ServiceError::denied(format!(
                    "failed to grant to handler {grantee}: you may grant only to your direct underlings"
                )));
            }
            if let Resource::Kb(f) = &req.resource {
                // A file the granter cannot see does not exist for it.
                file_at_level(op.tx, caller, *f, Level::None, "grant access to")?;
            }
            let held: Vec<HeldCap> = crate::egress::grant_sources(op.tx, row.id, &req.resource)?
                .iter()
                .map(|c| HeldCap {
                    id: c.id,
                    level: c.level,
                    delegatable: c.delegatable,
                    scope: c.scope,
                })
                .collect();
            let source = choose_grant_source(&req.resource, &held, req.level).map_err(|r| {
                ServiceError::denied(format!(
                    "failed to grant {} {}: {r}",
                    req.level, req.resource
                ))
            })?;
            (Some(source.id), Some(row.id), CapOrigin::Grant)
        }
    };
    let scope = grant_scope_in(op.tx, caller, grantee, req, outcome)?;
    let cap = NewCapability {
        holder: grantee,
        resource: req.resource.clone(),
        level: req.level,
        delegatable: req.delegatable,
        scope: Some(scope),
        derived_from,
        granted_by,
        origin,
        created_at: op.now,
    };
    let id = op.tx.insert_capability(&cap)?;
    // `approval = "each_use"` follows the capability down, so that
    // passing it on never sheds the requirement.
    if let Some(src) = derived_from
        && let Some(mode) = op.tx.capability_approval(src)?
    {
        op.tx.set_capability_approval(id, &mode)?;
    }
    op.emit(Event::CapabilityGranted {
        capability: id,
        holder: grantee,
        resource: cap.resource,
    });
    Ok(id)
}

/// The outcome a grant is scoped to (`agency_core::capability::grant_scope`
/// decides from the facts gathered here). An outcome the caller cannot see
/// is `NotFound`, like a missing one.
fn grant_scope_in(
    tx: &mut dyn Tx,
    caller: &Caller,
    grantee: HandlerId,
    req: &GrantRequest,
    outcome: Option<OutcomeId>,
) -> Result<OutcomeId> {
    let facts = match outcome {
        None => GrantScopeFacts {
            grantee_root: grantee.root(),
            requested: None,
            in_grantee_subtree: true,
            finished: false,
        },
        Some(o) => {
            let (row, _) = visible_outcome(tx, caller, o)?;
            GrantScopeFacts {
                grantee_root: grantee.root(),
                requested: Some(o),
                in_grantee_subtree: tx.is_descendant_or_self(o, grantee.root())?,
                finished: row.status.is_finished(),
            }
        }
    };
    grant_scope(facts).map_err(|r| {
        ServiceError::invalid(format!(
            "failed to grant {} {} to handler {grantee}: {r}",
            req.level, req.resource
        ))
    })
}

/// [`Service::mcp_servers_granted`] inside a transaction.
pub(crate) fn mcp_servers_granted(tx: &mut dyn Tx, handler: HandlerId) -> Result<BTreeSet<String>> {
    Ok(tx
        .capabilities_held(handler)?
        .into_iter()
        .filter(|c| c.level >= Level::Read)
        .filter_map(|c| match c.resource {
            Resource::McpServer(name) => Some(name),
            _ => None,
        })
        .collect())
}

impl System {
    /// Daemon: the extra MCP servers a handler holds a live capability on
    /// (Read or more), by name. Each spawn compiles its MCP config from it.
    pub fn mcp_servers_granted(&self, handler: HandlerId) -> Result<BTreeSet<String>> {
        self.read(|tx| mcp_servers_granted(tx, handler))
    }
}
