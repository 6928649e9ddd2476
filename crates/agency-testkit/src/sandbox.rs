//! `[sandbox]` sections for test configurations. Agents run confined by
//! default, so a test whose agent runs a program outside the system
//! directories (python3 under pyenv, the repository's `tests/fixtures`) or
//! writes a result file for the test to read needs those paths in its
//! daemon's `agency.toml`. Found on this machine, never hard-coded.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's `tests/fixtures` directory (the extra MCP servers of
/// the tests live there).
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures")
}

/// The directories python3 needs besides the system's: the prefix above
/// the `PATH` directory it is found in (for pyenv, its root: the shim runs
/// `pyenv exec`), and the interpreter's own `sys.base_prefix`. `/` is never
/// listed (the daemon refuses a directory holding its home).
pub fn python_toolchains() -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if dir.join("python3").is_file() {
                if let Some(prefix) = dir.parent() {
                    out.push(prefix.to_owned());
                }
                break;
            }
        }
    }
    if let Ok(o) = Command::new("python3")
        .args(["-c", "import sys; print(sys.base_prefix)"])
        .output()
        && o.status.success()
    {
        let p = String::from_utf8_lossy(&o.stdout).trim().to_owned();
        if !p.is_empty() {
            out.push(PathBuf::from(p));
        }
    }
    out.retain(|p| p.is_absolute() && p.parent().is_some());
    out.sort();
    out.dedup();
    out
}

/// A `[sandbox]` table (to append at the end of a configuration) whose
/// toolchains are python3's and the fixtures directory, and whose agents
/// may also write `read_write` (a test's output directory, outside the
/// home).
pub fn sandbox_toml(read_write: &[&Path]) -> String {
    let mut toolchains = python_toolchains();
    toolchains.push(
        fixtures_dir()
            .canonicalize()
            .unwrap_or_else(|_| fixtures_dir()),
    );
    let list = |paths: &mut dyn Iterator<Item = &Path>| {
        paths
            .map(|p| format!("{:?}", p.display().to_string()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "\n[sandbox]\ntoolchains = [{}]\nread_write = [{}]\n",
        list(&mut toolchains.iter().map(PathBuf::as_path)),
        list(&mut read_write.iter().copied())
    )
}
