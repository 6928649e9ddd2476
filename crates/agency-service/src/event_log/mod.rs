//! The event log: every state change an operation makes, and every step of
//! a live run, appended to the store in the transaction of the change it
//! records and numbered in commit order. It is the one source of `agency
//! watch`, the SSE stream, the dashboard and the problems it shows.
//!
//! An operation says what happened in two ways: a domain [`Event`] it
//! emits for the scheduler ([`Op::emit`]) is logged as well, described by
//! `domain.rs`; a fact only the log needs (mail sent, an approval asked for,
//! a model call) is a [`Record`] ([`Op::record`]). Both are kept in the
//! order they happened and appended after the operation's outbox is posted,
//! still inside its transaction: a rolled-back operation leaves no event,
//! a committed one leaves all of its events.
//!
//! Steps of a run that change nothing else (a tool call that only read)
//! are appended in batches by `steps.rs`, each batch its own transaction.
//!
//! Readers (`read.rs`) see the handler subtree they may see: an agent its
//! own handler and those below it, the user everything.

pub(crate) mod domain;
pub(crate) mod own;
mod read;
mod relay;
pub(crate) mod steps;

use agency_api::EventKind;
use agency_core::{AgentId, HandlerId, OutcomeId};
use agency_store::NewEventRow;

use crate::Result;
use crate::events::Event;
use crate::service::Op;

pub(crate) use domain::party;
pub use read::EventQuery;

/// A fact for the log alone (see the module doc).
#[derive(Debug, Clone)]
pub(crate) struct Record {
    pub kind: EventKind,
    pub handler: Option<HandlerId>,
    pub agent: Option<AgentId>,
    pub outcome: Option<OutcomeId>,
    pub summary: String,
    /// A JSON object: the kind's own fields.
    pub data: serde_json::Value,
}

impl Record {
    pub fn new(kind: EventKind, handler: Option<HandlerId>, summary: impl Into<String>) -> Record {
        Record {
            kind,
            handler,
            agent: None,
            outcome: None,
            summary: summary.into(),
            data: serde_json::Value::Object(serde_json::Map::new()),
        }
    }

    pub fn agent(mut self, agent: Option<AgentId>) -> Record {
        self.agent = agent;
        self
    }

    pub fn outcome(mut self, outcome: OutcomeId) -> Record {
        self.outcome = Some(outcome);
        self
    }

    pub fn data(mut self, data: serde_json::Value) -> Record {
        self.data = data;
        self
    }

    pub(crate) fn into_row(self, at: agency_core::Timestamp) -> NewEventRow {
        NewEventRow {
            at,
            kind: self.kind.as_str().to_owned(),
            handler: self.handler,
            agent: self.agent,
            outcome: self.outcome,
            summary: self.summary,
            data: self.data.to_string(),
        }
    }
}

/// What an operation has to log, in order.
#[derive(Debug)]
pub(crate) enum Pending {
    Domain(Event),
    Record(Record),
}

impl Op<'_> {
    /// Publish `e` to the scheduler after commit, and log it.
    pub fn emit(&mut self, e: Event) {
        self.log.push(Pending::Domain(e.clone()));
        self.events.push(e);
    }

    /// Log a fact only the log needs.
    pub fn record(&mut self, r: Record) {
        self.log.push(Pending::Record(r));
    }

    /// Append what the operation logged; the lowest and highest numbers
    /// given, if any (writers are serialised, so the operation's events
    /// are numbered without a gap).
    pub(crate) fn flush_log(&mut self) -> Result<Option<(i64, i64)>> {
        let mut given: Option<(i64, i64)> = None;
        for p in std::mem::take(&mut self.log) {
            let record = match p {
                Pending::Domain(e) => match domain::describe(self.tx, &e)? {
                    Some(r) => r,
                    None => continue,
                },
                Pending::Record(r) => r,
            };
            let seq = self.tx.append_event(&record.into_row(self.now))?;
            given = Some(given.map_or((seq, seq), |(first, _)| (first, seq)));
        }
        Ok(given)
    }
}
