//! [`MaintenanceTx`] on PostgreSQL.
#![allow(unused_variables)]

use agency_store::blob::BlobId;
use agency_store::model::{IdKind, StoreCounts};
use agency_store::tx::MaintenanceTx;
use agency_store::tx::R;

use crate::PgTx;
use crate::convert::unported;

impl MaintenanceTx for PgTx<'_> {
    fn ids_with_prefix(&mut self, kind: IdKind, prefix: &str, limit: usize) -> R<Vec<uuid::Uuid>> {
        Err(unported("ids_with_prefix"))
    }
    fn counts(&mut self) -> R<StoreCounts> {
        Err(unported("counts"))
    }
    fn referenced_blobs(&mut self, candidates: &[BlobId]) -> R<Vec<BlobId>> {
        Err(unported("referenced_blobs"))
    }
}
