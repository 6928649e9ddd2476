//! [`OutcomeTx`]: outcomes: rows, the DAG of edges, histories (whole and in
//! pages), child counts.

use agency_core::{HandlerId, OutcomeId, Timestamp};

use super::R;
use crate::model::{OutcomeEventRow, OutcomeRow};

/// Outcome rows of a subtree and the (parent, child) edges among them.
pub type SubtreeRows = (Vec<OutcomeRow>, Vec<(OutcomeId, OutcomeId)>);

/// Outcomes: rows, the DAG of edges, histories (whole and in pages), child
/// counts.
pub trait OutcomeTx {
    fn insert_outcome(&mut self, o: &OutcomeRow) -> R<()>;
    fn outcome(&mut self, id: OutcomeId) -> R<Option<OutcomeRow>>;
    /// Overwrite every column of an existing outcome.
    fn update_outcome(&mut self, o: &OutcomeRow) -> R<()>;
    /// Insert the edge parent -> child (idempotent).
    fn insert_edge(&mut self, parent: OutcomeId, child: OutcomeId) -> R<()>;
    fn delete_edge(&mut self, parent: OutcomeId, child: OutcomeId) -> R<()>;
    /// Immediate parents, ordered by id.
    fn parents(&mut self, id: OutcomeId) -> R<Vec<OutcomeId>>;
    /// Immediate children, ordered by id.
    fn children(&mut self, id: OutcomeId) -> R<Vec<OutcomeId>>;
    /// Whether `node` is `ancestor` or a descendant of it.
    fn is_descendant_or_self(&mut self, node: OutcomeId, ancestor: OutcomeId) -> R<bool>;
    /// Every edge (parent, child) on some path from `id` up to a root,
    /// ordered by (child, parent).
    fn ancestor_edges(&mut self, id: OutcomeId) -> R<Vec<(OutcomeId, OutcomeId)>>;
    /// `id` and its descendants (breadth-first discovery, each once), at
    /// most `limit` rows, and the edges among the returned outcomes.
    fn subtree(&mut self, id: OutcomeId, limit: usize) -> R<SubtreeRows>;
    /// Set `responsible = to` on `root` and every descendant whose
    /// responsible handler is `from`; returns how many rows changed.
    fn reassign_subtree(
        &mut self,
        root: OutcomeId,
        from: HandlerId,
        to: HandlerId,
        at: Timestamp,
    ) -> R<u64>;
    /// Set `responsible = to` on every outcome whose responsible handler is
    /// one of `from`; returns how many rows changed.
    fn reassign_all(&mut self, from: &[HandlerId], to: HandlerId, at: Timestamp) -> R<u64>;
    fn insert_outcome_event(&mut self, e: &OutcomeEventRow) -> R<()>;
    /// An outcome's history, oldest first.
    fn outcome_events(&mut self, id: OutcomeId) -> R<Vec<OutcomeEventRow>>;
    /// How many events an outcome's history holds.
    fn outcome_event_count(&mut self, id: OutcomeId) -> R<i64>;
    /// Up to `limit` history events after the one with sequence number
    /// `after` (from the start when `None`), oldest first, each with its
    /// sequence number (the cursor of the next page).
    fn outcome_events_after(
        &mut self,
        id: OutcomeId,
        after: Option<i64>,
        limit: usize,
    ) -> R<Vec<(i64, OutcomeEventRow)>>;
    /// The newest `limit` history events, oldest first.
    fn outcome_events_latest(
        &mut self,
        id: OutcomeId,
        limit: usize,
    ) -> R<Vec<(i64, OutcomeEventRow)>>;
    /// The handler's open Process Inbox outcome, if any.
    fn open_process_inbox(&mut self, handler: HandlerId) -> R<Option<OutcomeId>>;
    /// Outcomes a handler is responsible for, ordered by (priority desc, created_at).
    fn outcomes_of(&mut self, handler: HandlerId, limit: usize) -> R<Vec<OutcomeRow>>;
    /// (children not finished, finished children) of an outcome.
    fn child_counts(&mut self, id: OutcomeId) -> R<(i64, i64)>;
    /// Children not finished (oldest first) or finished (most recently
    /// changed first), at most `limit`.
    fn children_by_state(
        &mut self,
        id: OutcomeId,
        finished: bool,
        limit: usize,
    ) -> R<Vec<OutcomeId>>;
    /// Outcomes `handler` created (their `created` history events), counted
    /// up to `limit`.
    fn outcomes_created_by(&mut self, handler: HandlerId, limit: usize) -> R<usize>;
}
