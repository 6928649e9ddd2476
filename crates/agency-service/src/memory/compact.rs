//! Condensing a handler's memory. An agent replaces
//! several of its live memories by one summary (`memory_condense`); the
//! originals are kept, marked `condensed` with the summary's id, and every
//! condensation is a `memory_compactions` row the user can list and undo
//! (the summary becomes `forgotten`, the originals `live` again).
//!
//! Agency asks for a condensation when a handler's memory passes
//! `memory.condense_after` live memories (`memory/recall.rs` opens the
//! request); the first condensation after that completes the request.

use agency_core::{HandlerId, MemoryCompactionId, MemoryId, Principal};
use agency_store::{CompactionStatus, MemoryCompactionRow, MemoryRow, MemoryState};

use crate::memory::{
    CompactionView, MAX_CONDENSE_IDS, check_kind, check_tags, check_text, compaction_view, done,
    owned, scope,
};
use crate::service::{Caller, Service, authenticate};
use crate::{Result, ServiceError};
pub use agency_api::CondenseReport;

impl Service {
    /// An agent replaces some of its handler's live memories (`ids`) by one
    /// summary memory (`text`); the originals stay as history.
    pub fn memory_condense(
        &self,
        who: Principal,
        ids: &[MemoryId],
        text: &str,
        tags: &[String],
        kind: Option<&str>,
    ) -> Result<CondenseReport> {
        let what = "condense memories";
        if ids.is_empty() || ids.len() > MAX_CONDENSE_IDS {
            return Err(ServiceError::invalid(format!(
                "failed to {what}: give between 1 and {MAX_CONDENSE_IDS} memory ids"
            )));
        }
        let mut distinct = ids.to_vec();
        distinct.sort();
        distinct.dedup();
        if distinct.len() != ids.len() {
            return Err(ServiceError::invalid(format!(
                "failed to {what}: a memory id is given twice"
            )));
        }
        check_text(what, text)?;
        check_tags(what, tags)?;
        let kind = check_kind(what, kind)?;
        let vector = self.embed_one(text);
        self.write(|op| {
            let caller = authenticate(op.tx, who)?;
            let h = caller.require_handler(what)?.id;
            for id in ids {
                let m = owned(op.tx, h, *id)?;
                if m.state != MemoryState::Live {
                    return Err(ServiceError::invalid(format!(
                        "failed to {what}: memory {id} is {}, not live",
                        m.state.as_str()
                    )));
                }
            }
            // The open request, if Agency asked; else a condensation of the
            // agent's own accord, recorded the same way so it can be undone.
            let request = match op.tx.open_memory_compaction(h)? {
                Some(r) => r,
                None => MemoryCompactionRow {
                    id: MemoryCompactionId::new_random(),
                    handler: h,
                    requested_at: op.now,
                    done_at: None,
                    undone_at: None,
                    status: CompactionStatus::Requested,
                    summary: None,
                },
            };
            let summary = MemoryRow {
                id: MemoryId::new_random(),
                handler: h,
                text: text.to_owned(),
                kind: Some(kind),
                tags: tags.to_vec(),
                created_at: op.now,
                state: MemoryState::Live,
                changed_at: None,
                condensed_into: None,
                compaction: Some(request.id),
            };
            op.tx.insert_memory(&summary)?;
            if let Some((model, v)) = &vector {
                op.tx.put_memory_vector(summary.id, model, v)?;
            }
            for id in ids {
                op.tx.set_memory_state(
                    *id,
                    MemoryState::Condensed,
                    Some(summary.id),
                    Some(request.id),
                    op.now,
                )?;
            }
            let k = request.id;
            op.tx
                .put_memory_compaction(&done(request, summary.id, op.now))?;
            Ok(CondenseReport {
                compaction: k,
                summary: crate::memory::memory_view(summary, None),
                condensed: ids.to_vec(),
            })
        })
    }

    /// A handler's condensations, newest first, with the memories each
    /// replaced: the user any handler's, an agent its own.
    pub fn memory_compactions(
        &self,
        who: Principal,
        handler: Option<HandlerId>,
    ) -> Result<Vec<CompactionView>> {
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            let h = scope(tx, &caller, handler, "list memory compactions")?;
            tx.memory_compactions(h, 200)?
                .into_iter()
                .map(|k| compaction_view(tx, k))
                .collect()
        })
    }

    /// The user undoes a condensation: its summary is forgotten and the
    /// memories it replaced are live again.
    pub fn memory_undo(
        &self,
        who: Principal,
        handler: HandlerId,
        id: MemoryCompactionId,
    ) -> Result<CompactionView> {
        let what = format!("undo memory compaction {id}");
        self.write(|op| {
            let caller = authenticate(op.tx, who)?;
            if !matches!(caller, Caller::User) {
                return Err(ServiceError::denied(format!(
                    "failed to {what}: only the user undoes a condensation"
                )));
            }
            let h = scope(op.tx, &caller, Some(handler), &what)?;
            let k = match op.tx.memory_compaction(id)? {
                Some(k) if k.handler == h => k,
                _ => return Err(ServiceError::not_found("memory compaction", id)),
            };
            let summary = match (k.status, k.summary) {
                (CompactionStatus::Done, Some(s)) => s,
                (status, _) => {
                    return Err(ServiceError::invalid(format!(
                        "failed to {what}: it is {}, not done",
                        status.as_str()
                    )));
                }
            };
            let originals = op.tx.memories_condensed_into(summary)?;
            let s = owned(op.tx, h, summary)?;
            if s.state == MemoryState::Live {
                op.tx
                    .set_memory_state(summary, MemoryState::Forgotten, None, None, op.now)?;
            }
            for m in &originals {
                op.tx
                    .set_memory_state(m.id, MemoryState::Live, None, None, op.now)?;
            }
            let row = MemoryCompactionRow {
                undone_at: Some(op.now),
                status: CompactionStatus::Undone,
                ..k
            };
            op.tx.put_memory_compaction(&row)?;
            Ok(CompactionView {
                row: crate::wire::compaction(row),
                condensed: originals.into_iter().map(|m| m.id).collect(),
            })
        })
    }
}
