//! Memory as clients see it.

use agency_core::status::CompactionStatus;
use agency_core::status::MemoryState;
use agency_core::{HandlerId, MemoryCompactionId, MemoryId, Timestamp};
use serde::{Deserialize, Serialize};

use crate::open_enum::open_enum;

/// What `memory_condense` did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CondenseReport {
    pub compaction: MemoryCompactionId,
    pub summary: MemoryView,
    pub condensed: Vec<MemoryId>,
}

/// A memory as interfaces show it; `score` only in search results.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryView {
    pub id: MemoryId,
    pub handler: HandlerId,
    pub text: String,
    pub kind: Option<String>,
    pub tags: Vec<String>,
    pub created_at: Timestamp,
    pub state: MemoryState,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub condensed_into: Option<MemoryId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compaction: Option<MemoryCompactionId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
}

/// How many memories a handler has in each state, and the bytes of its
/// live text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryCounts {
    pub live: i64,
    pub condensed: i64,
    pub forgotten: i64,
    pub live_bytes: i64,
}

/// One change to a handler's memory, newest first in listings: `stored`
/// (at `created_at`) or the state it moved to (at `changed_at`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryChange {
    pub memory: MemoryId,
    pub change: MemoryChangeKind,
    pub at: Timestamp,
}

open_enum! {
    /// What happened to a memory in one [`MemoryChange`]: it was stored, or
    /// the state it moved to.
    pub enum MemoryChangeKind {
        /// Stored (at its `created_at`).
        Stored = "stored",
        /// Live again: a condensation of it was undone.
        Live = "live",
        Forgotten = "forgotten",
        Condensed = "condensed",
    }
}

/// One condensation of a handler's memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compaction {
    pub id: MemoryCompactionId,
    pub handler: HandlerId,
    pub requested_at: Timestamp,
    pub done_at: Option<Timestamp>,
    pub undone_at: Option<Timestamp>,
    pub status: CompactionStatus,
    /// The summary memory it made (once done).
    pub summary: Option<MemoryId>,
}

/// A handler's memory at a glance (`agency memory status`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryStatus {
    pub handler: HandlerId,
    pub counts: MemoryCounts,
    pub last_changes: Vec<MemoryChange>,
    /// The embeddings model when semantic search is configured.
    pub embeddings_model: Option<String>,
    /// Live memories with an embedding by that model.
    pub embedded_live: i64,
    pub open_compaction: Option<Compaction>,
    pub condense_after: usize,
    pub max_per_handler: usize,
}

/// One condensation, with the memories it replaced.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CompactionView {
    #[serde(flatten)]
    pub row: Compaction,
    pub condensed: Vec<MemoryId>,
}
