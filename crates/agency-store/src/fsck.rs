//! `fsck`: re-hash every blob a version row points at and report rows whose
//! blob is missing or corrupt, plus blobs no row points at, neither a
//! version nor a run record (transcript, captured output): harmless, left
//! by a failed or refused write, reclaimable by garbage collection.

use std::collections::BTreeSet;

use agency_core::FileId;

use crate::blob::{BlobCheck, BlobId, BlobStore};
use crate::error::StoreError;
use crate::store::{Store, read};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FsckProblem {
    MissingBlob {
        file: FileId,
        version: i64,
        blob: BlobId,
    },
    CorruptBlob {
        file: FileId,
        version: i64,
        blob: BlobId,
        actual: BlobId,
    },
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FsckReport {
    pub versions_checked: usize,
    pub blobs_checked: usize,
    pub problems: Vec<FsckProblem>,
    /// Blobs present that no version row or run record references.
    pub unreferenced_blobs: Vec<BlobId>,
}

impl FsckReport {
    /// No row points at a missing or corrupt blob.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
    }
}

pub fn fsck(store: &dyn Store, blobs: &dyn BlobStore) -> Result<FsckReport, StoreError> {
    let versions = read(store, |tx| tx.all_versions())?;
    let mut report = FsckReport {
        versions_checked: versions.len(),
        ..FsckReport::default()
    };
    let mut referenced = BTreeSet::new();
    let mut verdicts: std::collections::BTreeMap<BlobId, BlobCheck> = Default::default();
    for v in &versions {
        referenced.insert(v.hash.clone());
        let verdict = match verdicts.get(&v.hash) {
            Some(c) => c.clone(),
            None => {
                let c = blobs.check(&v.hash)?;
                verdicts.insert(v.hash.clone(), c.clone());
                c
            }
        };
        match verdict {
            BlobCheck::Ok => {}
            BlobCheck::Missing => report.problems.push(FsckProblem::MissingBlob {
                file: v.file,
                version: v.version,
                blob: v.hash.clone(),
            }),
            BlobCheck::Corrupt { actual } => report.problems.push(FsckProblem::CorruptBlob {
                file: v.file,
                version: v.version,
                blob: v.hash.clone(),
                actual,
            }),
        }
    }
    report.blobs_checked = verdicts.len();
    let candidates: Vec<BlobId> = blobs
        .list()?
        .into_iter()
        .filter(|b| !referenced.contains(b))
        .collect();
    // Blobs no version points at may still be a run record's (its
    // transcript, its captured output): referenced by the same rule that
    // keeps them from garbage collection, so fsck and gc agree.
    let mut unreferenced = Vec::new();
    for chunk in candidates.chunks(512) {
        let used: BTreeSet<BlobId> = read(store, |tx| tx.referenced_blobs(chunk))?
            .into_iter()
            .collect();
        unreferenced.extend(chunk.iter().filter(|b| !used.contains(*b)).cloned());
    }
    unreferenced.sort();
    report.unreferenced_blobs = unreferenced;
    Ok(report)
}
