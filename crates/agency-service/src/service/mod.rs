//! The [`Service`] handle: its settings, the transaction helpers every
//! operation goes through (with the outbox they flush), caller
//! authentication against the store, and the [`System`] handle of the
//! caller-less operations.

pub(crate) mod outbox;
pub(crate) mod settings;
mod system;

pub use system::System;

use std::sync::Arc;

use agency_core::{AgentId, HandlerId, Limits, MailTarget, Principal, Timestamp};
use agency_store::{AgentRow, BlobStore, HandlerRow, HandlerStatus, Store, Tx};
use tokio::sync::{broadcast, watch};

use self::outbox::{Notice, Post};
use self::settings::{Declared, Embedder, MemoryConfig, Retention, ServiceConfig};
use crate::Result;
use crate::clock::Clock;
use crate::error::ServiceError;
use crate::events::Event;
use crate::read_audit::ReadAudit;

/// The operations of Agency over one store that check their caller. Cheap
/// to share behind an `Arc`; made by [`crate::ServiceBuilder`], which
/// also hands out its [`System`].
#[derive(Debug)]
pub struct Service {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) blobs: Arc<dyn BlobStore>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) cfg: ServiceConfig,
    pub(crate) events: broadcast::Sender<Event>,
    /// Told the number of the latest committed events (`event_log/`).
    pub(crate) event_seq: Arc<watch::Sender<i64>>,
    /// The numbers of the events this process committed, which the relay
    /// of a shared store passes over (`event_log/own.rs`).
    pub(crate) own_events: crate::event_log::own::OwnEvents,
    pub(crate) read_audit: ReadAudit,
    /// Names the configuration declares, as the daemon last said
    /// (`declared.rs`).
    pub(crate) declared: std::sync::RwLock<Option<Arc<Declared>>>,
    /// The tool-call policy the daemon installed (`approvals.rs`);
    /// replaced whole by `agency reload`, so a call is classified by one
    /// policy, the old or the new, never a mix.
    pub(crate) policy: std::sync::RwLock<Arc<agency_core::policy::Policy>>,
    /// `[memory]` of agency.toml, as the daemon last said (`memory/`).
    pub(crate) memory_cfg: std::sync::RwLock<Option<MemoryConfig>>,
    /// `[retention]` of agency.toml: `cfg.retention` until the daemon
    /// reloads it (`gc.rs`).
    pub(crate) retention: std::sync::RwLock<Retention>,
    /// The embeddings endpoint, when one is configured (`memory/`).
    pub(crate) embedder: Option<Arc<dyn Embedder>>,
    /// How the outbox is posted at the end of each write (mail's).
    pub(crate) post: Post,
    /// What problem detection remembers between ticks (`problems/`).
    pub(crate) problems: std::sync::Mutex<crate::problems::detect::Tracker>,
    /// Set only by the benchmarks, for a baseline: tool calls' steps are
    /// not logged (`event_log/steps.rs`).
    pub(crate) tool_steps_off: std::sync::atomic::AtomicBool,
}

/// The state of one write transaction in progress.
pub(crate) struct Op<'a> {
    pub tx: &'a mut dyn Tx,
    pub now: Timestamp,
    /// Published after commit (`Op::emit`, `event_log/`).
    pub(crate) events: Vec<Event>,
    pub blobs: &'a dyn BlobStore,
    /// Mail queued by the operation, posted before it commits
    /// (`outbox.rs`).
    outbox: Vec<Notice>,
    /// What the operation logs, appended before it commits (`event_log/`).
    pub(crate) log: Vec<crate::event_log::Pending>,
}

/// An authenticated caller, checked against the store in the transaction.
#[derive(Debug, Clone)]
pub(crate) enum Caller {
    User,
    Handler { row: HandlerRow, agent: AgentId },
}

impl Caller {
    pub fn handler(&self) -> Option<HandlerId> {
        match self {
            Caller::User => None,
            Caller::Handler { row, .. } => Some(row.id),
        }
    }

    pub fn agent(&self) -> Option<AgentId> {
        match self {
            Caller::User => None,
            Caller::Handler { agent, .. } => Some(*agent),
        }
    }

    pub fn party(&self) -> MailTarget {
        match self {
            Caller::User => MailTarget::User,
            Caller::Handler { row, .. } => MailTarget::Handler(row.id),
        }
    }

    pub fn is_user(&self) -> bool {
        matches!(self, Caller::User)
    }

    /// The handler an operation names, defaulting to the caller's own; the
    /// user must name one.
    pub fn named_or_own(&self, named: Option<HandlerId>, what: &str) -> Result<HandlerId> {
        match (named, self.handler()) {
            (Some(h), _) => Ok(h),
            (None, Some(own)) => Ok(own),
            (None, None) => Err(ServiceError::invalid(format!(
                "failed to {what}: name the handler"
            ))),
        }
    }

    /// The handler acting, or an error for operations only a handler can do.
    pub fn require_handler(&self, what: &str) -> Result<&HandlerRow> {
        match self {
            Caller::Handler { row, .. } => Ok(row),
            Caller::User => Err(ServiceError::invalid(format!(
                "failed to {what}: only an agent acting for a handler can do this; the user works through mail to the root handler"
            ))),
        }
    }
}

impl Service {
    /// Domain events, each sent after its transaction committed. A receiver
    /// that falls more than 4096 events behind gets `Lagged` and should
    /// re-read the state it cares about (e.g. the work query).
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    pub fn limits(&self) -> &Limits {
        &self.cfg.limits
    }

    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Run `f` as one write transaction; publish its events after commit.
    /// Runs in a span named after the operation (see [`op_span`]).
    pub(crate) fn write<R>(&self, f: impl FnOnce(&mut Op<'_>) -> Result<R>) -> Result<R> {
        let span = op_span(std::any::type_name_of_val(&f), "write");
        let _entered = span.enter();
        logged(self.write_unlogged(f))
    }

    /// [`Service::write`] whose commit need not be on disk when it
    /// returns ([`agency_store::Store::write_lazy_dyn`]): survives a crash
    /// of the daemon, not a power cut before the next durable commit. For
    /// writes whose loss then costs nothing that matters: a spawn's
    /// preparation and process record, a model call's reservation and
    /// settlement (see `budgets/metering.rs`).
    pub(crate) fn write_lazy<R>(&self, f: impl FnOnce(&mut Op<'_>) -> Result<R>) -> Result<R> {
        let span = op_span(std::any::type_name_of_val(&f), "write");
        let _entered = span.enter();
        logged(self.write_in(true, f))
    }

    fn write_unlogged<R>(&self, f: impl FnOnce(&mut Op<'_>) -> Result<R>) -> Result<R> {
        self.write_in(false, f)
    }

    fn write_in<R>(&self, lazy: bool, f: impl FnOnce(&mut Op<'_>) -> Result<R>) -> Result<R> {
        let now = self.clock.now();
        let blobs = &*self.blobs;
        let post = self.post;
        let body = |tx: &mut dyn Tx| {
            let mut op = Op {
                tx,
                now,
                events: Vec::new(),
                blobs,
                outbox: Vec::new(),
                log: Vec::new(),
            };
            let r = f(&mut op)?;
            op.flush_outbox(post)?;
            let last = op.flush_log()?;
            Ok::<_, ServiceError>((r, op.events, last))
        };
        let (r, events, last) = if lazy {
            agency_store::write_lazy(&*self.store, body)?
        } else {
            agency_store::write(&*self.store, body)?
        };
        if let Some((first, seq)) = last {
            self.own_events.committed(first, seq);
            self.event_seq.send_replace(seq);
        }
        for e in events {
            // No subscriber is not an error: the daemon may not be running.
            let _ = self.events.send(e);
        }
        Ok(r)
    }

    pub(crate) fn read<R>(&self, f: impl FnOnce(&mut dyn Tx) -> Result<R>) -> Result<R> {
        let span = op_span(std::any::type_name_of_val(&f), "read");
        let _entered = span.enter();
        logged(agency_store::read(&*self.store, f))
    }
}

impl System {
    /// The store itself, beneath every permission check.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Wait until every read-audit record queued so far is committed.
    pub fn flush_read_audit(&self) -> Result<()> {
        self.read_audit.flush()
    }

    /// Re-hash every blob and report rows that point at missing or corrupt
    /// ones.
    pub fn fsck(&self) -> Result<agency_api::FsckReport> {
        Ok(crate::wire::fsck_report(agency_store::fsck(
            &*self.store,
            &*self.blobs,
        )?))
    }
}

/// The span of one service operation, named after the public method whose
/// transaction it is: every operation goes through [`Service::write`] or
/// [`Service::read`], whose closure's type name is that method's path
/// (`agency_service::kb::<impl …Service>::kb_read::{{closure}}`), so one
/// place names them all.
fn op_span(closure: &'static str, kind: &'static str) -> tracing::Span {
    tracing::info_span!("op", name = %op_name(closure), kind = %kind)
}

/// The method's name in a closure's type name: without the closures
/// nested in it (`::{{closure}}`) and, for a generic method, its type
/// arguments (`method<T, F>`, which may name closures and paths of their own).
fn op_name(closure: &'static str) -> &'static str {
    let mut path = closure;
    loop {
        if let Some(outer) = path.strip_suffix("::{{closure}}") {
            path = outer;
        } else if path.ends_with('>') {
            // Back to the `<` that opens the trailing type arguments.
            let mut depth = 0usize;
            let mut open = None;
            for (i, b) in path.bytes().enumerate().rev() {
                match b {
                    b'>' => depth += 1,
                    b'<' => {
                        depth -= 1;
                        if depth == 0 {
                            open = Some(i);
                            break;
                        }
                    }
                    _ => {}
                }
            }
            match open {
                Some(i) if i > 0 => path = &path[..i],
                _ => break,
            }
        } else {
            break;
        }
    }
    path.rsplit("::").next().unwrap_or(path)
}

/// Log how an operation ended: a store failure is the daemon's problem (a
/// warning); a refusal is the caller's (debug).
fn logged<R>(r: Result<R>) -> Result<R> {
    match &r {
        Ok(_) => tracing::debug!("done"),
        Err(e @ ServiceError::Store(_)) => tracing::warn!(error = %e, "failed"),
        Err(e) => tracing::debug!(error = %e, kind = e.kind(), "refused"),
    }
    r
}

/// Check a principal against the store: an agent must be live, belong to the
/// handler it claims, and that handler must be active.
pub(crate) fn authenticate(tx: &mut dyn Tx, who: Principal) -> Result<Caller> {
    match who {
        Principal::User => Ok(Caller::User),
        Principal::Agent { handler, agent } => {
            let denied = || {
                ServiceError::denied(format!(
                    "failed to authenticate agent {agent} of handler {handler}: it is not a live agent of an active handler"
                ))
            };
            let (row, h) = tx.agent_with_handler(agent)?.ok_or_else(denied)?;
            if !is_live_caller(&row, &h, handler) {
                return Err(denied());
            }
            Ok(Caller::Handler { row: h, agent })
        }
    }
}

/// Whether `agent`, read with `its_handler`, is a live agent of the active
/// handler `handler`: what every call of an agent must be.
pub(crate) fn is_live_caller(
    agent: &AgentRow,
    its_handler: &HandlerRow,
    handler: HandlerId,
) -> bool {
    agent.handler == handler
        && its_handler.id == handler
        && agent.ended_at.is_none()
        && its_handler.status == HandlerStatus::Active
}

#[cfg(test)]
mod tests {
    use super::{is_live_caller, op_name};
    use agency_core::{AgentId, FileId, HandlerId, Timestamp};
    use agency_store::{AgentRow, HandlerRow, HandlerStatus};

    /// Each way a presented agent can fail to be a live agent of an active
    /// handler, the token's or the principal's (`handler`), refuses it.
    #[test]
    fn a_caller_is_a_live_agent_of_its_active_handler() {
        let (mine, other) = (HandlerId::new_random(), HandlerId::new_random());
        let agent = |handler, ended: Option<i64>| AgentRow {
            id: AgentId::new_random(),
            handler,
            started_at: Timestamp(1),
            ended_at: ended.map(Timestamp),
            end_reason: None,
        };
        let handler = |id, status| HandlerRow {
            id,
            boss: None,
            status,
            state_doc: FileId::new_random(),
            audit_log: FileId::new_random(),
            created_at: Timestamp(1),
            updated_at: Timestamp(1),
        };
        let active = HandlerStatus::Active;
        for (a, h, ok, case) in [
            (
                agent(mine, None),
                handler(mine, active),
                true,
                "live, active",
            ),
            (agent(mine, Some(2)), handler(mine, active), false, "ended"),
            (
                agent(mine, None),
                handler(mine, HandlerStatus::Deactivated),
                false,
                "deactivated",
            ),
            (
                agent(other, None),
                handler(other, active),
                false,
                "another's agent",
            ),
            (
                agent(mine, None),
                handler(other, active),
                false,
                "a mismatched row",
            ),
        ] {
            assert_eq!(is_live_caller(&a, &h, mine), ok, "{case}");
        }
    }

    #[test]
    fn operations_are_named_after_their_method() {
        assert_eq!(
            op_name(
                "agency_service::kb::<impl agency_service::service::Service>::kb_read::{{closure}}"
            ),
            "kb_read"
        );
        assert_eq!(
            op_name("agency_service::mail::send::{{closure}}::{{closure}}"),
            "send"
        );
        // A generic method: its type arguments, closures among them, go.
        assert_eq!(
            op_name(
                "agency_service::agents::tokens::<impl agency_service::service::system::System>::token_then<(), agency_service::agents::tokens::<impl agency_service::service::system::System>::token_authenticate::{{closure}}>::{{closure}}"
            ),
            "token_then"
        );
        assert_eq!(
            op_name("agency_service::x::run<alloc::vec::Vec<u8>>::{{closure}}"),
            "run"
        );
        // Nothing that parses: the string as it is, never a panic.
        assert_eq!(op_name(">"), ">");
        assert_eq!(op_name("a<b>>"), "a<b>>");
    }
}
