//! Persistence for Agency behind the [`Store`] / [`Tx`] traits, plus the
//! content-addressed [`BlobStore`].
//!
//! Only this crate knows SQL. The service layer runs each operation as one
//! closure inside [`write()`] or [`read`]; a backend (SQLite now, PostgreSQL
//! later) implements [`Tx`] with plain row-level queries and makes the
//! closure atomic. No access rule lives here: the store answers questions
//! and applies changes, the service decides.

pub mod blob;
pub mod calls;
#[cfg(feature = "conformance")]
pub mod conformance;
mod dir_sync;
pub mod error;
pub mod events;
pub mod fsck;
pub mod leases;
pub mod lessons;
pub mod mcp_pins;
pub mod memory;
pub mod model;
pub mod org_messages;
pub mod org_tools;
pub mod orgs;
pub mod pipelines;
pub mod problems;
mod spread;
pub mod sqlite;
pub mod store;
pub mod tx;
mod unnamed;

#[cfg(feature = "fault-injection")]
pub use blob::FaultHook;
pub use blob::{BlobCheck, BlobId, BlobStore, FsBlobStore, PutStep};
pub use calls::{CallRow, CallStatus};
pub use error::{Cause, StoreError};
pub use events::{EventFilter, EventRow, EventScope, NewEventRow};
pub use fsck::{FsckProblem, FsckReport, fsck};
pub use leases::{LeaseOwnerRow, LeaseRow};
pub use lessons::{JudgeCheckRow, LessonFilter, LessonLogRow, LessonRow, LessonState};
pub use mcp_pins::{McpPinChangeRow, McpPinRow, PinChangeStatus};
pub use memory::{
    CompactionStatus, MemoryChangeRow, MemoryCompactionRow, MemoryCounts, MemoryFilter, MemoryRow,
    MemoryState,
};
pub use model::*;
pub use org_messages::{OrgKeyRow, OrgMessageRow, OrgMessageStatus};
pub use org_tools::OrgToolRow;
pub use orgs::{OrgAgentRow, OrgAgentStatus, OrgGrantRow, OrgRow};
pub use pipelines::{
    LibraryEntryRow, LibraryKind, PipelineRunRow, PipelineRunStatus, PipelineStageRow, StageStatus,
};
pub use problems::ProblemRow;
pub use spread::spread_subdirectories;
pub use sqlite::SqliteStore;
pub use store::{Store, read, write, write_lazy};
pub use tx::{Tx, prelude};
