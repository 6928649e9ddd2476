//! Reports of the store's upkeep.

use agency_core::FileId;
use agency_core::Timestamp;
use serde::{Deserialize, Serialize};

/// What one `gc` run removed (or, for a dry run, would remove).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GcReport {
    pub dry_run: bool,
    /// Mail acknowledged before this was expired (`None`: mail is kept).
    pub mail_acked_before: Option<Timestamp>,
    pub messages_removed: u64,
    pub bodies_removed: u64,
    /// Bodies of expired messages kept because something else needs them
    /// (a capability granted onward, an unexpired message carrying them).
    pub bodies_kept: u64,
    pub capabilities_revoked: u64,
    /// Events that happened before this were removed (`None`: events
    /// are kept).
    #[serde(default)]
    pub events_before: Option<Timestamp>,
    #[serde(default)]
    pub events_removed: u64,
    /// Unreferenced blobs removed (a dry run counts those unreferenced now;
    /// bodies it would remove free their blobs only in a real run).
    pub blobs_removed: u64,
    pub bytes_freed: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "problem", rename_all = "snake_case")]
pub enum FsckProblem {
    MissingBlob {
        file: FileId,
        version: i64,
        blob: String,
    },
    CorruptBlob {
        file: FileId,
        version: i64,
        blob: String,
        actual: String,
    },
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FsckReport {
    pub versions_checked: usize,
    pub blobs_checked: usize,
    pub problems: Vec<FsckProblem>,
    /// Blobs present that no version row or run record references.
    pub unreferenced_blobs: Vec<String>,
}

impl FsckReport {
    /// No row points at a missing or corrupt blob.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}
