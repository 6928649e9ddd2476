//! Rows of each handler's memory (migration 19): memories,
//! their embeddings and the condensations of a handler's memory. What may
//! be stored, who may read it and how it is ranked are the service's
//! (`agency-service`'s `memory.rs`); these are plain rows.

pub use agency_core::status::{CompactionStatus, MemoryState};
use agency_core::{HandlerId, MemoryCompactionId, MemoryId, Timestamp};

/// One memory of one handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryRow {
    pub id: MemoryId,
    pub handler: HandlerId,
    pub text: String,
    pub kind: Option<String>,
    pub tags: Vec<String>,
    pub created_at: Timestamp,
    pub state: MemoryState,
    /// When `state` last changed (`None`: live since it was stored).
    pub changed_at: Option<Timestamp>,
    /// For a condensed memory: the summary that replaced it.
    pub condensed_into: Option<MemoryId>,
    /// The condensation that made this memory (a summary) or condensed it.
    pub compaction: Option<MemoryCompactionId>,
}

/// Which of one handler's memories a search or listing considers. The
/// handler is required: no query ever spans handlers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryFilter {
    pub handler: HandlerId,
    /// States included (empty: live only).
    pub states: Vec<MemoryState>,
    pub kind: Option<String>,
    /// Every one of these tags must be on the memory.
    pub tags: Vec<String>,
    /// Created at or after.
    pub since: Option<Timestamp>,
    /// Created before.
    pub until: Option<Timestamp>,
}

impl MemoryFilter {
    /// Live memories of `handler`, nothing else filtered.
    pub fn live(handler: HandlerId) -> MemoryFilter {
        MemoryFilter {
            handler,
            states: vec![MemoryState::Live],
            kind: None,
            tags: Vec::new(),
            since: None,
            until: None,
        }
    }
}

/// How many memories a handler has in each state, and the bytes of its
/// live text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoryCounts {
    pub live: i64,
    pub condensed: i64,
    pub forgotten: i64,
    pub live_bytes: i64,
}

/// One change to a handler's memory, newest first in listings: `stored`
/// (at `created_at`) or the state it moved to (at `changed_at`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryChangeRow {
    pub memory: MemoryId,
    /// `stored`, `live` (restored by an undo), `forgotten` or `condensed`.
    pub change: String,
    pub at: Timestamp,
}

/// One condensation of a handler's memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryCompactionRow {
    pub id: MemoryCompactionId,
    pub handler: HandlerId,
    pub requested_at: Timestamp,
    pub done_at: Option<Timestamp>,
    pub undone_at: Option<Timestamp>,
    pub status: CompactionStatus,
    /// The summary memory it made (once done).
    pub summary: Option<MemoryId>,
}
