//! [`MemoryTx`]: handlers' memory: rows, full-text and vector search,
//! states, condensations.

use agency_core::{HandlerId, Timestamp};

use super::R;

/// Handlers' memory: rows, full-text and vector search, states, condensations.
pub trait MemoryTx {
    fn insert_memory(&mut self, m: &crate::memory::MemoryRow) -> R<()>;
    fn memory(&mut self, id: agency_core::MemoryId) -> R<Option<crate::memory::MemoryRow>>;
    /// Full-text search of one handler's memories for any of `words`:
    /// (row, score) best first, at most `limit`; the score is BM25 negated
    /// (higher is better). Words without a letter or digit are dropped; none
    /// left, nothing found.
    fn search_memories(
        &mut self,
        words: &[String],
        filter: &crate::memory::MemoryFilter,
        limit: usize,
    ) -> R<Vec<(crate::memory::MemoryRow, f64)>>;
    /// Memories matching `filter`, newest first, at most `limit`.
    fn list_memories(
        &mut self,
        filter: &crate::memory::MemoryFilter,
        limit: usize,
    ) -> R<Vec<crate::memory::MemoryRow>>;
    /// Memories matching `filter` with their embedding by `model` (those
    /// without one are left out).
    fn memory_vectors(
        &mut self,
        filter: &crate::memory::MemoryFilter,
        model: &str,
    ) -> R<Vec<(crate::memory::MemoryRow, Vec<f32>)>>;
    fn put_memory_vector(
        &mut self,
        memory: agency_core::MemoryId,
        model: &str,
        vector: &[f32],
    ) -> R<()>;
    /// Live memories of `handler` that have an embedding by `model`.
    fn memory_embedded_count(&mut self, handler: HandlerId, model: &str) -> R<i64>;
    /// Set a memory's state (and `condensed_into`; `compaction` when
    /// `Some`), stamping `changed_at`.
    fn set_memory_state(
        &mut self,
        id: agency_core::MemoryId,
        state: crate::memory::MemoryState,
        condensed_into: Option<agency_core::MemoryId>,
        compaction: Option<agency_core::MemoryCompactionId>,
        at: Timestamp,
    ) -> R<()>;
    /// The memories a summary replaced.
    fn memories_condensed_into(
        &mut self,
        summary: agency_core::MemoryId,
    ) -> R<Vec<crate::memory::MemoryRow>>;
    fn memory_counts(&mut self, handler: HandlerId) -> R<crate::memory::MemoryCounts>;
    fn memory_live_count(&mut self, handler: HandlerId) -> R<i64>;
    /// The last `limit` changes of a handler's memory, newest first.
    fn memory_changes(
        &mut self,
        handler: HandlerId,
        limit: usize,
    ) -> R<Vec<crate::memory::MemoryChangeRow>>;
    /// Insert a condensation, or overwrite the one with its id.
    fn put_memory_compaction(&mut self, c: &crate::memory::MemoryCompactionRow) -> R<()>;
    fn memory_compaction(
        &mut self,
        id: agency_core::MemoryCompactionId,
    ) -> R<Option<crate::memory::MemoryCompactionRow>>;
    /// A handler's condensations, newest first.
    fn memory_compactions(
        &mut self,
        handler: HandlerId,
        limit: usize,
    ) -> R<Vec<crate::memory::MemoryCompactionRow>>;
    /// The handler's open request to condense, if any.
    fn open_memory_compaction(
        &mut self,
        handler: HandlerId,
    ) -> R<Option<crate::memory::MemoryCompactionRow>>;
}
