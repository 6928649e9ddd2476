//! A confined tool's program that needs what its sandbox does not let it
//! read: a version manager's shim (pyenv, rbenv, nodenv, asdf: a script in
//! `…/shims/` that runs the manager from the folder above it). The sandbox
//! grants the program and its own folder, so the shim starts and then
//! fails with "Permission denied" on the manager's files. `agency up`
//! reports such a program of a command (or stdio MCP) tool with the fix —
//! the folder to add to `[sandbox] toolchains` — and a failed call says
//! the same.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use super::{Confiner, Mode, find_program, interpreter};

/// A tool's program whose toolchain the sandbox does not grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingToolchain {
    /// The program as the tool names it (`python3`).
    pub program: String,
    /// The file that needs the toolchain (the program, or the interpreter
    /// its `#!` line names), canonical: `/root/.pyenv/shims/python3`.
    pub file: PathBuf,
    /// The folder to add to `[sandbox] toolchains`: `/root/.pyenv`.
    pub toolchain: PathBuf,
}

impl MissingToolchain {
    /// What is wrong and the fix, for a warning or an error.
    pub fn advice(&self) -> String {
        format!(
            "its program {} runs {}, a shim that runs its version manager from {}, which the sandbox does not let a tool read (it fails with \"Permission denied\"); add \"{}\" to [sandbox] toolchains in agency.toml and run `agency reload` (or name the interpreter itself, e.g. {}/versions/…/bin/{})",
            self.program,
            self.file.display(),
            self.toolchain.display(),
            self.toolchain.display(),
            self.toolchain.display(),
            self.file
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        )
    }
}

impl Confiner {
    /// The toolchain `command` (run in `dir`, with the daemon's `PATH` as
    /// tools are) needs and the sandbox does not grant, if any; `None` also
    /// when tools run unconfined or the program is not found (the call
    /// says so itself).
    pub fn missing_toolchain(
        &self,
        command: &[String],
        dir: Option<&Path>,
    ) -> Option<MissingToolchain> {
        if !matches!(self.mode, Mode::On(_)) {
            return None;
        }
        let program = command.first()?;
        let path =
            std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
        let path = path.as_os_str();
        let mut file = find_program(OsStr::new(program), Some(path), dir)?;
        // The program, then the interpreters its `#!` lines name, as the
        // policy follows them.
        for _ in 0..4 {
            let real = std::fs::canonicalize(&file).ok()?;
            if let Some(toolchain) = self.shim_root(&real, dir) {
                return Some(MissingToolchain {
                    program: program.clone(),
                    file: real,
                    toolchain,
                });
            }
            file = interpreter(&real, Some(path))?;
        }
        None
    }

    /// The folder above `shims/` holding `real`, unless the system
    /// directories, a configured toolchain or the tool's folder cover it.
    fn shim_root(&self, real: &Path, dir: Option<&Path>) -> Option<PathBuf> {
        let shims = real
            .ancestors()
            .skip(1)
            .find(|a| a.file_name() == Some(OsStr::new("shims")))?;
        let root = shims.parent()?;
        // The toolchains in force now: `agency reload` may have changed them.
        let dirs = self.dirs.load();
        let toolchains = dirs
            .toolchains
            .iter()
            .filter_map(|t| std::fs::canonicalize(t).ok());
        let covered = self
            .system_read_only
            .iter()
            .cloned()
            .chain(toolchains)
            .chain(dir.map(Path::to_owned))
            .any(|g| root.starts_with(&g));
        (!covered).then(|| root.to_owned())
    }
}
