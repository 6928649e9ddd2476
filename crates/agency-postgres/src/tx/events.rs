//! [`EventTx`] on PostgreSQL.
#![allow(unused_variables)]

use agency_core::{HandlerId, Timestamp};
use agency_store::events::{EventFilter, EventRow, NewEventRow};
use agency_store::tx::EventTx;
use agency_store::tx::R;

use crate::PgTx;
use crate::convert::unported;

impl EventTx for PgTx<'_> {
    fn append_event(&mut self, e: &NewEventRow) -> R<i64> {
        Err(unported("append_event"))
    }
    fn events_after(&mut self, f: &EventFilter) -> R<Vec<EventRow>> {
        Err(unported("events_after"))
    }
    fn last_event_at(&mut self, handler: HandlerId, kinds: &[String]) -> R<Option<Timestamp>> {
        Err(unported("last_event_at"))
    }
    fn last_event_seq(&mut self) -> R<i64> {
        Err(unported("last_event_seq"))
    }
    fn delete_events_before(&mut self, before: Timestamp, limit: usize) -> R<usize> {
        Err(unported("delete_events_before"))
    }
    fn count_events_before(&mut self, before: Timestamp, limit: usize) -> R<usize> {
        Err(unported("count_events_before"))
    }
}
