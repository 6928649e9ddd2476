//! Placing a clone in an agent's workspace, a directory the agent can
//! write (and so can change while the unconfined daemon works in it): the
//! parent of the destination is resolved once, beneath the workspace's
//! descriptor with no symlink followed (`openat2` with `RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS`), and the clone is renamed into that descriptor
//! without replacing anything, so what the agent swaps afterwards no
//! longer matters.

use std::os::fd::OwnedFd;
use std::path::{Component, Path};

use rustix::fs::{Mode, OFlags, RenameFlags, ResolveFlags};

/// Why a directory could not be placed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PlaceError {
    /// The destination is not acceptable (exists, leads through a
    /// symlink or out of the workspace): the agent can fix it.
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    Failed(String),
}

/// Move the directory `staged` (the daemon's, on the same file system) to
/// `dest`, a relative path beneath `root` (the agent's workspace) whose
/// parent exists and whose last component does not. The parent is
/// resolved beneath `root`'s descriptor without following any symlink,
/// and the rename replaces nothing.
pub(crate) fn place_dir(staged: &Path, root: &Path, dest: &Path) -> Result<(), PlaceError> {
    let invalid = |why: &str| PlaceError::Invalid(format!("{}: {why}", dest.display()));
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for c in dest.components() {
        match c {
            Component::Normal(p) => parts.push(p),
            Component::CurDir => {}
            _ => return Err(invalid("must be relative, without '..'")),
        }
    }
    let Some(leaf) = parts.pop() else {
        return Err(invalid("names no directory"));
    };
    let parent: std::path::PathBuf = parts.iter().collect();
    let root_fd = open_root(root)?;
    let parent_fd: OwnedFd = if parent.as_os_str().is_empty() {
        root_fd
    } else {
        rustix::fs::openat2(
            &root_fd,
            &parent,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
            ResolveFlags::BENEATH
                | ResolveFlags::NO_SYMLINKS
                | ResolveFlags::NO_MAGICLINKS
                | ResolveFlags::NO_XDEV,
        )
        .map_err(|e| match e {
            rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR => {
                invalid("its parent directory does not exist in your workspace")
            }
            rustix::io::Errno::LOOP | rustix::io::Errno::XDEV => {
                invalid("its parent leads through a symlink or outside your workspace")
            }
            e => PlaceError::Failed(format!(
                "failed to open the parent of {} in the workspace: {e}",
                dest.display()
            )),
        })?
    };
    rustix::fs::renameat_with(
        rustix::fs::CWD,
        staged,
        &parent_fd,
        leaf,
        RenameFlags::NOREPLACE,
    )
    .map_err(|e| match e {
        rustix::io::Errno::EXIST => invalid("it already exists; pick a new directory"),
        rustix::io::Errno::XDEV => PlaceError::Failed(format!(
            "failed to move the clone into the workspace: {} and the workspace are on different file systems",
            staged.display()
        )),
        e => PlaceError::Failed(format!(
            "failed to move the clone to {} in the workspace: {e}",
            dest.display()
        )),
    })
}

/// The workspace's own directory, not a symlink put in its place.
fn open_root(root: &Path) -> Result<OwnedFd, PlaceError> {
    rustix::fs::open(
        root,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| {
        PlaceError::Invalid(format!(
            "failed to open the workspace {} (not a directory of its own?): {e}",
            root.display()
        ))
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    fn a_directory_is_placed_beneath_the_workspace() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        std::fs::create_dir_all(ws.join("src")).unwrap();
        let staged = tmp.path().join("staged");
        std::fs::create_dir(&staged).unwrap();
        std::fs::write(staged.join("f"), "x").unwrap();
        place_dir(&staged, &ws, Path::new("src/repo")).unwrap();
        assert_eq!(std::fs::read_to_string(ws.join("src/repo/f")).unwrap(), "x");
        assert!(!staged.exists());

        // Nothing is replaced.
        std::fs::create_dir(&staged).unwrap();
        let e = place_dir(&staged, &ws, Path::new("src/repo")).unwrap_err();
        assert!(
            matches!(e, PlaceError::Invalid(ref m) if m.contains("already exists")),
            "{e}"
        );
        for bad in ["../x", "/abs", "", "src/../.."] {
            let e = place_dir(&staged, &ws, Path::new(bad)).unwrap_err();
            assert!(matches!(e, PlaceError::Invalid(_)), "{bad}: {e}");
        }
        let e = place_dir(&staged, &ws, Path::new("missing/repo")).unwrap_err();
        assert!(
            matches!(e, PlaceError::Invalid(ref m) if m.contains("does not exist")),
            "{e}"
        );
    }

    /// Issue 27: a parent directory swapped for a symlink after the check made
    /// the daemon's `git clone` write outside the sandbox. The parent is
    /// resolved once, beneath the workspace, and never through a symlink.
    #[test]
    fn issue27_a_parent_swapped_for_a_symlink_is_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = tmp.path().join("ws");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        symlink(&outside, ws.join("src")).unwrap();
        let staged = tmp.path().join("staged");
        std::fs::create_dir(&staged).unwrap();
        let e = place_dir(&staged, &ws, Path::new("src/repo")).unwrap_err();
        assert!(
            matches!(e, PlaceError::Invalid(ref m) if m.contains("symlink")),
            "{e}"
        );
        assert!(!outside.join("repo").exists());
        assert!(staged.exists());

        // The workspace itself replaced by a symlink.
        let ws2 = tmp.path().join("ws2");
        symlink(&outside, &ws2).unwrap();
        let e = place_dir(&staged, &ws2, Path::new("repo")).unwrap_err();
        assert!(matches!(e, PlaceError::Invalid(_)), "{e}");
        assert!(!outside.join("repo").exists());
    }
}
