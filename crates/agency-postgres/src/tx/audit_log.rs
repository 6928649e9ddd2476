//! [`AuditLogTx`] on PostgreSQL.
#![allow(unused_variables)]

use agency_core::{AgentId, HandlerId};
use agency_store::model::LogEntryRow;
use agency_store::tx::AuditLogTx;
use agency_store::tx::R;

use crate::PgTx;
use crate::convert::unported;

impl AuditLogTx for PgTx<'_> {
    fn insert_log_entry(&mut self, e: &LogEntryRow) -> R<()> {
        Err(unported("insert_log_entry"))
    }
    fn log_entries(&mut self, handler: HandlerId) -> R<Vec<LogEntryRow>> {
        Err(unported("log_entries"))
    }
    fn log_entry_count(&mut self, handler: HandlerId) -> R<i64> {
        Err(unported("log_entry_count"))
    }
    fn log_entries_after(
        &mut self,
        handler: HandlerId,
        after: Option<i64>,
        limit: usize,
    ) -> R<Vec<(i64, LogEntryRow)>> {
        Err(unported("log_entries_after"))
    }
    fn log_entries_latest(
        &mut self,
        handler: HandlerId,
        limit: usize,
    ) -> R<Vec<(i64, LogEntryRow)>> {
        Err(unported("log_entries_latest"))
    }
    fn log_entries_of_agent(
        &mut self,
        handler: HandlerId,
        agent: AgentId,
        prefix: &str,
        limit: usize,
    ) -> R<Vec<LogEntryRow>> {
        Err(unported("log_entries_of_agent"))
    }
}
