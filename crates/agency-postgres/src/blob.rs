//! [`PgBlobStore`]: content-addressed blobs in the store's own database
//! (table `blobs`), so a PostgreSQL home is one thing to back up.
//!
//! A put is one upsert in a transaction of its own on a pooled connection
//! (the three statements pipelined, one round trip), never inside a write
//! transaction: it does not take the writers' lock.
//! It commits without waiting for the disk (`synchronous_commit = off`
//! for that transaction): the write-ahead log is one sequence, so the
//! durable commit of the row that points at the blob, which the service
//! makes after the put returned, flushes the put with it. A crash can
//! lose only a blob no durable row points at yet (which a crash between
//! the put and the row would orphan anyway). Waiting for the disk here
//! cost a flush per KB write on top of the row's, while writers queued
//! behind it. A put of content already present only moves its `put_at`,
//! which is what keeps a just-vouched-for blob from the collector: removal
//! is a conditional delete of the same row.

use std::fmt;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use agency_store::{BlobCheck, BlobId, BlobStore, StoreError};

use crate::Shared;
use crate::convert::Ctx;

/// Blobs in a PostgreSQL database; made by [`crate::PgStore::blobs`].
#[derive(Clone)]
pub struct PgBlobStore {
    shared: Arc<Shared>,
}

impl fmt::Debug for PgBlobStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PgBlobStore")
            .field("database", &self.shared.target)
            .finish()
    }
}

fn millis(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The first byte of the hash: the unit of garbage collection.
fn shard(id: &BlobId) -> i16 {
    let hex = id.as_str().strip_prefix("blake3:").unwrap_or("");
    hex.get(..2)
        .and_then(|h| u8::from_str_radix(h, 16).ok())
        .map(i16::from)
        .unwrap_or(0)
}

impl PgBlobStore {
    pub(crate) fn new(shared: Arc<Shared>) -> PgBlobStore {
        PgBlobStore { shared }
    }

    /// Run one auto-committed statement's worth of work on a pooled
    /// connection.
    fn with<T>(
        &self,
        f: impl FnOnce(&mut crate::conn::Conn) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut conn = self.shared.take()?;
        let out = f(&mut conn);
        self.shared.put(conn);
        out
    }
}

impl BlobStore for PgBlobStore {
    fn put(&self, content: &[u8]) -> Result<BlobId, StoreError> {
        let id = BlobId::of(content);
        let op = || self.shared.op(&format!("store blob {id}"));
        self.with(|c| {
            c.execute_alone(
                "BEGIN; SET LOCAL synchronous_commit = off",
                "INSERT INTO blobs (id, shard, content, put_at) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (id) DO UPDATE SET put_at = GREATEST(blobs.put_at, excluded.put_at)",
                &[
                    &id.as_str(),
                    &shard(&id),
                    &content,
                    &millis(SystemTime::now()),
                ],
            )
            .ctx(op)
        })?;
        Ok(id)
    }

    fn get(&self, id: &BlobId) -> Result<Vec<u8>, StoreError> {
        let op = || self.shared.op(&format!("read blob {id}"));
        let row = self.with(|c| {
            c.query_opt("SELECT content FROM blobs WHERE id = $1", &[&id.as_str()])
                .ctx(op)
        })?;
        let Some(row) = row else {
            return Err(StoreError::MissingBlob(id.clone()));
        };
        let content: Vec<u8> = row.try_get(0).ctx(op)?;
        let actual = BlobId::of(&content);
        if &actual != id {
            return Err(StoreError::CorruptBlob {
                id: id.clone(),
                actual,
            });
        }
        Ok(content)
    }

    fn check(&self, id: &BlobId) -> Result<BlobCheck, StoreError> {
        match self.get(id) {
            Ok(_) => Ok(BlobCheck::Ok),
            Err(StoreError::MissingBlob(_)) => Ok(BlobCheck::Missing),
            Err(StoreError::CorruptBlob { actual, .. }) => Ok(BlobCheck::Corrupt { actual }),
            Err(e) => Err(e),
        }
    }

    fn list(&self) -> Result<Vec<BlobId>, StoreError> {
        let op = || self.shared.op("list blobs");
        let rows = self.with(|c| c.query("SELECT id FROM blobs", &[]).ctx(op))?;
        rows.iter()
            .map(|r| {
                let s: String = r.try_get(0).ctx(op)?;
                BlobId::parse(&s).ok_or_else(|| StoreError::corrupt("blob id", s))
            })
            .collect()
    }

    fn list_put_before(
        &self,
        shard: u8,
        before: SystemTime,
    ) -> Result<Vec<(BlobId, u64)>, StoreError> {
        let op = || self.shared.op(&format!("list blobs of shard {shard:02x}"));
        let rows = self.with(|c| {
            c.query(
                "SELECT id, octet_length(content)::BIGINT FROM blobs WHERE shard = $1 AND put_at < $2",
                &[&i16::from(shard), &millis(before)],
            )
            .ctx(op)
        })?;
        rows.iter()
            .map(|r| {
                let s: String = r.try_get(0).ctx(op)?;
                let size: i64 = r.try_get(1).ctx(op)?;
                let id = BlobId::parse(&s).ok_or_else(|| StoreError::corrupt("blob id", s))?;
                Ok((id, u64::try_from(size).unwrap_or(0)))
            })
            .collect()
    }

    fn remove_if_put_before(
        &self,
        id: &BlobId,
        before: SystemTime,
    ) -> Result<Option<u64>, StoreError> {
        let op = || self.shared.op(&format!("remove blob {id}"));
        let row = self.with(|c| {
            c.query_opt(
                "DELETE FROM blobs WHERE id = $1 AND put_at < $2 RETURNING octet_length(content)::BIGINT",
                &[&id.as_str(), &millis(before)],
            )
            .ctx(op)
        })?;
        row.map(|r| {
            let size: i64 = r.try_get(0).ctx(op)?;
            Ok(u64::try_from(size).unwrap_or(0))
        })
        .transpose()
    }
}
