//! Agent records: the daemon registers each spawn and its end. The store
//! holds "at most one live agent per handler".

pub(crate) mod leases;
pub(crate) mod processes;
pub(crate) mod spawn;
pub(crate) mod tokens;

use agency_core::{AgentId, HandlerId, Principal};
use agency_store::{AgentRow, HandlerStatus, StoreError};

use crate::Result;
use crate::error::ServiceError;
use crate::events::Event;
use crate::service::{Op, Service, System, authenticate};

impl Service {
    /// Live agents (user only) or the caller's own.
    pub fn agents_live(&self, who: Principal) -> Result<Vec<AgentRow>> {
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            match caller.handler() {
                None => Ok(tx.live_agents()?),
                Some(h) => Ok(tx.live_agents_of(&[h])?),
            }
        })
    }

    /// Recent agents, live or ended, newest first (user only).
    pub fn agents_recent(&self, who: Principal, limit: Option<usize>) -> Result<Vec<AgentRow>> {
        let limit = self.cfg.limits.page(limit);
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            if !caller.is_user() {
                return Err(ServiceError::denied(
                    "failed to list agents: only the user may list every agent",
                ));
            }
            Ok(tx.recent_agents(limit)?)
        })
    }
}

/// Insert a live agent for an active handler (the store refuses a second).
pub(crate) fn insert_live_agent(op: &mut Op<'_>, handler: HandlerId) -> Result<AgentRow> {
    let h = op
        .tx
        .handler(handler)?
        .ok_or_else(|| ServiceError::not_found("handler", handler))?;
    if h.status != HandlerStatus::Active {
        return Err(ServiceError::invalid(format!(
            "failed to start an agent for handler {handler}: it is deactivated"
        )));
    }
    let row = AgentRow {
        id: AgentId::new_random(),
        handler,
        started_at: op.now,
        ended_at: None,
        end_reason: None,
    };
    match op.tx.insert_agent(&row) {
        Ok(()) => {}
        Err(StoreError::Unique { .. }) => {
            let live = op.tx.live_agents_of(&[handler])?;
            return Err(ServiceError::AgentLive {
                handler: handler.to_string(),
                agent: live.first().map(|a| a.id.to_string()).unwrap_or_default(),
            });
        }
        Err(e) => return Err(e.into()),
    }
    op.emit(Event::AgentStarted {
        agent: row.id,
        handler,
    });
    Ok(row)
}

impl System {
    /// Daemon: record a new live agent for an active handler. Fails with
    /// `AgentLive` if the handler already has one.
    /// A paused budget or a spawn or live-agent limit on the handler or
    /// above it refuses (`quota`).
    pub fn agent_start(&self, handler: HandlerId) -> Result<AgentId> {
        self.write(|op| {
            if let Err(e) = crate::budgets::ledger::charge_spawn(op, handler)? {
                return Ok(Err(e));
            }
            Ok(Ok(insert_live_agent(op, handler)?.id))
        })?
    }

    /// Daemon: record that an agent ended. Returns false if it was not live
    /// (a stale signal about an earlier agent changes nothing).
    pub fn agent_end(&self, agent: AgentId, reason: &str) -> Result<bool> {
        self.write(|op| {
            let Some(row) = op.tx.agent(agent)? else {
                return Ok(false);
            };
            let ended = op.tx.end_agent(agent, op.now, reason)?;
            // The token dies with its agent.
            op.tx.revoke_tokens_of(agent, op.now)?;
            if ended {
                op.emit(Event::AgentEnded {
                    agent,
                    handler: row.handler,
                });
            }
            Ok(ended)
        })
    }

    /// Counts for status displays.
    pub fn counts(&self) -> Result<agency_store::StoreCounts> {
        self.read(|tx| Ok(tx.counts()?))
    }
}
