//! Reading the log: a page after a cursor, checked against what the caller
//! may see, and the signal that new events were committed.
//!
//! An agent sees the events of its handler's subtree: its own and those of
//! every handler below it, as it sees their outcomes; a scope it names
//! must lie inside that subtree. The user sees every event, also those
//! about the organisation as a whole.

use agency_api::{Event, EventKind, EventsPage};
use agency_core::{HandlerId, Principal, Timestamp};
use agency_store::{EventFilter, EventRow, EventScope, Tx};
use tokio::sync::watch;

use crate::Result;
use crate::error::ServiceError;
use crate::service::{Caller, Service, authenticate};

/// Events per page when the reader does not say.
pub const DEFAULT_PAGE: usize = 100;
/// Events per page at most.
pub const MAX_PAGE: usize = 1000;
/// How far up the handler tree a scope check walks before it gives up
/// (a deeper tree than this is refused, not searched for ever).
const MAX_DEPTH: usize = 10_000;

/// What a reader asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventQuery {
    /// Only events numbered above this.
    pub after: i64,
    /// Only events about this handler (and, with `subtree`, those below
    /// it); `None`: everything the caller may see.
    pub handler: Option<HandlerId>,
    pub subtree: bool,
    /// Kinds (`mail.sent`) or families (`mail`); empty: all.
    pub kinds: Vec<String>,
    pub since: Option<Timestamp>,
    /// `None`: 100 events.
    pub limit: Option<usize>,
}

impl Service {
    /// A page of the event log after `q.after`, as the caller may see it.
    pub fn events_read(&self, who: Principal, q: &EventQuery) -> Result<EventsPage> {
        let limit = q.limit.unwrap_or(DEFAULT_PAGE);
        if limit == 0 || limit > MAX_PAGE {
            return Err(ServiceError::invalid(format!(
                "failed to read events: limit must be between 1 and {MAX_PAGE}, not {limit}"
            )));
        }
        if q.after < 0 {
            return Err(ServiceError::invalid(format!(
                "failed to read events: `after` is an event number, 0 or more, not {}",
                q.after
            )));
        }
        for k in &q.kinds {
            check_kind(k)?;
        }
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            let scope = scope_for(tx, &caller, q)?;
            let rows = tx.events_after(&EventFilter {
                after: q.after,
                scope,
                kinds: q.kinds.clone(),
                since: q.since,
                limit,
            })?;
            let next = match rows.last() {
                Some(r) => r.seq,
                // Nothing matched up to the log's end: the next read need
                // not scan it again.
                None => tx.last_event_seq()?.max(q.after),
            };
            Ok(EventsPage {
                events: rows.into_iter().map(wire).collect(),
                next,
            })
        })
    }

    /// The log's end: the highest event number given so far (any caller
    /// may know it; it says nothing about whose events they are).
    pub fn events_end(&self, who: Principal) -> Result<i64> {
        self.read(|tx| {
            authenticate(tx, who)?;
            Ok(tx.last_event_seq()?)
        })
    }

    /// Changes whenever events were committed (its value: a recent event
    /// number, not necessarily the highest). Readers wake on it and read
    /// from their own cursor, so an event is never missed by a reader that
    /// was slow to wake.
    pub fn events_committed(&self) -> watch::Receiver<i64> {
        self.event_seq.subscribe()
    }
}

/// The store's scope for what `caller` asked.
fn scope_for(tx: &mut dyn Tx, caller: &Caller, q: &EventQuery) -> Result<EventScope> {
    let asked = |h| {
        if q.subtree {
            EventScope::Subtree(h)
        } else {
            EventScope::Handler(h)
        }
    };
    match (caller, q.handler) {
        (Caller::User, None) => Ok(EventScope::All),
        (Caller::User, Some(h)) => {
            tx.handler(h)?
                .ok_or_else(|| ServiceError::not_found("handler", h))?;
            Ok(asked(h))
        }
        (Caller::Handler { row, .. }, None) => Ok(EventScope::Subtree(row.id)),
        (Caller::Handler { row, .. }, Some(h)) => {
            if !in_subtree(tx, h, row.id)? {
                return Err(ServiceError::denied(format!(
                    "failed to read events of handler {h}: an agent reads the events of its own handler and of the handlers below it"
                )));
            }
            Ok(asked(h))
        }
    }
}

/// Whether `h` is `head` or below it in the handler tree.
fn in_subtree(tx: &mut dyn Tx, h: HandlerId, head: HandlerId) -> Result<bool> {
    let mut at = Some(h);
    for _ in 0..MAX_DEPTH {
        match at {
            None => return Ok(false),
            Some(x) if x == head => return Ok(true),
            Some(x) => at = tx.handler(x)?.and_then(|r| r.boss),
        }
    }
    Ok(false)
}

/// A kind or a family this version knows: a typo would otherwise follow
/// nothing, silently.
fn check_kind(k: &str) -> Result<()> {
    let known = EventKind::KNOWN
        .iter()
        .any(|e| e.as_str() == k || e.family() == k);
    if known {
        return Ok(());
    }
    let mut families: Vec<&str> = EventKind::KNOWN.iter().map(|e| e.family()).collect();
    families.dedup();
    Err(ServiceError::invalid(format!(
        "failed to read events: unknown kind {k:?}; name a kind such as `mail.sent` or a family: {}",
        families.join(", ")
    )))
}

fn wire(r: EventRow) -> Event {
    let data =
        serde_json::from_str(&r.event.data).unwrap_or(serde_json::Value::String(r.event.data));
    Event {
        seq: r.seq,
        at: r.event.at,
        kind: EventKind::from(r.event.kind),
        handler: r.event.handler,
        handler_title: r.handler_title,
        agent: r.event.agent,
        outcome: r.event.outcome,
        summary: r.event.summary,
        data,
    }
}
