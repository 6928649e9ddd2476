//! A placement hint for directories whose subdirectories churn: the
//! blob store's fan-out and the supervisor's run directories.
//!
//! ext4 places a new file's inode in its directory's block group, and a
//! new directory's in its parent's unless the parent is the root or is
//! marked a "top directory" (`FS_TOPDIR_FL`, `chattr +T`). Everything the
//! daemon makes under its home therefore shares one group with whatever
//! else lives beside the home. Without a journal, ext4 skips an inode
//! freed in the last ~30 s when it allocates one, reading each such inode
//! in turn from the start of the group: with hundreds of agent runs a
//! minute creating and removing their run directories, every file creation
//! in that group scanned thousands of them (the largest kernel
//! cost per tool call). Marking these directories top directories spreads
//! their subdirectories over the groups, so each group sees only its own
//! churn. For the blobs it also spreads concurrent writers: 16 of them
//! wrote 3,500–3,800 KB writes/s with the fan-out spread and 2,500–2,700
//! without (`agency-bench` item 2, same build, six runs and two).
//! Elsewhere
//! the flag means nothing, or cannot be set; either way nothing is lost
//! but the hint.

use std::fs::File;
use std::path::Path;

use rustix::fs::{IFlags, ioctl_getflags, ioctl_setflags};

/// Ask the file system to spread `dir`'s future subdirectories over its
/// allocation groups. Best effort: `false` when the flag could not be set
/// (another file system, no permission), which changes nothing but speed.
pub fn spread_subdirectories(dir: &Path) -> bool {
    let Ok(f) = File::open(dir) else {
        return false;
    };
    let Ok(flags) = ioctl_getflags(&f) else {
        return false;
    };
    if flags.contains(IFlags::TOPDIR) {
        return true;
    }
    ioctl_setflags(&f, flags | IFlags::TOPDIR).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_directory_is_not_spread_and_not_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(!spread_subdirectories(&dir.path().join("absent")));
    }

    #[test]
    fn spreading_twice_is_harmless_and_keeps_the_directory_usable() {
        let dir = tempfile::tempdir().unwrap();
        let first = spread_subdirectories(dir.path());
        assert_eq!(spread_subdirectories(dir.path()), first);
        if first {
            let flags = ioctl_getflags(File::open(dir.path()).unwrap()).unwrap();
            assert!(flags.contains(IFlags::TOPDIR), "{flags:?}");
        }
        std::fs::create_dir(dir.path().join("child")).unwrap();
        assert!(dir.path().join("child").is_dir());
    }
}
