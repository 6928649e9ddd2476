//! Retention: `gc` removes what nothing needs any more, and nothing else.
//!
//! 1. Acknowledged mail past `acked_mail_days`: the envelope goes, and its
//!    body file goes with it when the body is only the message's own: a
//!    `message` file that no unexpired envelope carries and on which every
//!    live capability exists only because of the message (the recipients'
//!    Read gained through mail, the sender's creator capability). Those
//!    capabilities are revoked (kept as revoked rows, for the audit trail).
//!    A body anyone granted onward, or attached to a newer message, stays;
//!    attached documents are never removed. Batches of [`BATCH`] messages,
//!    each its own transaction, so the writer is never held for long.
//! 2. Blobs no version row points at, last put more than `blob_grace` ago.
//!    Caller content is put before the row that points at it commits; a
//!    put of content already present refreshes the blob's time, and the
//!    blob store serialises removals with puts, so a blob whose row is being
//!    committed is always younger than the grace period and kept. Versions
//!    are never removed: every version of a file that exists stays readable
//!    (`kb_read_version`), the newest above all.
//!
//! Nothing else is ever removed: outcomes, handlers, audit logs, state
//! documents, runs and documents stay. Afterwards fsck is clean (no row
//! points at a missing blob), which the tests check.

use std::collections::BTreeSet;
use std::time::SystemTime;

use agency_core::access::FileKind;
use agency_core::{FileId, MessageId, Principal, Resource, Timestamp};
use agency_store::{BlobId, CapOrigin, RevokeSelector, Tx};

use crate::Result;
use crate::error::ServiceError;
use crate::events::Event;
use crate::service::settings::Retention;
use crate::service::{Service, System, authenticate};
pub use agency_api::GcReport;

/// Messages expired per transaction.
const BATCH: usize = 256;
/// Events removed per transaction.
const EVENT_BATCH: usize = 4096;
/// Blobs checked against the version rows per read transaction.
const BLOB_CHUNK: usize = 512;
const DAY_MS: i64 = 24 * 3600 * 1000;

impl Service {
    fn retention(&self) -> Retention {
        self.retention
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Apply the retention policy (user only). `dry_run` changes nothing
    /// and reports what a run would remove now.
    pub fn gc(&self, who: Principal, dry_run: bool) -> Result<GcReport> {
        let caller = self.read(|tx| authenticate(tx, who))?;
        if !caller.is_user() {
            return Err(ServiceError::denied(
                "failed to collect garbage: only the user may run gc",
            ));
        }
        let mut report = GcReport {
            dry_run,
            ..GcReport::default()
        };
        let days = self.retention().acked_mail_days;
        if days > 0 {
            let before = Timestamp(
                self.now()
                    .0
                    .saturating_sub(i64::from(days).saturating_mul(DAY_MS)),
            );
            report.mail_acked_before = Some(before);
            // Reads of bodies queued before now must land before their
            // files may go (later ones are dropped by the audit thread).
            self.read_audit.flush()?;
            self.expire_mail(before, dry_run, &mut report)?;
        }
        let days = self.retention().event_days;
        if days > 0 {
            let before = Timestamp(
                self.now()
                    .0
                    .saturating_sub(i64::from(days).saturating_mul(DAY_MS)),
            );
            report.events_before = Some(before);
            self.expire_events(before, dry_run, &mut report)?;
        }
        self.sweep_blobs(dry_run, &mut report)?;
        Ok(report)
    }

    /// Remove events that happened before `before`, [`EVENT_BATCH`] per
    /// transaction (a dry run counts them).
    fn expire_events(&self, before: Timestamp, dry_run: bool, report: &mut GcReport) -> Result<()> {
        if dry_run {
            let n = self.read(|tx| Ok(tx.count_events_before(before, usize::MAX)?))?;
            report.events_removed = n as u64;
            return Ok(());
        }
        loop {
            let n = self.write(|op| Ok(op.tx.delete_events_before(before, EVENT_BATCH)?))?;
            report.events_removed += n as u64;
            if n < EVENT_BATCH {
                return Ok(());
            }
        }
    }

    fn expire_mail(&self, before: Timestamp, dry_run: bool, report: &mut GcReport) -> Result<()> {
        let mut cursor: Option<(Timestamp, MessageId)> = None;
        // A dry run removes nothing, so a body carried by several expired
        // messages would be met again: count it once.
        let mut counted: BTreeSet<FileId> = BTreeSet::new();
        loop {
            let mut step = |tx: &mut dyn Tx,
                            now: Timestamp,
                            events: &mut Vec<Event>|
             -> Result<(usize, GcReport)> {
                let mut r = GcReport::default();
                let rows = tx.acked_messages_before(before, cursor, BATCH)?;
                let mut files = BTreeSet::new();
                for m in &rows {
                    if !dry_run {
                        tx.delete_message(m.id)?;
                    }
                    r.messages_removed += 1;
                    files.insert(m.file);
                }
                if let Some(last) = rows.last() {
                    cursor = Some((last.acked_at.unwrap_or(before), last.id));
                }
                for f in files {
                    if dry_run && !counted.insert(f) {
                        continue;
                    }
                    expire_body(tx, f, before, now, dry_run, &mut r, events)?;
                }
                Ok((rows.len(), r))
            };
            let (n, r) = if dry_run {
                let now = self.now();
                self.read(|tx| step(tx, now, &mut Vec::new()))?
            } else {
                self.write(|op| {
                    let mut events = Vec::new();
                    let out = step(op.tx, op.now, &mut events)?;
                    for e in events {
                        op.emit(e);
                    }
                    Ok(out)
                })?
            };
            report.messages_removed += r.messages_removed;
            report.bodies_removed += r.bodies_removed;
            report.bodies_kept += r.bodies_kept;
            report.capabilities_revoked += r.capabilities_revoked;
            if n < BATCH {
                return Ok(());
            }
        }
    }

    fn sweep_blobs(&self, dry_run: bool, report: &mut GcReport) -> Result<()> {
        // The cutoff is fixed before any row is read: a row committed after
        // the snapshot below had its blob put after the cutoff.
        let cutoff = SystemTime::now()
            .checked_sub(self.retention().blob_grace)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        for shard in 0..=u8::MAX {
            let candidates = self.blobs.list_put_before(shard, cutoff)?;
            for chunk in candidates.chunks(BLOB_CHUNK) {
                let ids: Vec<BlobId> = chunk.iter().map(|(id, _)| id.clone()).collect();
                let used: BTreeSet<BlobId> = self
                    .read(|tx| Ok(tx.referenced_blobs(&ids)?))?
                    .into_iter()
                    .collect();
                for (id, size) in chunk.iter().filter(|(id, _)| !used.contains(id)) {
                    let freed = if dry_run {
                        Some(*size)
                    } else {
                        self.blobs.remove_if_put_before(id, cutoff)?
                    };
                    if let Some(n) = freed {
                        report.blobs_removed += 1;
                        report.bytes_freed += n;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Remove the body `file` of expired mail if it is only the messages' own.
fn expire_body(
    tx: &mut dyn Tx,
    file: FileId,
    before: Timestamp,
    now: Timestamp,
    dry_run: bool,
    r: &mut GcReport,
    events: &mut Vec<Event>,
) -> Result<()> {
    let Some(f) = tx.file(file)? else {
        return Ok(());
    };
    if f.kind != FileKind::Message {
        // An attached document lives on its own.
        return Ok(());
    }
    if tx.file_in_unexpired_mail(file, before)? {
        r.bodies_kept += 1;
        return Ok(());
    }
    let caps = tx.live_capabilities_on(&Resource::Kb(file))?;
    let own = caps.iter().all(|c| match c.origin {
        CapOrigin::Mail => true,
        CapOrigin::Creator => Some(c.holder) == f.created_by,
        // A retired subtree's work product handed to its boss is the
        // boss's to keep, like anything granted onward.
        CapOrigin::User | CapOrigin::Grant | CapOrigin::System | CapOrigin::Handover => false,
    });
    if !own {
        r.bodies_kept += 1;
        return Ok(());
    }
    r.bodies_removed += 1;
    if dry_run {
        r.capabilities_revoked += caps.len() as u64;
        return Ok(());
    }
    // Every envelope still carrying it is expired too (checked above).
    r.messages_removed += tx.delete_messages_carrying(file)? as u64;
    if !caps.is_empty() {
        let ids = caps.iter().map(|c| c.id).collect();
        for c in tx.revoke(&RevokeSelector::Ids(ids), now)? {
            r.capabilities_revoked += 1;
            events.push(Event::CapabilityRevoked {
                capability: c.id,
                holder: c.holder,
                resource: c.resource,
            });
        }
    }
    tx.delete_file(file)?;
    Ok(())
}

impl System {
    /// Daemon (`agency reload`): the `[retention]` that `gc` applies from
    /// its next run.
    pub fn set_retention(&self, retention: Retention) {
        *self.retention.write().unwrap_or_else(|p| p.into_inner()) = retention;
    }
}
