//! [`AuditLogTx`]: handlers' audit logs: entries, whole and in pages.

use agency_core::{AgentId, HandlerId};

use super::R;
use crate::model::LogEntryRow;

/// Handlers' audit logs: entries, whole and in pages.
pub trait AuditLogTx {
    fn insert_log_entry(&mut self, e: &LogEntryRow) -> R<()>;
    /// A handler's audit log entries, oldest first.
    fn log_entries(&mut self, handler: HandlerId) -> R<Vec<LogEntryRow>>;
    /// How many entries a handler's audit log holds.
    fn log_entry_count(&mut self, handler: HandlerId) -> R<i64>;
    /// Up to `limit` audit log entries after sequence number `after`,
    /// oldest first.
    fn log_entries_after(
        &mut self,
        handler: HandlerId,
        after: Option<i64>,
        limit: usize,
    ) -> R<Vec<(i64, LogEntryRow)>>;
    /// The newest `limit` audit log entries, oldest first.
    fn log_entries_latest(
        &mut self,
        handler: HandlerId,
        limit: usize,
    ) -> R<Vec<(i64, LogEntryRow)>>;
    /// Up to `limit` audit log entries of `handler` written by `agent`
    /// whose summary starts with `prefix`, oldest first.
    fn log_entries_of_agent(
        &mut self,
        handler: HandlerId,
        agent: AgentId,
        prefix: &str,
        limit: usize,
    ) -> R<Vec<LogEntryRow>>;
}
