//! Knowledge Base operations: create, compare-and-set write, read, history,
//! list and browse, each checked against the caller's access level.
//!
//! Writes of caller content take three steps so that the blob's fsync does
//! not happen under the store's write lock: a read-only pre-check (so a
//! refused caller cannot fill the disk), the durable blob put, then the
//! write transaction, which checks everything again before committing.

use agency_core::access::FileKind;
use agency_core::validate::search_terms;
use agency_core::{FileId, Level, Principal, Resource, kb_access};
use agency_store::{BlobId, CapOrigin, FileRow, KbAction, KbAuditRow, NewCapability, Tx};

use crate::Result;
use crate::access::{ensure_level, file_at_level, kb_level};
use crate::error::ServiceError;
use crate::events::Event;
use crate::render::{Author, Content, append_version_of, create_file_of};
use crate::service::{Caller, Op, Service, authenticate};
use crate::views::{FileContent, FileInfo, Page, VersionInfo};

impl Service {
    /// Create a document; the creating handler gets delegatable Write on it,
    /// scoped to its root outcome.
    pub fn kb_create(&self, who: Principal, description: &str, content: &[u8]) -> Result<FileId> {
        self.check_description(description)?;
        self.cfg
            .limits
            .check_content("the file content", content.len())?;
        // The quota is checked before the blob is stored too, so a refused
        // caller leaves nothing behind.
        let check = |tx: &mut dyn Tx| -> Result<Caller> {
            let caller = authenticate(tx, who)?;
            if let Some(h) = caller.handler() {
                crate::quotas::check_kb_files(tx, &self.cfg.limits, h)?;
            }
            Ok(caller)
        };
        self.read(|tx| check(tx).map(drop))?;
        let hash = self.blobs.put(content)?;
        let id = FileId::new_random();
        self.write(|op| {
            let caller = check(op.tx)?;
            let stored = Content::Stored(hash.clone(), content.len());
            create_document_of(op, &caller, id, FileKind::Document, description, stored)?;
            Ok(id)
        })
    }

    /// Compare-and-set write: succeeds only if `(base_version, base_hash)`
    /// is the file's latest version; otherwise a `Conflict` naming the
    /// current version and hash.
    pub fn kb_write(
        &self,
        who: Principal,
        file: FileId,
        content: &[u8],
        base_version: i64,
        base_hash: &str,
    ) -> Result<VersionInfo> {
        self.cfg
            .limits
            .check_content("the file content", content.len())?;
        let base_hash = BlobId::parse(base_hash).ok_or_else(|| {
            ServiceError::invalid(format!(
                "failed to write KB file {file}: base hash {base_hash:?} is not a hash this KB gave out (expected blake3:<64 hex digits>)"
            ))
        })?;
        let check = |tx: &mut dyn Tx| -> Result<(Caller, FileRow)> {
            let caller = authenticate(tx, who)?;
            // Say "Agency writes this" before "you may not", so an agent is
            // pointed at the operation it should use instead.
            let (f, level) = file_at_level(tx, &caller, file, Level::None, "write")?;
            if f.kind.system_written() {
                return Err(ServiceError::invalid(format!(
                    "failed to write KB file {file}: Agency writes {} files itself; use the outcome or audit operations",
                    f.kind.as_str()
                )));
            }
            if f.kind.immutable() {
                return Err(ServiceError::invalid(format!(
                    "failed to write KB file {file}: it is a message body, which never changes once sent; send a new message instead"
                )));
            }
            ensure_level(file, level, Level::Write, "write")?;
            check_base(tx, &f, base_version, &base_hash)?;
            Ok((caller, f))
        };
        self.read(|tx| check(tx).map(drop))?;
        let hash = self.blobs.put(content)?;
        let stored = || Content::Stored(hash.clone(), content.len());
        let v = self.write(|op| {
            let (caller, f) = check(op.tx)?;
            let author = Author {
                handler: caller.handler(),
                agent: caller.agent(),
            };
            let v = append_version_of(op, f.id, f.latest_version, stored(), author)?;
            op.emit(Event::KbWritten {
                file,
                by: caller.handler(),
                description: f.description,
            });
            Ok(v)
        })?;
        Ok(version_info(v))
    }

    /// The latest version of a file the caller may read.
    pub fn kb_read(&self, who: Principal, file: FileId) -> Result<FileContent> {
        self.read_at(who, file, None)
    }

    /// A given version of a file the caller may read.
    pub fn kb_read_version(
        &self,
        who: Principal,
        file: FileId,
        version: i64,
    ) -> Result<FileContent> {
        self.read_at(who, file, Some(version))
    }

    fn read_at(&self, who: Principal, file: FileId, version: Option<i64>) -> Result<FileContent> {
        let (caller, f, v) = self.read(|tx| {
            let caller = authenticate(tx, who)?;
            let (f, _) = file_at_level(tx, &caller, file, Level::Read, "read")?;
            let want = version.unwrap_or(f.latest_version);
            let v = tx.version(file, want)?.ok_or_else(|| {
                ServiceError::invalid(format!(
                    "failed to read KB file {file} version {want}: versions run from 1 to {}",
                    f.latest_version
                ))
            })?;
            Ok((caller, f, v))
        })?;
        let content = self.blobs.get(&v.hash)?;
        self.read_audit.record(KbAuditRow {
            file,
            at: self.now(),
            handler: caller.handler(),
            agent: caller.agent(),
            action: KbAction::Read,
            version: v.version,
        });
        Ok(FileContent {
            id: f.id,
            kind: f.kind,
            description: f.description,
            version: v.version,
            hash: v.hash,
            created_at: v.created_at,
            content,
        })
    }

    /// The first `limits.max_list` versions of a file the caller may read,
    /// oldest first; page through the rest with `kb_history_page`.
    pub fn kb_history(&self, who: Principal, file: FileId) -> Result<Vec<VersionInfo>> {
        let all = Some(self.cfg.limits.max_list);
        Ok(self.kb_history_page(who, file, None, all)?.items)
    }

    /// A file's access log (who read and wrote it, when), for callers with
    /// Read on it.
    pub fn kb_audit(
        &self,
        who: Principal,
        file: FileId,
        limit: Option<usize>,
    ) -> Result<Vec<agency_api::KbAuditEntry>> {
        self.read_audit.flush()?;
        let limit = self.cfg.limits.page(limit);
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            file_at_level(tx, &caller, file, Level::Read, "view the access log of")?;
            Ok(tx
                .kb_audit(file, limit)?
                .into_iter()
                .map(crate::wire::kb_audit)
                .collect())
        })
    }

    /// Files the caller may read (Read or Write), ordered by id; page with
    /// `after`.
    pub fn kb_list(
        &self,
        who: Principal,
        after: Option<FileId>,
        limit: Option<usize>,
    ) -> Result<Vec<FileInfo>> {
        Ok(self.kb_list_page(who, after, limit)?.items)
    }

    /// `kb_list` with the cursor of the next page: a page ends at `limit`
    /// files or `limits.max_page_bytes` of descriptions.
    pub fn kb_list_page(
        &self,
        who: Principal,
        after: Option<FileId>,
        limit: Option<usize>,
    ) -> Result<Page<FileInfo, FileId>> {
        self.visible_files(who, &[], Level::Read, after, limit)
    }

    /// `kb_browse` with the cursor of the next page (as `kb_list_page`).
    pub fn kb_browse_page(
        &self,
        who: Principal,
        query: &str,
        after: Option<FileId>,
        limit: Option<usize>,
    ) -> Result<Page<FileInfo, FileId>> {
        let terms = search_terms(query)?;
        self.visible_files(who, &terms, Level::None, after, limit)
    }

    /// Search descriptions of every file the caller knows of (at least
    /// None); every word of `query` must appear, case-insensitively.
    pub fn kb_browse(
        &self,
        who: Principal,
        query: &str,
        after: Option<FileId>,
        limit: Option<usize>,
    ) -> Result<Vec<FileInfo>> {
        Ok(self.kb_browse_page(who, query, after, limit)?.items)
    }

    fn visible_files(
        &self,
        who: Principal,
        terms: &[String],
        min: Level,
        after: Option<FileId>,
        limit: Option<usize>,
    ) -> Result<Page<FileInfo, FileId>> {
        let limit = self.cfg.limits.page(limit);
        let budget = self.cfg.limits.max_page_bytes;
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            let mut out = Vec::new();
            let mut bytes = 0usize;
            let full = |out: Vec<FileInfo>| {
                let next = out.last().map(|f: &FileInfo| f.id);
                Ok(Page { items: out, next })
            };
            let mut cursor = after;
            // Candidates may be filtered out by the access rule, so fetch
            // pages until the caller's page is full or candidates run out.
            loop {
                let batch = tx.kb_candidates(caller.handler(), terms, cursor, limit)?;
                let exhausted = batch.len() < limit;
                for c in batch {
                    cursor = Some(c.file.id);
                    let level = match &caller {
                        Caller::User => kb_access(agency_core::KbFacts {
                            caller_is_user: true,
                            kind: c.file.kind,
                            owner: agency_core::access::OwnerRelation::Other,
                            cap: None,
                            outcome_readable: false,
                        }),
                        Caller::Handler { .. } => kb_access(agency_core::KbFacts {
                            caller_is_user: false,
                            kind: c.file.kind,
                            owner: if c.owned {
                                agency_core::access::OwnerRelation::Owner
                            } else if c.of_underling {
                                agency_core::access::OwnerRelation::BossOfOwner
                            } else {
                                agency_core::access::OwnerRelation::Other
                            },
                            cap: c.cap,
                            outcome_readable: c.outcome_in_area,
                        }),
                    };
                    if let Some(level) = level.filter(|l| *l >= min) {
                        // Descriptions may be long: the page also ends at
                        // its byte budget (always holding at least one file).
                        bytes += 256 + c.file.description.len();
                        if !out.is_empty() && bytes > budget {
                            return full(out);
                        }
                        out.push(FileInfo {
                            id: c.file.id,
                            kind: c.file.kind,
                            description: c.file.description,
                            level,
                            latest_version: c.file.latest_version,
                        });
                        if out.len() == limit {
                            return full(out);
                        }
                    }
                }
                if exhausted {
                    return Ok(Page {
                        items: out,
                        next: None,
                    });
                }
            }
        })
    }

    /// Read the level a caller has on one file (for interfaces that want to
    /// explain access); `NotFound` if the file does not exist for it.
    pub fn kb_level(&self, who: Principal, file: FileId) -> Result<Level> {
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            let f = tx
                .file(file)?
                .ok_or_else(|| ServiceError::not_found("KB file", file))?;
            kb_level(tx, &caller, &f)?.ok_or_else(|| ServiceError::not_found("KB file", file))
        })
    }

    pub(crate) fn check_description(&self, description: &str) -> Result<()> {
        if description.trim().is_empty() {
            return Err(ServiceError::invalid(
                "failed to accept description: it is empty; describe the file so others can find it with browse",
            ));
        }
        Ok(self
            .cfg
            .limits
            .check_description("description", description)?)
    }
}

/// Create a caller-content file inside a transaction, with the creator's
/// capability and the creation audit record.
pub(crate) fn create_document(
    op: &mut Op<'_>,
    caller: &Caller,
    id: FileId,
    kind: FileKind,
    description: &str,
    content: &[u8],
) -> Result<()> {
    create_document_of(op, caller, id, kind, description, Content::Bytes(content))
}

/// [`create_document`] of either kind of [`Content`].
fn create_document_of(
    op: &mut Op<'_>,
    caller: &Caller,
    id: FileId,
    kind: FileKind,
    description: &str,
    content: Content<'_>,
) -> Result<()> {
    let row = FileRow {
        id,
        kind,
        description: description.to_owned(),
        owner: None,
        created_at: op.now,
        created_by: caller.handler(),
        latest_version: 0,
    };
    create_file_of(
        op,
        row,
        content,
        Author {
            handler: caller.handler(),
            agent: caller.agent(),
        },
    )?;
    if let Caller::Handler { row: h, .. } = caller {
        // The creator keeps Write for as long as it works on its root
        // outcome; finishing that outcome revokes it like any scoped grant.
        // A message body is immutable: its sender keeps Read (delegatable,
        // so that delivery can derive the recipient's Read from it).
        let cap = NewCapability {
            holder: h.id,
            resource: Resource::Kb(id),
            level: if kind.immutable() {
                Level::Read
            } else {
                Level::Write
            },
            delegatable: true,
            scope: Some(h.id.root()),
            derived_from: None,
            granted_by: Some(h.id),
            origin: CapOrigin::Creator,
            created_at: op.now,
        };
        let cap_id = op.tx.insert_capability(&cap)?;
        op.emit(Event::CapabilityGranted {
            capability: cap_id,
            holder: h.id,
            resource: cap.resource,
        });
    }
    op.emit(Event::KbWritten {
        file: id,
        by: caller.handler(),
        description: description.to_owned(),
    });
    Ok(())
}

fn check_base(tx: &mut dyn Tx, f: &FileRow, base_version: i64, base_hash: &BlobId) -> Result<()> {
    let latest = tx.version(f.id, f.latest_version)?.ok_or_else(|| {
        ServiceError::invalid(format!(
            "failed to write KB file {}: it has no version yet",
            f.id
        ))
    })?;
    if latest.version != base_version || &latest.hash != base_hash {
        return Err(ServiceError::Conflict {
            file: f.id.to_string(),
            current_version: latest.version,
            current_hash: latest.hash,
        });
    }
    Ok(())
}

pub(crate) fn version_info(v: agency_store::VersionRow) -> VersionInfo {
    VersionInfo {
        file: v.file,
        version: v.version,
        hash: v.hash.as_str().to_owned(),
        size: v.size,
        created_at: v.created_at,
        handler: v.handler,
        agent: v.agent,
    }
}
