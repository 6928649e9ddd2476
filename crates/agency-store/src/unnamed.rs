//! New blobs as unnamed files (`O_TMPFILE`) linked into place, where the
//! filesystem allows it.
//!
//! Why: a named temporary file is created, and later renamed, under its
//! directory's lock. With every put's temporary file in one `tmp/`
//! directory, concurrent puts queue on that one lock, and on ext4 the
//! inode allocation done while holding it can be slow (after many
//! deletions it scans past recently freed inodes): measured,
//! 30% of the CPU of 16 concurrent writers went to spinning on that lock
//! and on the cross-directory rename's. An unnamed file takes no
//! directory lock to create, needs no rename, and leaves nothing behind
//! when a put fails or the process dies before the link: the kernel frees
//! an unnamed inode once its last descriptor closes. The link takes the
//! lock of the blob's own directory only, one of 256.
//!
//! The link goes through `/proc/self/fd/N` with `AT_SYMLINK_FOLLOW`:
//! `AT_EMPTY_PATH` would need `CAP_DAC_READ_SEARCH`. A filesystem without
//! `O_TMPFILE`, or a process without `/proc`, fails [`supported`]'s probe
//! and the store keeps named temporary files.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use rustix::fs::{AtFlags, CWD, OFlags, linkat};

/// An unnamed, writable file on the filesystem of directory `dir`.
pub(crate) fn create(dir: &Path) -> io::Result<File> {
    // O_TMPFILE carries O_DIRECTORY: the path names the directory.
    OpenOptions::new()
        .write(true)
        .custom_flags(OFlags::TMPFILE.bits() as i32)
        .open(dir)
}

/// Give the unnamed `file` the name `dest` (on the same filesystem).
/// `AlreadyExists` if `dest` exists.
pub(crate) fn link(file: &File, dest: &Path) -> io::Result<()> {
    let source = format!("/proc/self/fd/{}", file.as_raw_fd());
    linkat(CWD, source.as_str(), CWD, dest, AtFlags::SYMLINK_FOLLOW).map_err(io::Error::from)
}

/// Whether unnamed files can be created in `dir` and linked into it:
/// one probe, named `probe` in `dir` and removed again.
pub(crate) fn supported(dir: &Path, probe: &str) -> bool {
    let name = dir.join(probe);
    let linked = create(dir).and_then(|f| link(&f, &name));
    let _ = std::fs::remove_file(&name);
    linked.is_ok()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn an_unnamed_file_gets_its_content_under_its_name_and_never_replaces_one() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            supported(dir.path(), "probe"),
            "tmpfs/ext4 support O_TMPFILE"
        );
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let mut f = create(dir.path()).unwrap();
        f.write_all(b"content").unwrap();
        let dest = dir.path().join("blob");
        link(&f, &dest).unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"content");
        let mut g = create(dir.path()).unwrap();
        g.write_all(b"other").unwrap();
        assert_eq!(
            link(&g, &dest).unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
        assert_eq!(std::fs::read(&dest).unwrap(), b"content");
    }

    #[test]
    fn a_file_as_directory_fails_the_probe() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plain");
        std::fs::write(&file, b"").unwrap();
        assert!(!supported(&file, "probe"));
    }
}
