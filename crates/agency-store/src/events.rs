//! Rows of the event log (migration 24): one row per thing that happened,
//! appended in the transaction of the change it records, numbered by a
//! sequence the store assigns. What is recorded and who may read it is the
//! service's (`agency-service`'s `event_log/`); these are plain rows.

use agency_core::{AgentId, HandlerId, OutcomeId, Timestamp};

/// An event to append; the store numbers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEventRow {
    pub at: Timestamp,
    /// Dotted kind, e.g. `mail.sent`, `model_call.ended`.
    pub kind: String,
    /// The handler the event is about: whose area it belongs to. `None`:
    /// about the organisation as a whole (the user's alone).
    pub handler: Option<HandlerId>,
    pub agent: Option<AgentId>,
    pub outcome: Option<OutcomeId>,
    /// One line saying what happened, rendered when it happened.
    pub summary: String,
    /// The event's fields as a JSON object.
    pub data: String,
}

/// A stored event: its sequence number, and its handler's title read
/// with it (`None` for an organisation-wide event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRow {
    /// Assigned at append, strictly increasing in commit order, never
    /// reused (also after `gc` removed older rows).
    pub seq: i64,
    pub event: NewEventRow,
    pub handler_title: Option<String>,
}

/// Whose events a read returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventScope {
    All,
    /// Events about one handler.
    Handler(HandlerId),
    /// Events about a handler or anyone below it in the handler tree.
    Subtree(HandlerId),
}

/// One page of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventFilter {
    /// Only events numbered above this (0: from the start).
    pub after: i64,
    pub scope: EventScope,
    /// Kinds wanted: each is a whole kind (`mail.sent`) or a family
    /// (`mail`: every `mail.*`). Empty: every kind.
    pub kinds: Vec<String>,
    /// Only events at or after this time.
    pub since: Option<Timestamp>,
    pub limit: usize,
}
