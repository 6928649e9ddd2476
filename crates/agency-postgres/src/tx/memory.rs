//! [`MemoryTx`] on PostgreSQL.
#![allow(unused_variables)]

use agency_core::{HandlerId, Timestamp};
use agency_store::tx::MemoryTx;
use agency_store::tx::R;

use crate::PgTx;
use crate::convert::unported;

impl MemoryTx for PgTx<'_> {
    fn insert_memory(&mut self, m: &agency_store::memory::MemoryRow) -> R<()> {
        Err(unported("insert_memory"))
    }
    fn memory(&mut self, id: agency_core::MemoryId) -> R<Option<agency_store::memory::MemoryRow>> {
        Err(unported("memory"))
    }
    fn search_memories(
        &mut self,
        words: &[String],
        filter: &agency_store::memory::MemoryFilter,
        limit: usize,
    ) -> R<Vec<(agency_store::memory::MemoryRow, f64)>> {
        Err(unported("search_memories"))
    }
    fn list_memories(
        &mut self,
        filter: &agency_store::memory::MemoryFilter,
        limit: usize,
    ) -> R<Vec<agency_store::memory::MemoryRow>> {
        Err(unported("list_memories"))
    }
    fn memory_vectors(
        &mut self,
        filter: &agency_store::memory::MemoryFilter,
        model: &str,
    ) -> R<Vec<(agency_store::memory::MemoryRow, Vec<f32>)>> {
        Err(unported("memory_vectors"))
    }
    fn put_memory_vector(
        &mut self,
        memory: agency_core::MemoryId,
        model: &str,
        vector: &[f32],
    ) -> R<()> {
        Err(unported("put_memory_vector"))
    }
    fn memory_embedded_count(&mut self, handler: HandlerId, model: &str) -> R<i64> {
        Err(unported("memory_embedded_count"))
    }
    fn set_memory_state(
        &mut self,
        id: agency_core::MemoryId,
        state: agency_store::memory::MemoryState,
        condensed_into: Option<agency_core::MemoryId>,
        compaction: Option<agency_core::MemoryCompactionId>,
        at: Timestamp,
    ) -> R<()> {
        Err(unported("set_memory_state"))
    }
    fn memories_condensed_into(
        &mut self,
        summary: agency_core::MemoryId,
    ) -> R<Vec<agency_store::memory::MemoryRow>> {
        Err(unported("memories_condensed_into"))
    }
    fn memory_counts(&mut self, handler: HandlerId) -> R<agency_store::memory::MemoryCounts> {
        Err(unported("memory_counts"))
    }
    fn memory_live_count(&mut self, handler: HandlerId) -> R<i64> {
        Err(unported("memory_live_count"))
    }
    fn memory_changes(
        &mut self,
        handler: HandlerId,
        limit: usize,
    ) -> R<Vec<agency_store::memory::MemoryChangeRow>> {
        Err(unported("memory_changes"))
    }
    fn put_memory_compaction(&mut self, c: &agency_store::memory::MemoryCompactionRow) -> R<()> {
        Err(unported("put_memory_compaction"))
    }
    fn memory_compaction(
        &mut self,
        id: agency_core::MemoryCompactionId,
    ) -> R<Option<agency_store::memory::MemoryCompactionRow>> {
        Err(unported("memory_compaction"))
    }
    fn memory_compactions(
        &mut self,
        handler: HandlerId,
        limit: usize,
    ) -> R<Vec<agency_store::memory::MemoryCompactionRow>> {
        Err(unported("memory_compactions"))
    }
    fn open_memory_compaction(
        &mut self,
        handler: HandlerId,
    ) -> R<Option<agency_store::memory::MemoryCompactionRow>> {
        Err(unported("open_memory_compaction"))
    }
}
