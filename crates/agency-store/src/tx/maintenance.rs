//! [`MaintenanceTx`]: queries across every table: id prefixes, counts, blob
//! references (the CLI, fsck, retention).

use super::R;
use crate::blob::BlobId;
use crate::model::{IdKind, StoreCounts};

/// Queries across every table: id prefixes, counts, blob references (the
/// CLI, fsck, retention).
pub trait MaintenanceTx {
    /// Ids of `kind` starting with `prefix` (lowercase hex and '-'), ordered,
    /// at most `limit`.
    fn ids_with_prefix(&mut self, kind: IdKind, prefix: &str, limit: usize) -> R<Vec<uuid::Uuid>>;
    fn counts(&mut self) -> R<StoreCounts>;
    /// The candidates some version row or agent run (transcript, captured
    /// output) points at, in the order given.
    fn referenced_blobs(&mut self, candidates: &[BlobId]) -> R<Vec<BlobId>>;
}
