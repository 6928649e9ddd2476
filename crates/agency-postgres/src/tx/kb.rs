//! [`KbTx`] on PostgreSQL.
#![allow(unused_variables)]

use agency_core::access::FileKind;
use agency_core::{FileId, HandlerId};
use agency_store::model::{FileRow, KbAuditRow, KbCandidate, VersionRow};
use agency_store::tx::KbTx;
use agency_store::tx::R;

use crate::PgTx;
use crate::convert::*;

impl KbTx for PgTx<'_> {
    fn insert_file(&mut self, f: &FileRow) -> R<()> {
        execute(
            self.conn,
            concat!(
                "INSERT INTO files (",
                file_cols!(),
                ") VALUES ($1, $2, $3, $4, $5, $6, $7)"
            ),
            &[
                &f.id.to_string(),
                &f.kind.as_str(),
                &f.description,
                &opt_text(f.owner),
                &f.created_at.0,
                &opt_text(f.created_by),
                &f.latest_version,
            ],
            || format!("insert file {}", f.id),
        )
        .map(drop)
    }
    fn file(&mut self, id: FileId) -> R<Option<FileRow>> {
        Err(unported("file"))
    }
    fn set_file_description(&mut self, id: FileId, description: &str) -> R<()> {
        Err(unported("set_file_description"))
    }
    fn insert_version(&mut self, v: &VersionRow) -> R<()> {
        Err(unported("insert_version"))
    }
    fn version(&mut self, file: FileId, version: i64) -> R<Option<VersionRow>> {
        Err(unported("version"))
    }
    fn versions(&mut self, file: FileId) -> R<Vec<VersionRow>> {
        Err(unported("versions"))
    }
    fn versions_after(
        &mut self,
        file: FileId,
        after: Option<i64>,
        limit: usize,
    ) -> R<Vec<VersionRow>> {
        Err(unported("versions_after"))
    }
    fn all_versions(&mut self) -> R<Vec<VersionRow>> {
        Err(unported("all_versions"))
    }
    fn insert_kb_audit(&mut self, rows: &[KbAuditRow]) -> R<()> {
        Err(unported("insert_kb_audit"))
    }
    fn kb_audit(&mut self, file: FileId, limit: usize) -> R<Vec<KbAuditRow>> {
        Err(unported("kb_audit"))
    }
    fn kb_candidates(
        &mut self,
        handler: Option<HandlerId>,
        terms: &[String],
        after: Option<FileId>,
        limit: usize,
    ) -> R<Vec<KbCandidate>> {
        Err(unported("kb_candidates"))
    }
    fn work_product(&mut self, handlers: &[HandlerId]) -> R<Vec<FileRow>> {
        Err(unported("work_product"))
    }
    fn files_created_by(&mut self, handler: HandlerId, kind: FileKind, limit: usize) -> R<usize> {
        Err(unported("files_created_by"))
    }
    fn delete_file(&mut self, id: FileId) -> R<()> {
        Err(unported("delete_file"))
    }
}
