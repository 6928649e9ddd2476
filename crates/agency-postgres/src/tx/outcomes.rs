//! [`OutcomeTx`] on PostgreSQL.
#![allow(unused_variables)]

use agency_core::{HandlerId, OutcomeId, Timestamp};
use agency_store::model::{OutcomeEventRow, OutcomeRow};
use agency_store::tx::R;
use agency_store::tx::{OutcomeTx, SubtreeRows};

use crate::PgTx;
use crate::convert::*;

impl OutcomeTx for PgTx<'_> {
    fn insert_outcome(&mut self, o: &OutcomeRow) -> R<()> {
        execute(
            self.conn,
            concat!(
                "INSERT INTO outcomes (",
                outcome_cols!(),
                ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
            ),
            &[
                &o.id.to_string(),
                &o.title,
                &o.description,
                &o.status.as_str(),
                &o.status_reason,
                &o.priority,
                &flag(o.perpetual),
                &flag(o.process_inbox),
                &o.responsible.to_string(),
                &o.created_at.0,
                &o.updated_at.0,
            ],
            || format!("insert outcome {}", o.id),
        )
        .map(drop)
    }
    fn outcome(&mut self, id: OutcomeId) -> R<Option<OutcomeRow>> {
        Err(unported("outcome"))
    }
    fn update_outcome(&mut self, o: &OutcomeRow) -> R<()> {
        Err(unported("update_outcome"))
    }
    fn insert_edge(&mut self, parent: OutcomeId, child: OutcomeId) -> R<()> {
        Err(unported("insert_edge"))
    }
    fn delete_edge(&mut self, parent: OutcomeId, child: OutcomeId) -> R<()> {
        Err(unported("delete_edge"))
    }
    fn parents(&mut self, id: OutcomeId) -> R<Vec<OutcomeId>> {
        Err(unported("parents"))
    }
    fn children(&mut self, id: OutcomeId) -> R<Vec<OutcomeId>> {
        Err(unported("children"))
    }
    fn is_descendant_or_self(&mut self, node: OutcomeId, ancestor: OutcomeId) -> R<bool> {
        Err(unported("is_descendant_or_self"))
    }
    fn ancestor_edges(&mut self, id: OutcomeId) -> R<Vec<(OutcomeId, OutcomeId)>> {
        Err(unported("ancestor_edges"))
    }
    fn subtree(&mut self, id: OutcomeId, limit: usize) -> R<SubtreeRows> {
        Err(unported("subtree"))
    }
    fn reassign_subtree(
        &mut self,
        root: OutcomeId,
        from: HandlerId,
        to: HandlerId,
        at: Timestamp,
    ) -> R<u64> {
        Err(unported("reassign_subtree"))
    }
    fn reassign_all(&mut self, from: &[HandlerId], to: HandlerId, at: Timestamp) -> R<u64> {
        Err(unported("reassign_all"))
    }
    fn insert_outcome_event(&mut self, e: &OutcomeEventRow) -> R<()> {
        Err(unported("insert_outcome_event"))
    }
    fn outcome_events(&mut self, id: OutcomeId) -> R<Vec<OutcomeEventRow>> {
        Err(unported("outcome_events"))
    }
    fn outcome_event_count(&mut self, id: OutcomeId) -> R<i64> {
        Err(unported("outcome_event_count"))
    }
    fn outcome_events_after(
        &mut self,
        id: OutcomeId,
        after: Option<i64>,
        limit: usize,
    ) -> R<Vec<(i64, OutcomeEventRow)>> {
        Err(unported("outcome_events_after"))
    }
    fn outcome_events_latest(
        &mut self,
        id: OutcomeId,
        limit: usize,
    ) -> R<Vec<(i64, OutcomeEventRow)>> {
        Err(unported("outcome_events_latest"))
    }
    fn open_process_inbox(&mut self, handler: HandlerId) -> R<Option<OutcomeId>> {
        Err(unported("open_process_inbox"))
    }
    fn outcomes_of(&mut self, handler: HandlerId, limit: usize) -> R<Vec<OutcomeRow>> {
        Err(unported("outcomes_of"))
    }
    fn child_counts(&mut self, id: OutcomeId) -> R<(i64, i64)> {
        Err(unported("child_counts"))
    }
    fn children_by_state(
        &mut self,
        id: OutcomeId,
        finished: bool,
        limit: usize,
    ) -> R<Vec<OutcomeId>> {
        Err(unported("children_by_state"))
    }
    fn outcomes_created_by(&mut self, handler: HandlerId, limit: usize) -> R<usize> {
        Err(unported("outcomes_created_by"))
    }
}
