//! The preparation of one agent spawn, for the
//! supervisor: ONE write transaction decides whether the handler may start
//! an agent now (it has work, is not stalled, no paused budget holds it),
//! starts it (the spawn charged to its budgets, the live agent row, its
//! token, the run record with the system prompt's hash) and reads all that
//! the launch needs (the prompt's facts and standing instructions, what
//! waits in the inbox, how the previous agent ended, the recalled
//! memories, the granted MCP servers, the keep-warm time, the model
//! upstream).
//!
//! One transaction rather than one per fact: each write transaction is a
//! durable commit (an fsync), and each call a trip to a blocking thread,
//! on the path from a delivery to the agent's process; and the facts are
//! read from the same snapshot that the agent is started on. The only
//! work left outside is a network call: with an embeddings endpoint
//! configured, the memory recall's query is read and embedded first, since
//! no network call may run while the store's write lock is held.
//!
//! The transaction commits without waiting for the disk
//! (`Store::write_lazy_dyn`: an fsync is ~4 ms here, twice the whole
//! budget above a bare spawn). It is visible at once and survives the
//! daemon being killed; only a power loss before the next durable commit
//! (the first of the agent's own writes, or any other) could lose it, and
//! a power loss kills the agent's process with it.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use agency_core::HandlerId;
use agency_core::prompt::{PROMPT_VERSION, PromptFacts, agent_prompt};
use agency_store::AgentRunRow;

use crate::Result;
use crate::agents::leases::{HeldLease, LeaseSpec, claim};
use crate::agents::tokens::{MintedToken, new_token, start_with_token};
use crate::budgets::ledger::paused_by;
use crate::error::ServiceError;
use crate::memory::recall::{first_message_memory, recall_query};
use crate::runs::views::{PreviousRun, previous_run_abnormal};
use crate::service::System;
use crate::warm::{KeepWarmDefaults, keep_warm_view};

/// Inbox subjects listed in an agent's first message.
pub const FIRST_MESSAGE_SUBJECTS: usize = 20;

/// What the supervisor asks for one spawn.
#[derive(Debug, Clone, Copy)]
pub struct SpawnRequest<'a> {
    pub handler: HandlerId,
    /// Where the agent works (stored with its token, for `path` arguments).
    pub workspace: &'a Path,
    /// The runtime's name, recorded in the run.
    pub runtime: &'a str,
    /// The daemon's keep-warm defaults.
    pub keep_warm: KeepWarmDefaults,
    /// With several daemons on one store: claim the handler's lease for
    /// this daemon first (nothing is started if another daemon holds it).
    pub lease: Option<&'a LeaseSpec>,
}

/// Everything a launch needs, read in the transaction that started the
/// agent.
#[derive(Debug, Clone)]
pub struct PreparedSpawn {
    pub minted: MintedToken,
    /// The whole system prompt (its hash is in the run record).
    pub system_prompt: String,
    pub prompt_hash: String,
    /// Subjects of the unacknowledged mail, oldest first (at most
    /// [`FIRST_MESSAGE_SUBJECTS`]).
    pub inbox_subjects: Vec<String>,
    /// How the previous agent ended, when that was not normally.
    pub previous: Option<PreviousRun>,
    /// The memory part of the first message (recalled memories, a request
    /// to condense), if any.
    pub memory: Option<String>,
    /// MCP servers the handler holds a capability on (Read or more).
    pub mcp_servers: BTreeSet<String>,
    /// How long the agent stays warm after its work (`None`: it exits).
    pub keep_warm: Option<Duration>,
    /// The handler's model upstream (`None`: the runtime's).
    pub upstream: Option<String>,
    /// The lease claimed for it (when the request asked for one): its
    /// token goes with every later write made as the owner.
    pub lease: Option<HeldLease>,
}

impl System {
    /// Daemon: prepare a spawn for `req.handler` in one write transaction.
    /// `Ok(None)`: it has no work, is stalled, a paused budget holds it, or
    /// another daemon holds its lease (nothing written). `AgentLive` when it has a live agent already;
    /// a refusal by a budget or limit is returned after its records are
    /// committed.
    ///
    /// A part that fails to read (memories, keep-warm time, model) is left
    /// out and logged, never the agent, as before this was one transaction.
    pub fn spawn_prepare(&self, req: &SpawnRequest<'_>) -> Result<Option<PreparedSpawn>> {
        let h = req.handler;
        // A network call, never inside the transaction: read the recall
        // query and embed it first, only when an endpoint is configured.
        let qv = if self.embedder.as_ref().is_some() {
            match self.read(|tx| recall_query(tx, &*self.blobs, h)) {
                Ok(q) => self.recall_vector(&q),
                Err(e) => {
                    tracing::warn!(handler = %h, error = %e, "failed to read the memory recall query");
                    None
                }
            }
        } else {
            None
        };
        let token = new_token();
        self.write_lazy(|op| {
            let row = op
                .tx
                .handler(h)?
                .ok_or_else(|| ServiceError::not_found("handler", h))?;
            if !op.tx.has_work(h)? || op.tx.stalled(h)?.is_some() || paused_by(op.tx, h)?.is_some()
            {
                return Ok(Ok(None));
            }
            let lease = match req.lease {
                None => None,
                Some(spec) => match claim(op, h, spec)? {
                    Some(token) => Some(HeldLease { handler: h, token }),
                    // Another daemon acts for this handler.
                    None => return Ok(Ok(None)),
                },
            };
            let minted = match start_with_token(op, h, &token, Some(req.workspace))? {
                Ok(m) => m,
                Err(refused) => return Ok(Err(refused)),
            };
            let title = op
                .tx
                .outcome(h.root())?
                .map(|o| o.title)
                .unwrap_or_default();
            // An organisation's agent: its standing instructions
            // end the system prompt.
            let standing = op.tx.handler_standing(h)?;
            let system_prompt = agent_prompt(&PromptFacts {
                handler: h,
                boss: row.boss,
                root_title: &title,
                state_doc: row.state_doc,
                audit_log: row.audit_log,
                standing: standing.as_deref(),
            });
            let prompt_hash = blake3::hash(system_prompt.as_bytes()).to_hex().to_string();
            op.tx.put_agent_run(&AgentRunRow {
                prompt_version: Some(i64::from(PROMPT_VERSION)),
                ..AgentRunRow::spawned(minted.agent, req.runtime, &prompt_hash)
            })?;
            let inbox_subjects = op
                .tx
                .inbox(agency_core::MailTarget::Handler(h), FIRST_MESSAGE_SUBJECTS)?
                .into_iter()
                .map(|m| m.subject)
                .collect();
            let mcp_servers = crate::permissions::mcp_servers_granted(op.tx, h)?;
            // From the stored runs, not from the daemon's counters: a
            // restart (reaped agents) must not make it forget.
            let previous = previous_run_abnormal(op.tx, h)?;
            let memory = first_message_memory(self, op, h, qv.as_ref()).unwrap_or_else(|e| {
                tracing::warn!(handler = %h, error = %e, "failed to recall memories");
                None
            });
            let keep_warm = match keep_warm_view(op.tx, h, req.keep_warm) {
                Ok(v) => (v.effective_ms > 0).then(|| Duration::from_millis(v.effective_ms)),
                Err(e) => {
                    tracing::warn!(handler = %h, error = %e, "failed to read the keep-warm time of handler {h}");
                    None
                }
            };
            // A read that fails leaves the runtime's upstream, which the
            // gateway then refuses if the handler has another: the agent
            // fails, not leaks.
            let upstream = match crate::models::handler_model(op.tx, h) {
                Ok(m) => m.effective,
                Err(e) => {
                    tracing::warn!(handler = %h, error = %e, "failed to read the handler's model upstream");
                    None
                }
            };
            Ok(Ok(Some(PreparedSpawn {
                minted,
                system_prompt,
                prompt_hash,
                inbox_subjects,
                previous,
                memory,
                mcp_servers,
                keep_warm,
                upstream,
                lease,
            })))
        })?
    }

    /// Daemon: whether `handler` may get an agent now (it has work, is not
    /// stalled, and no paused budget holds it), in one read; the
    /// supervisor asks before queueing a handler for a slot.
    pub fn spawn_ready(&self, handler: HandlerId) -> Result<bool> {
        self.read(|tx| {
            Ok(tx.has_work(handler)?
                && tx.stalled(handler)?.is_none()
                && paused_by(tx, handler)?.is_none())
        })
    }
}
