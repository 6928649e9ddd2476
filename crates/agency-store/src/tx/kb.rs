//! [`KbTx`]: the Knowledge Base: files, their versions and access log, KB
//! search candidates, work product.

use agency_core::access::FileKind;
use agency_core::{FileId, HandlerId};

use super::R;
use crate::model::{FileRow, KbAuditRow, KbCandidate, VersionRow};

/// Knowledge Base: files, their versions and access log, KB search
/// candidates, work product.
pub trait KbTx {
    /// Insert a file row (with `latest_version` as given, normally 0 until
    /// its first version is inserted).
    fn insert_file(&mut self, file: &FileRow) -> R<()>;
    fn file(&mut self, id: FileId) -> R<Option<FileRow>>;
    fn set_file_description(&mut self, id: FileId, description: &str) -> R<()>;
    /// Insert a version row and set the file's `latest_version` to it.
    /// Fails with `StoreError::Unique` if that version number exists.
    fn insert_version(&mut self, v: &VersionRow) -> R<()>;
    fn version(&mut self, file: FileId, version: i64) -> R<Option<VersionRow>>;
    /// All versions, oldest first.
    fn versions(&mut self, file: FileId) -> R<Vec<VersionRow>>;
    /// Versions after `after` (from 1 when `None`), oldest first.
    fn versions_after(
        &mut self,
        file: FileId,
        after: Option<i64>,
        limit: usize,
    ) -> R<Vec<VersionRow>>;
    /// Every version row of every file, ordered by (file, version). For fsck.
    fn all_versions(&mut self) -> R<Vec<VersionRow>>;
    fn insert_kb_audit(&mut self, rows: &[KbAuditRow]) -> R<()>;
    /// A file's access log, oldest first, at most `limit` rows.
    fn kb_audit(&mut self, file: FileId, limit: usize) -> R<Vec<KbAuditRow>>;
    /// Files possibly visible to `handler` (`None`: the user, who sees all),
    /// whose description contains every term (already lowercased; matched
    /// case-insensitively as substrings), with id greater than `after`,
    /// ordered by id, at most `limit`. Candidates are: files the handler
    /// holds a live KB capability on; state documents and audit logs it owns
    /// or its direct underlings own; outcome files in its area.
    fn kb_candidates(
        &mut self,
        handler: Option<HandlerId>,
        terms: &[String],
        after: Option<FileId>,
        limit: usize,
    ) -> R<Vec<KbCandidate>>;
    /// The work product of a set of handlers, ordered by id: documents and
    /// message bodies they created, message bodies delivered to them, and
    /// the state documents and audit logs they own.
    fn work_product(&mut self, handlers: &[HandlerId]) -> R<Vec<FileRow>>;
    /// Files of `kind` that `handler` created, counted up to `limit`.
    fn files_created_by(&mut self, handler: HandlerId, kind: FileKind, limit: usize) -> R<usize>;
    /// Delete a file with its versions and access log (no message may
    /// still point at it).
    fn delete_file(&mut self, id: FileId) -> R<()>;
}
