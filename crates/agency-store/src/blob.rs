//! The content-addressed blob store: `blobs/<2 hex>/<62 hex>`, named by the
//! BLAKE3 hash of the content. Identical content is stored once.
//!
//! A put is durable before it returns: write to a temporary file, fsync it,
//! put it into place, fsync the directory (one directory fsync shared by
//! the puts that placed a blob into it in the same window, see `dir_sync`).
//! The temporary file is an unnamed one in the blob's own directory, linked
//! into place (`unnamed`), where the filesystem allows it; otherwise a
//! named one in `tmp/`, renamed into place. The
//! service commits the row that points at a blob only after the put
//! returned, so a crash in between leaves at worst an unreferenced blob,
//! never a row pointing at nothing.
//!
//! With the `fault-injection` feature, `FsBlobStore::set_fault_hook` lets
//! the fault suite fail any [`PutStep`] with the I/O error of its choice
//! (a full disk, a failed fsync); without it the hook does not exist.

use std::collections::HashSet;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::path::{Path, PathBuf};
#[cfg(feature = "fault-injection")]
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError, RwLock};
use std::time::SystemTime;

use crate::dir_sync::DirSyncs;
use crate::error::StoreError;
use crate::unnamed;

/// A blob's name: the hash algorithm and the hex digest, `blake3:<64 hex>`.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BlobId(String);

const PREFIX: &str = "blake3:";

impl BlobId {
    /// The id `content` is stored under.
    pub fn of(content: &[u8]) -> BlobId {
        BlobId(format!("{PREFIX}{}", blake3::hash(content).to_hex()))
    }

    /// Parse a stored or caller-supplied id, refusing anything that is not
    /// `blake3:` followed by 64 lowercase hex digits (so an id can never
    /// name a path outside the store).
    pub fn parse(s: &str) -> Option<BlobId> {
        let hex = s.strip_prefix(PREFIX)?;
        (hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
        .then(|| BlobId(s.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    fn hex(&self) -> &str {
        &self.0[PREFIX.len()..]
    }
}

impl fmt::Display for BlobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for BlobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BlobId({})", self.0)
    }
}

/// The result of re-hashing one blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlobCheck {
    Ok,
    Missing,
    Corrupt { actual: BlobId },
}

/// Where KB contents live.
pub trait BlobStore: Send + Sync + fmt::Debug {
    /// Store `content`; idempotent. Durable when this returns, or, for a
    /// blob store that shares one write-ahead log with its store's rows
    /// (PostgreSQL's), at the latest with the store's next durable commit:
    /// a row that points at the blob, committed after this returned, is
    /// never durable without it.
    fn put(&self, content: &[u8]) -> Result<BlobId, StoreError>;
    /// Read a blob back, verifying its hash.
    fn get(&self, id: &BlobId) -> Result<Vec<u8>, StoreError>;
    /// Re-hash one blob.
    fn check(&self, id: &BlobId) -> Result<BlobCheck, StoreError>;
    /// Every blob present, in no particular order.
    fn list(&self) -> Result<Vec<BlobId>, StoreError>;

    /// Garbage collection, one shard at a time (`shard` is the first byte
    /// of the hash): the blobs of that shard last put before `before` (a
    /// put of content already present counts as a put), in no particular
    /// order, with their sizes. A store that cannot collect garbage says so.
    fn list_put_before(
        &self,
        shard: u8,
        before: SystemTime,
    ) -> Result<Vec<(BlobId, u64)>, StoreError> {
        let _ = (shard, before);
        Err(StoreError::backend(
            "list blobs for garbage collection",
            "this blob store does not support garbage collection",
        ))
    }

    /// Remove a blob if it was last put before `before`; returns the bytes
    /// freed, or `None` if it was kept or absent. Serialised with `put`, so
    /// a blob a put has just vouched for (whose row is about to be
    /// committed) is never removed once that put returned.
    fn remove_if_put_before(
        &self,
        id: &BlobId,
        before: SystemTime,
    ) -> Result<Option<u64>, StoreError> {
        let _ = (id, before);
        Err(StoreError::backend(
            "remove a blob",
            "this blob store does not support garbage collection",
        ))
    }
}

/// The steps of [`FsBlobStore::put`] that touch the disk, in order: the
/// points where the fault suite can make one fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PutStep {
    /// Creating the temporary file.
    CreateTemp,
    /// Writing the content, after half of it is written (a disk filling up).
    Write,
    /// fsync of the temporary file.
    FsyncTemp,
    /// Putting it into place: a link of the unnamed file, or a rename of
    /// the named one.
    Place,
    /// fsync of the blob's directory, making the new entry durable.
    FsyncDir,
}

/// Decides, per step, whether that step fails and with which error.
#[cfg(feature = "fault-injection")]
pub type FaultHook = Arc<dyn Fn(PutStep) -> Option<std::io::Error> + Send + Sync>;

#[cfg(feature = "fault-injection")]
#[derive(Default)]
struct FaultSlot(RwLock<Option<FaultHook>>);

#[cfg(feature = "fault-injection")]
impl fmt::Debug for FaultSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FaultSlot")
    }
}

/// How many blob ids [`FsBlobStore`] remembers as durable before it
/// forgets them all (a few MiB at most); forgetting only costs an fsync.
const DURABLE_MEMORY: usize = 16_384;

/// Blobs as files under a directory.
#[derive(Debug)]
pub struct FsBlobStore {
    root: PathBuf,
    tmp: PathBuf,
    /// Whether new blobs are written as unnamed files (see `unnamed`);
    /// decided by a probe at the first new blob, so that a store opened
    /// only to be read never writes.
    unnamed: OnceLock<bool>,
    counter: AtomicU64,
    /// Blobs this process has seen through to a synced directory entry: a
    /// put of one of them is done as soon as the file is seen. (The service
    /// puts each KB version twice, before and inside its transaction.)
    durable: Mutex<HashSet<BlobId>>,
    /// Puts hold it shared, garbage collection's removals exclusively: a
    /// removal never lands between a put's check that the blob exists (and
    /// its refresh of the blob's time) and the put's return.
    gc: RwLock<()>,
    /// Directory fsyncs shared by concurrent puts.
    dir_syncs: DirSyncs,
    #[cfg(feature = "fault-injection")]
    fault: FaultSlot,
}

impl FsBlobStore {
    /// Open (creating if needed) a blob directory. Leftover temporary files
    /// from a crash are removed: they were never renamed into place, so no
    /// row can point at them.
    pub fn open(root: impl Into<PathBuf>) -> Result<FsBlobStore, StoreError> {
        let root = root.into();
        let tmp = root.join("tmp");
        fs::create_dir_all(&tmp).map_err(|e| io("create blob directory", &tmp, e))?;
        if let Ok(entries) = fs::read_dir(&tmp) {
            for entry in entries.flatten() {
                let _ = fs::remove_file(entry.path());
            }
        }
        Ok(FsBlobStore {
            root,
            tmp,
            unnamed: OnceLock::new(),
            counter: AtomicU64::new(0),
            durable: Mutex::new(HashSet::new()),
            gc: RwLock::new(()),
            dir_syncs: DirSyncs::default(),
            #[cfg(feature = "fault-injection")]
            fault: FaultSlot::default(),
        })
    }

    /// Fault injection: from now on, `hook` is asked at every [`PutStep`]
    /// and an error it returns fails that step (`None` removes the hook).
    #[cfg(feature = "fault-injection")]
    pub fn set_fault_hook(&self, hook: Option<FaultHook>) {
        *self.fault.0.write().unwrap_or_else(PoisonError::into_inner) = hook;
    }

    /// The injected error for `step`, if any.
    #[cfg(feature = "fault-injection")]
    fn fault(&self, step: PutStep) -> std::io::Result<()> {
        let slot = self.fault.0.read().unwrap_or_else(PoisonError::into_inner);
        match slot.as_ref().and_then(|hook| hook(step)) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    #[cfg(not(feature = "fault-injection"))]
    #[inline(always)]
    fn fault(&self, _: PutStep) -> std::io::Result<()> {
        Ok(())
    }

    /// Write `content` to a temporary file and fsync it: the first half,
    /// then the second, so that an injected full disk leaves a torn file
    /// behind, as a real one would. `at` names the file in errors.
    fn write_synced(&self, f: &mut File, content: &[u8], at: &Path) -> Result<(), StoreError> {
        let (first, second) = content.split_at(content.len() / 2);
        f.write_all(first)
            .and_then(|()| self.fault(PutStep::Write))
            .and_then(|()| f.write_all(second))
            .map_err(|e| io("write temporary blob file", at, e))?;
        self.fault(PutStep::FsyncTemp)
            .and_then(|()| f.sync_all())
            .map_err(|e| io("fsync temporary blob file", at, e))
    }

    /// Whether this store writes new blobs as unnamed files: probed once,
    /// at the first new blob, which also marks the root so that the
    /// fan-out directories made from then on spread over the file
    /// system's groups (concurrent puts then allocate inodes apart,
    /// `spread.rs`).
    fn use_unnamed(&self) -> bool {
        *self.unnamed.get_or_init(|| {
            crate::spread_subdirectories(&self.root);
            // A name of its own per probe: stores opened side by side on
            // one root in one process must not race on it.
            static PROBES: AtomicU64 = AtomicU64::new(0);
            let n = PROBES.fetch_add(1, Ordering::Relaxed);
            unnamed::supported(&self.tmp, &format!("probe-{}-{n}", std::process::id()))
        })
    }

    /// A new blob as an unnamed file in `dir`, linked as `dest`. A failure
    /// leaves nothing behind: the unnamed file goes with its descriptor.
    fn place_unnamed(&self, content: &[u8], dir: &Path, dest: &Path) -> Result<(), StoreError> {
        let mut f = self
            .fault(PutStep::CreateTemp)
            .and_then(|()| unnamed::create(dir))
            .map_err(|e| io("create temporary blob file", dir, e))?;
        self.write_synced(&mut f, content, dir)?;
        match self
            .fault(PutStep::Place)
            .and_then(|()| unnamed::link(&f, dest))
        {
            // A concurrent put of the same content linked first; its file
            // was fsynced before its link, like ours.
            Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(()),
            other => other.map_err(|e| io("put blob into place at", dest, e)),
        }
    }

    /// A new blob as a named temporary file in `tmp/`, renamed to `dest`;
    /// the temporary file is removed if anything fails.
    fn place_named(&self, content: &[u8], id: &BlobId, dest: &Path) -> Result<(), StoreError> {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let tmp = self
            .tmp
            .join(format!("{}-{}-{n}", std::process::id(), &id.hex()[..16]));
        let result = (|| {
            let mut f = self
                .fault(PutStep::CreateTemp)
                .and_then(|()| OpenOptions::new().write(true).create_new(true).open(&tmp))
                .map_err(|e| io("create temporary blob file", &tmp, e))?;
            self.write_synced(&mut f, content, &tmp)?;
            drop(f);
            self.fault(PutStep::Place)
                .and_then(|()| fs::rename(&tmp, dest))
                .map_err(|e| io("put blob into place at", dest, e))
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn is_known_durable(&self, id: &BlobId) -> bool {
        self.durable
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(id)
    }

    fn remember_durable(&self, id: &BlobId) {
        let mut known = self.durable.lock().unwrap_or_else(PoisonError::into_inner);
        if known.len() >= DURABLE_MEMORY {
            known.clear();
        }
        known.insert(id.clone());
    }

    /// Where a blob lives on disk.
    pub fn path_of(&self, id: &BlobId) -> PathBuf {
        let hex = id.hex();
        self.root.join(&hex[..2]).join(&hex[2..])
    }
}

fn io(action: &'static str, path: &Path, source: std::io::Error) -> StoreError {
    StoreError::Io {
        action,
        path: path.to_owned(),
        cause: source,
    }
}

impl BlobStore for FsBlobStore {
    fn put(&self, content: &[u8]) -> Result<BlobId, StoreError> {
        let _gc = self.gc.read().unwrap_or_else(PoisonError::into_inner);
        let id = BlobId::of(content);
        let dest = self.path_of(&id);
        let dir = dest.parent().expect("blob paths have a parent");
        let sync_dir = || {
            self.fault(PutStep::FsyncDir)
                .and_then(|()| self.dir_syncs.sync(dir))
                .map_err(|e| io("fsync blob directory", dir, e))
        };
        if dest.exists() {
            // The blob may be an old orphan that garbage collection is
            // about to remove; its modification time is its last put, so
            // refresh it: the grace period then covers the commit of the
            // row that this put is for.
            File::open(&dest)
                .and_then(|f| f.set_modified(SystemTime::now()))
                .map_err(|e| io("refresh the time of blob", &dest, e))?;
            if self.is_known_durable(&id) {
                return Ok(id);
            }
            // The file may have been put into place by a put whose
            // directory fsync failed (or by a process that died before
            // it): its entry is durable only once the directory is synced,
            // and a row will point at it as soon as this returns.
            sync_dir()?;
            self.remember_durable(&id);
            return Ok(id);
        }
        let result = (|| {
            // Before the fan-out directory is made (see `use_unnamed`).
            let unnamed = self.use_unnamed();
            if !dir.is_dir() {
                fs::create_dir_all(dir).map_err(|e| io("create blob directory", dir, e))?;
                // A new fan-out directory's own entry must be durable too,
                // or the blob could vanish with it in a crash.
                File::open(&self.root)
                    .and_then(|d| d.sync_all())
                    .map_err(|e| io("fsync blob directory", &self.root, e))?;
            }
            match unnamed {
                true => self.place_unnamed(content, dir, &dest),
                false => self.place_named(content, &id, &dest),
            }?;
            // The new entry is durable only once the directory is.
            sync_dir()
        })();
        result.map(|()| {
            self.remember_durable(&id);
            id
        })
    }

    fn get(&self, id: &BlobId) -> Result<Vec<u8>, StoreError> {
        let path = self.path_of(id);
        let mut buf = Vec::new();
        match File::open(&path) {
            Ok(mut f) => f
                .read_to_end(&mut buf)
                .map_err(|e| io("read blob", &path, e))?,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                return Err(StoreError::MissingBlob(id.clone()));
            }
            Err(e) => return Err(io("open blob", &path, e)),
        };
        let actual = BlobId::of(&buf);
        if &actual != id {
            return Err(StoreError::CorruptBlob {
                id: id.clone(),
                actual,
            });
        }
        Ok(buf)
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
        let mut out = Vec::new();
        let top = fs::read_dir(&self.root).map_err(|e| io("list blob directory", &self.root, e))?;
        for dir in top.flatten() {
            let name = dir.file_name();
            let Some(prefix) = name.to_str().filter(|n| n.len() == 2) else {
                continue;
            };
            let sub =
                fs::read_dir(dir.path()).map_err(|e| io("list blob directory", &dir.path(), e))?;
            for f in sub.flatten() {
                if let Some(rest) = f.file_name().to_str()
                    && let Some(id) = BlobId::parse(&format!("{PREFIX}{prefix}{rest}"))
                {
                    out.push(id);
                }
            }
        }
        Ok(out)
    }

    fn list_put_before(
        &self,
        shard: u8,
        before: SystemTime,
    ) -> Result<Vec<(BlobId, u64)>, StoreError> {
        let prefix = format!("{shard:02x}");
        let dir = self.root.join(&prefix);
        let entries = match fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io("list blob directory", &dir, e)),
        };
        let mut out = Vec::new();
        for f in entries.flatten() {
            let Some(id) = f
                .file_name()
                .to_str()
                .and_then(|rest| BlobId::parse(&format!("{PREFIX}{prefix}{rest}")))
            else {
                continue;
            };
            // A blob whose time cannot be read is treated as fresh: kept.
            if let Ok(meta) = f.metadata()
                && meta.modified().is_ok_and(|t| t < before)
            {
                out.push((id, meta.len()));
            }
        }
        Ok(out)
    }

    fn remove_if_put_before(
        &self,
        id: &BlobId,
        before: SystemTime,
    ) -> Result<Option<u64>, StoreError> {
        let _gc = self.gc.write().unwrap_or_else(PoisonError::into_inner);
        let path = self.path_of(id);
        let meta = match fs::metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io("read the time of blob", &path, e)),
        };
        let modified = meta
            .modified()
            .map_err(|e| io("read the time of blob", &path, e))?;
        if modified >= before {
            return Ok(None);
        }
        fs::remove_file(&path).map_err(|e| io("remove blob", &path, e))?;
        self.durable
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id);
        Ok(Some(meta.len()))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[test]
    fn put_get_dedupe_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let s = FsBlobStore::open(dir.path()).unwrap();
        let a = s.put(b"hello").unwrap();
        let b = s.put(b"hello").unwrap();
        assert_eq!(a, b);
        assert_eq!(s.list().unwrap(), vec![a.clone()]);
        assert_eq!(s.get(&a).unwrap(), b"hello");
        assert_eq!(s.check(&a).unwrap(), BlobCheck::Ok);
        fs::write(s.path_of(&a), b"HELLO").unwrap();
        assert!(matches!(s.check(&a).unwrap(), BlobCheck::Corrupt { .. }));
        fs::remove_file(s.path_of(&a)).unwrap();
        assert_eq!(s.check(&a).unwrap(), BlobCheck::Missing);
        assert!(matches!(s.get(&a), Err(StoreError::MissingBlob(_))));
    }

    /// Every entry under the store's root: only fan-out directories of
    /// whole blobs, and an empty `tmp/`.
    fn assert_only_blobs(s: &FsBlobStore) {
        for dir in fs::read_dir(s.root()).unwrap().flatten() {
            let name = dir.file_name().into_string().unwrap();
            if name == "tmp" {
                assert_eq!(
                    fs::read_dir(dir.path()).unwrap().count(),
                    0,
                    "tmp/ is empty"
                );
                continue;
            }
            for f in fs::read_dir(dir.path()).unwrap().flatten() {
                let rest = f.file_name().into_string().unwrap();
                let id = BlobId::parse(&format!("{PREFIX}{name}{rest}"))
                    .unwrap_or_else(|| panic!("not a blob: {name}/{rest}"));
                assert_eq!(s.check(&id).unwrap(), BlobCheck::Ok);
            }
        }
    }

    #[test]
    fn unnamed_and_named_temporary_files_both_place_concurrent_puts_whole() {
        for unnamed in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let mut s = FsBlobStore::open(dir.path()).unwrap();
            assert_eq!(s.unnamed.get(), None, "no probe before the first put");
            assert!(
                s.use_unnamed(),
                "the probe finds O_TMPFILE on the test's filesystem"
            );
            s.unnamed = OnceLock::from(unnamed);
            let s = Arc::new(s);
            // Eight threads put the same 16 contents, so puts of one
            // content race each other to place it.
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    let s = s.clone();
                    std::thread::spawn(move || {
                        (0..16)
                            .map(|i| s.put(format!("content {i}").as_bytes()).unwrap())
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            for h in handles {
                let ids = h.join().unwrap();
                for (i, id) in ids.iter().enumerate() {
                    assert_eq!(s.get(id).unwrap(), format!("content {i}").as_bytes());
                }
            }
            assert_eq!(s.list().unwrap().len(), 16, "unnamed: {unnamed}");
            assert_only_blobs(&s);
        }
    }

    #[test]
    fn gc_lists_and_removes_only_blobs_put_before_the_cutoff() {
        let dir = tempfile::tempdir().unwrap();
        let s = FsBlobStore::open(dir.path()).unwrap();
        let old = s.put(b"old").unwrap();
        let young = s.put(b"young").unwrap();
        let hour_ago = SystemTime::now() - std::time::Duration::from_secs(3600);
        File::open(s.path_of(&old))
            .unwrap()
            .set_modified(hour_ago)
            .unwrap();
        let cutoff = SystemTime::now() - std::time::Duration::from_secs(60);
        let shard = |id: &BlobId| u8::from_str_radix(&id.hex()[..2], 16).unwrap();
        assert_eq!(
            s.list_put_before(shard(&old), cutoff).unwrap(),
            vec![(old.clone(), 3)]
        );
        assert!(
            !s.list_put_before(shard(&young), cutoff)
                .unwrap()
                .iter()
                .any(|(id, _)| id == &young)
        );
        assert_eq!(s.remove_if_put_before(&young, cutoff).unwrap(), None);
        // Putting the old content again refreshes it: it is no longer
        // older than the cutoff, so it stays.
        s.put(b"old").unwrap();
        assert_eq!(s.remove_if_put_before(&old, cutoff).unwrap(), None);
        File::open(s.path_of(&old))
            .unwrap()
            .set_modified(hour_ago)
            .unwrap();
        assert_eq!(s.remove_if_put_before(&old, cutoff).unwrap(), Some(3));
        assert_eq!(s.check(&old).unwrap(), BlobCheck::Missing);
        assert_eq!(s.remove_if_put_before(&old, cutoff).unwrap(), None);
        // A put after removal writes it anew.
        s.put(b"old").unwrap();
        assert_eq!(s.get(&old).unwrap(), b"old");
    }

    #[test]
    fn ids_are_validated() {
        let id = BlobId::of(b"x");
        assert_eq!(BlobId::parse(id.as_str()), Some(id.clone()));
        for bad in [
            "",
            "blake3:",
            "sha256:00",
            "blake3:../../etc/passwd",
            &id.as_str().to_uppercase(),
        ] {
            assert_eq!(BlobId::parse(bad), None, "{bad}");
        }
    }
}
