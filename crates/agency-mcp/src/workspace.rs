//! Confinement of agent-supplied paths to the agent's workspace.
//!
//! Agents may hand file content to the KB as a path instead of inline text
//! (DESIGN §2). The path is the agent's, so it is hostile until proven
//! otherwise: it must name an existing regular file that is inside the
//! workspace after every symlink is resolved. [`resolve_in_workspace`]
//! makes that decision; [`read_in_workspace`] also bounds the size and
//! re-checks after opening, so that swapping a symlink in between the check
//! and the read does not leak a file from outside.
//!
//! Hard links are not detected: a hard link is a file in the workspace by
//! every measure the file system offers.

use std::fs::{File, Metadata};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

/// Why a path was refused. Every message names the path and says what to
/// do instead.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error(
        "failed to use path \"\": the path is empty; give a file path relative to your workspace"
    )]
    Empty,
    #[error("failed to use path {path:?}: it contains a NUL byte")]
    Nul { path: String },
    #[error(
        "failed to use path {path:?}: it contains a '..' component; name the file by a path inside your workspace without '..'"
    )]
    ParentDir { path: String },
    #[error(
        "failed to use path {path:?}: it is an absolute path outside your workspace {workspace}; use a path relative to the workspace"
    )]
    OutsideWorkspace { path: String, workspace: String },
    #[error(
        "failed to use path {path:?}: it resolves through a symlink to a location outside your workspace; copy the content into the workspace or pass it inline"
    )]
    SymlinkEscape { path: String },
    #[error("failed to use path {path:?}: no such file in your workspace {workspace}")]
    NotFound { path: String, workspace: String },
    #[error("failed to use path {path:?}: it is a directory; name a regular file")]
    Directory { path: String },
    #[error(
        "failed to use path {path:?}: it is not a regular file (a device, socket or pipe); name a regular file"
    )]
    NotRegular { path: String },
    #[error(
        "failed to use path {path:?}: it is {size} bytes, more than the maximum file size of {max} bytes; split it into smaller linked files"
    )]
    TooLarge { path: String, size: u64, max: u64 },
    #[error(
        "failed to read path {path:?}: the file was replaced while it was being read; try again once nothing is changing it"
    )]
    Changed { path: String },
    #[error("failed to read path {path:?}: {cause}")]
    Io {
        path: String,
        /// In the message, not `#[source]`: printed once, however the
        /// error is printed (`{e}` or the chain with `{e:#}`).
        cause: std::io::Error,
    },
    #[error("failed to use your workspace {workspace}: {cause}")]
    Workspace {
        workspace: String,
        /// In the message, not `#[source]`: printed once, however the
        /// error is printed (`{e}` or the chain with `{e:#}`).
        cause: std::io::Error,
    },
    #[error("failed to use path {path:?}: it is not a directory; name a directory")]
    NotDirectory { path: String },
}

/// Resolve `path` (relative to `workspace`, or absolute inside it) to the
/// canonical path of an existing regular file inside the canonical
/// workspace. Looks at the file system (to resolve symlinks and check the
/// file type) but reads no content.
pub fn resolve_in_workspace(workspace: &Path, path: &str) -> Result<PathBuf, PathError> {
    resolve(workspace, path).map(|(p, _)| p)
}

/// Resolve `path` like [`resolve_in_workspace`], to an existing directory
/// instead of a file (the workspace itself is one: `.`).
pub fn resolve_dir_in_workspace(workspace: &Path, path: &str) -> Result<PathBuf, PathError> {
    let (real, meta) = locate(workspace, path)?;
    if !meta.is_dir() {
        return Err(PathError::NotDirectory {
            path: path.to_owned(),
        });
    }
    Ok(real)
}

/// Read the file `path` names inside `workspace`, refusing anything
/// [`resolve_in_workspace`] refuses and files larger than `max_bytes`
/// (checked before reading, and bounded while reading in case it grows).
pub fn read_in_workspace(
    workspace: &Path,
    path: &str,
    max_bytes: usize,
) -> Result<Vec<u8>, PathError> {
    let max = u64::try_from(max_bytes).unwrap_or(u64::MAX);
    let (real, meta) = resolve(workspace, path)?;
    check_size(path, meta.len(), max)?;
    let io = |source| PathError::Io {
        path: path.to_owned(),
        cause: source,
    };
    // O_NOFOLLOW: the canonical path's last component is no symlink, so one
    // appearing now is a swap. O_NONBLOCK: a FIFO swapped in must not hang
    // the thread in open(); it is refused below as not regular.
    let file = File::options()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&real)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => PathError::Changed {
                path: path.to_owned(),
            },
            _ => io(e),
        })?;
    let opened = file.metadata().map_err(io)?;
    if !opened.is_file() {
        return Err(PathError::Changed {
            path: path.to_owned(),
        });
    }
    // What was opened must be what was vetted, and the path must still
    // resolve inside the workspace to that same file: otherwise a directory
    // on the way was swapped for a symlink between the check and the open.
    let (again, now) = resolve(workspace, path)?;
    if again != real || !same_file(&opened, &meta) || !same_file(&opened, &now) {
        return Err(PathError::Changed {
            path: path.to_owned(),
        });
    }
    check_size(path, opened.len(), max)?;
    let mut content = Vec::with_capacity(usize::try_from(opened.len()).unwrap_or(0));
    file.take(max.saturating_add(1))
        .read_to_end(&mut content)
        .map_err(io)?;
    check_size(path, content.len() as u64, max)?;
    Ok(content)
}

fn resolve(workspace: &Path, path: &str) -> Result<(PathBuf, Metadata), PathError> {
    let (real, meta) = locate(workspace, path)?;
    let owned = || path.to_owned();
    if meta.is_dir() {
        return Err(PathError::Directory { path: owned() });
    }
    if !meta.is_file() {
        return Err(PathError::NotRegular { path: owned() });
    }
    Ok((real, meta))
}

/// The canonical path `path` names inside the workspace, whatever it is,
/// and its metadata.
fn locate(workspace: &Path, path: &str) -> Result<(PathBuf, Metadata), PathError> {
    let owned = || path.to_owned();
    let ws_name = || workspace.display().to_string();
    if path.is_empty() {
        return Err(PathError::Empty);
    }
    if path.contains('\0') {
        return Err(PathError::Nul { path: owned() });
    }
    let p = Path::new(path);
    // Refuse `..` outright, even where it would stay inside: the rule is
    // simple to state and to follow, and no legitimate path needs it.
    if p.components().any(|c| c == Component::ParentDir) {
        return Err(PathError::ParentDir { path: owned() });
    }
    let root = workspace
        .canonicalize()
        .map_err(|source| PathError::Workspace {
            workspace: ws_name(),
            cause: source,
        })?;
    let candidate = if p.is_absolute() {
        // The workspace may be named through a symlink (e.g. /tmp): accept
        // an absolute path under either spelling.
        if !(p.starts_with(workspace) || p.starts_with(&root)) {
            return Err(PathError::OutsideWorkspace {
                path: owned(),
                workspace: ws_name(),
            });
        }
        p.to_path_buf()
    } else {
        root.join(p)
    };
    let real = candidate.canonicalize().map_err(|source| {
        if source.kind() == std::io::ErrorKind::NotFound {
            PathError::NotFound {
                path: owned(),
                workspace: ws_name(),
            }
        } else {
            PathError::Io {
                path: owned(),
                cause: source,
            }
        }
    })?;
    if !real.starts_with(&root) {
        return Err(PathError::SymlinkEscape { path: owned() });
    }
    let meta = std::fs::metadata(&real).map_err(|source| PathError::Io {
        path: owned(),
        cause: source,
    })?;
    Ok((real, meta))
}

fn check_size(path: &str, size: u64, max: u64) -> Result<(), PathError> {
    if size > max {
        return Err(PathError::TooLarge {
            path: path.to_owned(),
            size,
            max,
        });
    }
    Ok(())
}

fn same_file(a: &Metadata, b: &Metadata) -> bool {
    a.dev() == b.dev() && a.ino() == b.ino()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    struct Ws {
        _dir: tempfile::TempDir,
        root: PathBuf,
    }

    /// A workspace with `a.txt`, `sub/b.txt` and an empty directory `d`.
    fn ws() -> Ws {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir(root.join("d")).unwrap();
        std::fs::write(root.join("a.txt"), "alpha").unwrap();
        std::fs::write(root.join("sub/b.txt"), "beta").unwrap();
        Ws { _dir: dir, root }
    }

    fn err(w: &Ws, path: &str) -> PathError {
        match resolve_in_workspace(&w.root, path) {
            Ok(p) => panic!("{path:?} resolved to {}", p.display()),
            Err(e) => e,
        }
    }

    #[test]
    fn relative_and_nested_paths_resolve() {
        let w = ws();
        let canon = w.root.canonicalize().unwrap();
        assert_eq!(
            resolve_in_workspace(&w.root, "a.txt").unwrap(),
            canon.join("a.txt")
        );
        assert_eq!(
            resolve_in_workspace(&w.root, "./sub/b.txt").unwrap(),
            canon.join("sub/b.txt")
        );
        assert_eq!(
            read_in_workspace(&w.root, "sub/b.txt", 100).unwrap(),
            b"beta"
        );
    }

    #[test]
    fn absolute_path_inside_is_accepted() {
        let w = ws();
        let abs = w.root.join("a.txt");
        let got = resolve_in_workspace(&w.root, abs.to_str().unwrap()).unwrap();
        assert_eq!(got, w.root.canonicalize().unwrap().join("a.txt"));
    }

    #[test]
    fn empty_and_nul_are_refused() {
        let w = ws();
        assert!(matches!(err(&w, ""), PathError::Empty));
        let e = err(&w, "a\0b");
        assert!(matches!(e, PathError::Nul { .. }), "{e}");
        assert!(e.to_string().contains("NUL"), "{e}");
    }

    #[test]
    fn parent_components_are_refused_even_when_they_stay_inside() {
        let w = ws();
        for p in ["../x", "sub/../a.txt", "..", "sub/.."] {
            let e = err(&w, p);
            assert!(matches!(e, PathError::ParentDir { .. }), "{p}: {e}");
            assert!(e.to_string().contains(p), "{e}");
        }
    }

    #[test]
    fn absolute_path_outside_is_refused() {
        let w = ws();
        let e = err(&w, "/etc/passwd");
        assert!(matches!(e, PathError::OutsideWorkspace { .. }), "{e}");
        assert!(e.to_string().contains("/etc/passwd"), "{e}");
        // A sibling whose name merely starts like the workspace.
        let sibling = format!("{}x/a.txt", w.root.display());
        assert!(matches!(
            err(&w, &sibling),
            PathError::OutsideWorkspace { .. }
        ));
    }

    #[test]
    fn symlink_to_a_file_outside_is_refused() {
        let w = ws();
        symlink("/etc/passwd", w.root.join("pw")).unwrap();
        let e = err(&w, "pw");
        assert!(matches!(e, PathError::SymlinkEscape { .. }), "{e}");
        assert!(e.to_string().contains("\"pw\""), "{e}");
        assert!(matches!(
            read_in_workspace(&w.root, "pw", 1 << 20),
            Err(PathError::SymlinkEscape { .. })
        ));
    }

    #[test]
    fn symlinked_directory_escaping_is_refused() {
        let w = ws();
        symlink("/etc", w.root.join("etc")).unwrap();
        let e = err(&w, "etc/passwd");
        assert!(matches!(e, PathError::SymlinkEscape { .. }), "{e}");
    }

    #[test]
    fn symlink_staying_inside_is_followed() {
        let w = ws();
        symlink("sub/b.txt", w.root.join("link")).unwrap();
        symlink(w.root.join("sub"), w.root.join("s2")).unwrap();
        let canon = w.root.canonicalize().unwrap();
        assert_eq!(
            resolve_in_workspace(&w.root, "link").unwrap(),
            canon.join("sub/b.txt")
        );
        assert_eq!(read_in_workspace(&w.root, "s2/b.txt", 10).unwrap(), b"beta");
    }

    #[test]
    fn workspace_named_through_a_symlink_works() {
        let w = ws();
        let alias = w.root.parent().unwrap().join("alias");
        symlink(&w.root, &alias).unwrap();
        assert!(resolve_in_workspace(&alias, "a.txt").is_ok());
        let abs = alias.join("a.txt");
        assert!(resolve_in_workspace(&alias, abs.to_str().unwrap()).is_ok());
    }

    #[test]
    fn directories_and_special_files_are_refused() {
        let w = ws();
        let e = err(&w, "d");
        assert!(matches!(e, PathError::Directory { .. }), "{e}");
        assert!(matches!(err(&w, "."), PathError::Directory { .. }));
        let _sock = std::os::unix::net::UnixListener::bind(w.root.join("sock")).unwrap();
        let e = err(&w, "sock");
        assert!(matches!(e, PathError::NotRegular { .. }), "{e}");
    }

    #[test]
    fn directories_resolve_with_the_same_confinement() {
        let w = ws();
        let canon = w.root.canonicalize().unwrap();
        assert_eq!(
            resolve_dir_in_workspace(&w.root, "d").unwrap(),
            canon.join("d")
        );
        assert_eq!(resolve_dir_in_workspace(&w.root, ".").unwrap(), canon);
        symlink("/etc", w.root.join("etc")).unwrap();
        let dir = |p: &str| resolve_dir_in_workspace(&w.root, p).unwrap_err();
        assert!(matches!(dir("etc"), PathError::SymlinkEscape { .. }));
        assert!(matches!(dir("../ws"), PathError::ParentDir { .. }));
        assert!(matches!(dir("/etc"), PathError::OutsideWorkspace { .. }));
        assert!(matches!(dir("a.txt"), PathError::NotDirectory { .. }));
        assert!(matches!(dir("nope"), PathError::NotFound { .. }));
    }

    #[test]
    fn missing_files_are_refused() {
        let w = ws();
        let e = err(&w, "nope.txt");
        assert!(matches!(e, PathError::NotFound { .. }), "{e}");
        assert!(e.to_string().contains("nope.txt"), "{e}");
    }

    #[test]
    fn files_over_the_limit_are_refused_before_reading() {
        let w = ws();
        assert_eq!(read_in_workspace(&w.root, "a.txt", 5).unwrap(), b"alpha");
        let e = read_in_workspace(&w.root, "a.txt", 4).unwrap_err();
        assert!(
            matches!(
                e,
                PathError::TooLarge {
                    size: 5,
                    max: 4,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("a.txt"), "{e}");
    }

    #[test]
    fn every_refusal_has_a_distinct_message() {
        let w = ws();
        symlink("/etc/passwd", w.root.join("pw")).unwrap();
        let msgs: Vec<String> = ["", "a\0b", "../x", "/etc/passwd", "pw", "nope", "d"]
            .iter()
            .map(|p| {
                let e = err(&w, p).to_string();
                // Strip the path so only the wording is compared.
                e.replace(&format!("{p:?}"), "P")
            })
            .collect();
        let mut unique = msgs.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), msgs.len(), "{msgs:#?}");
    }
}
