//! [`EventTx`]: the event log: append, read a page after a cursor, the
//! newest number, and removal of old rows by retention.

use agency_core::{HandlerId, Timestamp};

use super::R;
use crate::events::{EventFilter, EventRow, NewEventRow};

/// The event log.
pub trait EventTx {
    /// Append one event; returns its sequence number, higher than any
    /// number given before (also before a restart or a removal).
    fn append_event(&mut self, e: &NewEventRow) -> R<i64>;
    /// Up to `f.limit` events matching `f`, numbered above `f.after`, in
    /// sequence order.
    fn events_after(&mut self, f: &EventFilter) -> R<Vec<EventRow>>;
    /// When the newest event about `handler` of one of `kinds` (kinds or
    /// families, as in [`EventFilter::kinds`]; empty: any) happened.
    fn last_event_at(&mut self, handler: HandlerId, kinds: &[String]) -> R<Option<Timestamp>>;
    /// The highest sequence number given so far (0: none yet).
    fn last_event_seq(&mut self) -> R<i64>;
    /// Remove up to `limit` of the oldest events recorded before `before`;
    /// returns how many went. Sequence numbers are not reused.
    fn delete_events_before(&mut self, before: Timestamp, limit: usize) -> R<usize>;
    /// How many events were recorded before `before`, counting up to `limit`.
    fn count_events_before(&mut self, before: Timestamp, limit: usize) -> R<usize>;
}
