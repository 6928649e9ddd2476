//! Bearer tokens: each names exactly one live agent of one handler. Only the
//! hash is stored; a token stops working when revoked or when its agent
//! ends. Interfaces turn a token into a [`Principal`] here and nowhere else.

use std::path::{Path, PathBuf};

use agency_core::{AgentId, HandlerId, Principal};
use agency_store::{IdKind, TokenRow};

use crate::Result;
use crate::agents::insert_live_agent;
use crate::agents::leases::{HeldLease, LeaseSpec, claim, release_in};
use crate::error::ServiceError;
use crate::events::Event;
use crate::service::{Op, Service, System, authenticate, is_live_caller};
pub use agency_api::MintedToken;

/// Who a valid token speaks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenIdentity {
    pub handler: HandlerId,
    pub agent: AgentId,
    /// The agent's workspace, where `path` arguments are resolved.
    pub workspace: Option<PathBuf>,
}

impl TokenIdentity {
    pub fn principal(&self) -> Principal {
        Principal::agent(self.handler, self.agent)
    }
}

const TOKEN_PREFIX: &str = "agency_";

fn hash(token: &str) -> String {
    blake3::hash(token.as_bytes()).to_hex().to_string()
}

fn invalid_token() -> ServiceError {
    ServiceError::denied(
        "failed to authenticate: the bearer token is unknown, revoked, or its agent has ended",
    )
}

/// The hash a token is stored by; refused at once when it cannot be one
/// of ours.
pub(crate) fn token_hash(token: &str) -> Result<String> {
    if !token.starts_with(TOKEN_PREFIX) || token.len() > 256 {
        return Err(invalid_token());
    }
    Ok(hash(token))
}

/// The live agent whose token has hash `h`, in `tx`.
pub(crate) fn identity_in(tx: &mut dyn agency_store::Tx, h: &str) -> Result<TokenIdentity> {
    let (row, agent, handler) = tx
        .token_caller(h)?
        .filter(|(t, ..)| t.revoked_at.is_none())
        .ok_or_else(invalid_token)?;
    if !is_live_caller(&agent, &handler, row.handler) {
        return Err(invalid_token());
    }
    Ok(TokenIdentity {
        handler: row.handler,
        agent: row.agent,
        workspace: row.workspace.map(PathBuf::from),
    })
}

/// A fresh bearer token (made outside the transaction that stores its
/// hash: the random source is not the store's business).
pub(crate) fn new_token() -> String {
    format!(
        "{TOKEN_PREFIX}{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

/// Start a live agent for `handler` with `token` as its token, in the
/// caller's transaction. The inner `Err` is a refusal (a paused budget, a
/// spawn or live-agent limit) whose records must still be committed.
pub(crate) fn start_with_token(
    op: &mut Op<'_>,
    handler: HandlerId,
    token: &str,
    workspace: Option<&Path>,
) -> Result<Result<MintedToken>> {
    // A paused budget or a spawn or live-agent limit refuses; the
    // pause it may record is committed with the refusal.
    if let Err(e) = crate::budgets::ledger::charge_spawn(op, handler)? {
        return Ok(Err(e));
    }
    let agent = insert_live_agent(op, handler)?;
    op.tx.insert_token(&TokenRow {
        hash: hash(token),
        agent: agent.id,
        handler,
        workspace: workspace.map(|w| w.to_string_lossy().into_owned()),
        created_at: op.now,
        revoked_at: None,
    })?;
    Ok(Ok(MintedToken {
        token: token.to_owned(),
        agent: agent.id,
        handler,
    }))
}

/// An agent started, and the lease it runs under (on a shared store).
type Leased = (MintedToken, Option<HeldLease>);

/// [`start_with_token`] under `handler`'s lease when `lease` is given:
/// claimed for `lease.owner` first, `None` (nothing written) when another
/// daemon holds it. A refused start gives its claim back: no agent runs
/// under it, and renewals would keep it.
fn start_leased(
    op: &mut Op<'_>,
    handler: HandlerId,
    token: &str,
    workspace: Option<&Path>,
    lease: Option<&LeaseSpec>,
) -> Result<Option<Result<Leased>>> {
    let held = match lease {
        None => None,
        Some(spec) => match claim(op, handler, spec)? {
            None => return Ok(None),
            Some(token) => Some(HeldLease { handler, token }),
        },
    };
    let started = start_with_token(op, handler, token, workspace)?;
    if started.is_err()
        && let (Some(spec), Some(held)) = (lease, held)
    {
        release_in(op, &spec.owner, held)?;
    }
    Ok(Some(started.map(|m| (m, held))))
}

impl Service {
    /// The user mints a token that lets an external MCP client act as an
    /// agent of `handler` (it becomes that handler's one live agent).
    /// `workspace`, if given, is the directory where that client's `path`
    /// arguments resolve: it must be an existing absolute directory.
    pub fn token_mint(
        &self,
        who: Principal,
        handler: HandlerId,
        workspace: Option<&Path>,
    ) -> Result<MintedToken> {
        self.token_mint_as(who, handler, workspace, None)
    }

    /// [`Service::token_mint`] through a daemon sharing the store: the
    /// client's agent is that daemon's, so the handler's lease is claimed
    /// for `lease.owner` in the same transaction (renewed by its
    /// heartbeats, given back when the token is revoked). Refused while
    /// another daemon holds the lease.
    pub fn token_mint_as(
        &self,
        who: Principal,
        handler: HandlerId,
        workspace: Option<&Path>,
        lease: Option<&LeaseSpec>,
    ) -> Result<MintedToken> {
        if !who.is_user() {
            return Err(ServiceError::denied(
                "failed to mint a token: only the user may mint tokens",
            ));
        }
        if let Some(w) = workspace
            && (!w.is_absolute() || !w.is_dir())
        {
            return Err(ServiceError::invalid(format!(
                "failed to mint a token: workspace {} is not an existing absolute directory",
                w.display()
            )));
        }
        let token = new_token();
        self.write(|op| {
            let Some(started) = start_leased(op, handler, &token, workspace, lease)? else {
                let by = op.tx.lease(handler)?.map(|l| l.owner).unwrap_or_default();
                return Err(ServiceError::invalid(format!(
                    "failed to mint a token for handler {handler}: daemon {by} runs it now; mint it through that daemon, or once the handler is idle"
                )));
            };
            Ok(started.map(|(m, _)| m))
        })?
    }

    /// The user revokes an agent's token; the agent is ended with it.
    pub fn token_revoke(&self, who: Principal, agent: AgentId) -> Result<bool> {
        if !who.is_user() {
            return Err(ServiceError::denied(
                "failed to revoke a token: only the user may revoke tokens",
            ));
        }
        self.write(|op| {
            let Some(row) = op.tx.agent(agent)? else {
                return Err(ServiceError::not_found("agent", agent));
            };
            // Read while the agent is live (the list is of live agents').
            let spawned = op
                .tx
                .live_agent_processes()?
                .iter()
                .any(|p| p.agent == agent);
            let revoked = op.tx.revoke_tokens_of(agent, op.now)?;
            if op.tx.end_agent(agent, op.now, "token_revoked")? {
                op.emit(Event::AgentEnded {
                    agent,
                    handler: row.handler,
                });
                // An attached client's agent (no process was recorded for
                // it) held its handler's lease through the daemon that
                // minted it: nothing runs under it now. A spawned agent's
                // lease stays until its daemon records the run.
                if !spawned && let Some(l) = op.tx.lease(row.handler)? {
                    release_in(op, &l.owner, HeldLease::from(&l))?;
                }
            }
            Ok(revoked > 0)
        })
    }

    /// The user resolves an abbreviated id to the one id it starts with.
    pub fn resolve_prefix(&self, who: Principal, kind: IdKind, prefix: &str) -> Result<uuid::Uuid> {
        let p = prefix.trim().to_ascii_lowercase();
        let what = match kind {
            IdKind::Handler => "handler",
            IdKind::Outcome => "outcome",
            IdKind::File => "KB file",
            IdKind::Agent => "agent",
            IdKind::Message => "message",
            IdKind::OrgMessage => "agency message",
            IdKind::OrgKey => "API key",
            IdKind::Memory => "memory",
            IdKind::MemoryCompaction => "memory compaction",
            IdKind::Lesson => "lesson",
        };
        if p.is_empty() || p.len() > 36 || !p.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-') {
            return Err(ServiceError::invalid(format!(
                "failed to resolve {what} id {prefix:?}: give a UUID or a unique prefix of one (hex digits and '-')"
            )));
        }
        self.read(|tx| {
            authenticate(tx, who)?;
            if !who.is_user() {
                return Err(ServiceError::denied("failed to resolve an id prefix: only the user's CLI abbreviates ids"));
            }
            let found = tx.ids_with_prefix(kind, &p, 6)?;
            match found.as_slice() {
                [] => Err(ServiceError::not_found(what, prefix)),
                [one] => Ok(*one),
                many => Err(ServiceError::invalid(format!(
                    "failed to resolve {what} id {prefix:?}: it is ambiguous ({}{}); give more characters",
                    many.iter().take(5).map(|u| u.to_string()).collect::<Vec<_>>().join(", "),
                    if many.len() > 5 { ", …" } else { "" }
                ))),
            }
        })
    }
}

impl System {
    /// Daemon: start a live agent for a handler and mint its token in one
    /// transaction. `AgentLive` if the handler already has an agent.
    pub fn agent_start_with_token(
        &self,
        handler: HandlerId,
        workspace: Option<&Path>,
    ) -> Result<MintedToken> {
        let token = new_token();
        self.write(|op| start_with_token(op, handler, &token, workspace))?
    }

    /// [`System::agent_start_with_token`] for a daemon sharing the store
    /// (a lesson's replay): the handler's lease is claimed for
    /// `lease.owner` in the same transaction, and `None` (nothing written)
    /// when another daemon holds it. Taking over a lapsed lease ends the
    /// previous owner's agent of the handler.
    pub fn agent_start_with_token_as(
        &self,
        handler: HandlerId,
        workspace: Option<&Path>,
        lease: Option<&LeaseSpec>,
    ) -> Result<Option<(MintedToken, Option<HeldLease>)>> {
        let token = new_token();
        self.write(|op| {
            Ok(match start_leased(op, handler, &token, workspace, lease)? {
                None => Ok(None),
                Some(started) => started.map(Some),
            })
        })?
    }

    /// Resolve a bearer token to the agent it names.
    pub fn token_authenticate(&self, token: &str) -> Result<TokenIdentity> {
        let h = token_hash(token)?;
        self.read(|tx| identity_in(tx, &h))
    }
}
