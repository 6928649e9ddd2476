//! Git fixtures for the development tests: running `git` in a directory
//! and making the bare origin repository an agent clones, fixes and
//! pushes to. Shared so that each test holds only its own repository's
//! files and what it checks of them.

// Shared by several test binaries, each of which uses only part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// `git -C dir args…`, which must succeed; its stdout as it is.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A bare origin repository at `<dir>/calc.git` whose `main` holds one
/// commit, `message`, of `files` (name and content each).
pub fn bare_origin(dir: &Path, files: &[(&str, &str)], message: &str) -> PathBuf {
    let work = dir.join("calc-work");
    std::fs::create_dir_all(&work).unwrap();
    git(&work, &["init", "-q", "-b", "main"]);
    for (name, content) in files {
        std::fs::write(work.join(name), content).unwrap();
    }
    git(&work, &["add", "."]);
    git(
        &work,
        &[
            "-c",
            "user.name=Maintainer",
            "-c",
            "user.email=maintainer@example.invalid",
            "commit",
            "-q",
            "-m",
            message,
        ],
    );
    let origin = dir.join("calc.git");
    let out = Command::new("git")
        .args(["clone", "-q", "--bare"])
        .arg(&work)
        .arg(&origin)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    origin
}
