//! `[sandbox]` in `agency.toml`: what agents may read and write beyond
//! their own spawn directory and the system's directories, and the limits
//! of their resources. The switch itself is `agents.sandbox` (`"on"`, the
//! default, or `"off"`); `confine.rs` turns both into each spawn's policy.
//!
//! Paths are checked here, without touching the disk, so that a typo is a
//! configuration error naming the key: each must be absolute, without `..`,
//! and neither the Agency home, inside it, nor above it (a rule for a
//! directory covers everything below it, so `/tmp` with the home in
//! `/tmp/x/home` would hand the home to every agent).

use std::path::Path;

use serde::{Deserialize, Serialize};

/// `[sandbox]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxConfig {
    /// Directories (or files) every agent may read and execute, e.g. a
    /// language toolchain outside the system directories (`/root/.cargo`,
    /// `/root/.pyenv`, `/opt/node`).
    pub toolchains: Vec<String>,
    /// Directories every agent may also write (shared caches, a scratch
    /// area): the agents of every handler share them, so nothing private
    /// belongs there.
    pub read_write: Vec<String>,
    /// Processes (and threads) of one agent at once, all its descendants
    /// together (the agent's cgroup); 0: no limit.
    pub max_processes: u64,
    /// Memory of one agent, all its processes together, in MiB (and of
    /// each process alone, by `RLIMIT_DATA`); 0: no limit. Set, it must be
    /// kept per agent tree by a cgroup memory controller (v2 or v1), or the
    /// daemon refuses to start (`SandboxConfig::check_memory`); absent,
    /// `DEFAULT_MEMORY_MB` applies per tree where the machine allows it
    /// and per process everywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mb: Option<u64>,
    /// CPU time of each of an agent's processes, in seconds; 0: no limit.
    pub cpu_seconds: u64,
    /// Largest file an agent's process may write, in MiB; 0: no limit.
    pub file_size_mb: u64,
    /// Open files of each of an agent's processes; 0: no limit.
    pub open_files: u64,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            toolchains: Vec::new(),
            read_write: Vec::new(),
            max_processes: 512,
            memory_mb: None,
            cpu_seconds: 3600,
            file_size_mb: 4096,
            open_files: 4096,
        }
    }
}

/// Largest `memory_mb` and `file_size_mb` (1 TiB): the byte counts stay
/// far from overflowing.
const MAX_MB: u64 = 1 << 20;

/// `memory_mb` when the file does not set it.
pub(crate) const DEFAULT_MEMORY_MB: u64 = 8192;

impl SandboxConfig {
    /// The limits as the sandbox applies them (bytes, 0 = none).
    pub fn limits(&self) -> agency_sandbox::Limits {
        agency_sandbox::Limits {
            max_processes: self.max_processes,
            memory_bytes: self
                .memory_mb
                .unwrap_or(DEFAULT_MEMORY_MB)
                .saturating_mul(1 << 20),
            cpu_seconds: self.cpu_seconds,
            file_size_bytes: self.file_size_mb.saturating_mul(1 << 20),
            open_files: self.open_files,
        }
    }

    /// Check the paths (against the home `home`) and the limits; the
    /// message names the key.
    pub(crate) fn validate(&self, home: &Path) -> Result<(), String> {
        for (key, list) in [
            ("sandbox.toolchains", &self.toolchains),
            ("sandbox.read_write", &self.read_write),
        ] {
            for p in list {
                check_path(key, p, home)?;
            }
        }
        // An agent needs a few processes (its runtime, a shell, the
        // launcher and an extra server) and files (its libraries, pipes).
        for (key, value, least) in [
            ("max_processes", self.max_processes, 8),
            ("memory_mb", self.memory_mb.unwrap_or(0), 64),
            ("cpu_seconds", self.cpu_seconds, 1),
            ("file_size_mb", self.file_size_mb, 1),
            ("open_files", self.open_files, 64),
        ] {
            if value != 0 && value < least {
                return Err(format!(
                    "sandbox.{key} = {value} is too small for an agent to run: at least {least}, or 0 for no limit"
                ));
            }
        }
        for (key, value) in [
            ("memory_mb", self.memory_mb.unwrap_or(0)),
            ("file_size_mb", self.file_size_mb),
        ] {
            if value > MAX_MB {
                return Err(format!(
                    "sandbox.{key} = {value} is out of range (at most {MAX_MB}, or 0 for no limit)"
                ));
            }
        }
        Ok(())
    }

    /// Refuse a `memory_mb` the file sets (above 0) when nothing would
    /// keep it per agent tree: `tree` is the cgroup hierarchy whose memory
    /// controller bounds agents' groups, `None` when neither v2 nor v1 has
    /// one. `RLIMIT_DATA` alone bounds each process, not the tree, so
    /// accepting it would be a limit that is read and then ignored.
    /// Without the key the default is kept where it can be.
    pub fn check_memory(
        &self,
        tree: Option<agency_sandbox::Hierarchy>,
    ) -> Result<(), UnenforceableMemory> {
        match (self.memory_mb, tree) {
            (Some(mb), None) if mb > 0 => Err(UnenforceableMemory { memory_mb: mb }),
            _ => Ok(()),
        }
    }
}

/// A `sandbox.memory_mb` nothing on this machine can keep per agent tree.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "failed to enforce sandbox.memory_mb = {memory_mb} (MiB per agent, all its processes together): this machine has no memory controller in cgroup v1 or v2 to bound an agent's process tree, and RLIMIT_DATA bounds each process alone; remove memory_mb from [sandbox] (each process is then held to {DEFAULT_MEMORY_MB} MiB, the tree is not), set it to 0 for no limit, or run the daemon where a memory controller is available (cgroup v2 with memory in the parent's cgroup.subtree_control, or the cgroup v1 memory hierarchy mounted)"
)]
pub struct UnenforceableMemory {
    pub memory_mb: u64,
}

/// `agents.sandbox`: `"on"` (the default) or `"off"`.
pub(crate) fn check_switch(value: &str) -> Result<(), String> {
    match value {
        "on" | "off" => Ok(()),
        other => Err(format!(
            "agents.sandbox = {other:?} is not \"on\" or \"off\" (\"off\" runs agents unconfined: they can read the whole home, admin.token included)"
        )),
    }
}

fn check_path(key: &str, p: &str, home: &Path) -> Result<(), String> {
    let path = Path::new(p);
    if !path.is_absolute() {
        return Err(format!("{key}: {p:?} is not an absolute path"));
    }
    // On the text: `Path::components` drops a "." that is not leading.
    if p.split('/').any(|c| c == "." || c == "..") {
        return Err(format!("{key}: {p:?} contains \".\" or \"..\""));
    }
    if let Some(why) = overlaps_home(path, home) {
        return Err(format!("{key}: {p:?} {why}"));
    }
    Ok(())
}

/// Whether granting `path` would grant (part of) the home `home`, and how;
/// compared component by component, so `/a/home2` is not inside `/a/home`.
pub fn overlaps_home(path: &Path, home: &Path) -> Option<&'static str> {
    if !home.is_absolute() {
        return None;
    }
    if path == home {
        Some("is the Agency home: agents must never read it")
    } else if path.starts_with(home) {
        Some("lies inside the Agency home: agents must never read it")
    } else if home.starts_with(path) {
        Some(
            "holds the Agency home: a rule covers everything below it, so agents could read the home",
        )
    } else {
        None
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_would_expose_the_home_are_refused() {
        let home = Path::new("/srv/agency");
        let with = |toolchains: &[&str], read_write: &[&str]| SandboxConfig {
            toolchains: toolchains.iter().map(|s| (*s).to_owned()).collect(),
            read_write: read_write.iter().map(|s| (*s).to_owned()).collect(),
            ..SandboxConfig::default()
        };
        assert!(
            with(&["/root/.cargo", "/srv/agency2"], &["/var/cache/x"])
                .validate(home)
                .is_ok()
        );
        for (cfg, want) in [
            (with(&["/srv/agency"], &[]), "is the Agency home"),
            (with(&["/srv/agency/blobs"], &[]), "inside the Agency home"),
            (with(&[], &["/srv"]), "holds the Agency home"),
            (with(&["/"], &[]), "holds the Agency home"),
            (with(&["relative/dir"], &[]), "not an absolute path"),
            (with(&["/opt/../srv/agency"], &[]), "\"..\""),
        ] {
            let e = cfg.validate(home).unwrap_err();
            assert!(e.contains(want), "{e}");
            assert!(e.starts_with("sandbox."), "{e}");
        }
    }

    #[test]
    fn limits_are_checked_and_converted() {
        let home = Path::new("/h");
        let ok = SandboxConfig {
            max_processes: 0,
            memory_mb: Some(64),
            ..SandboxConfig::default()
        };
        assert!(ok.validate(home).is_ok());
        assert_eq!(ok.limits().memory_bytes, 64 << 20);
        assert_eq!(ok.limits().max_processes, 0);
        for bad in [
            SandboxConfig {
                max_processes: 3,
                ..SandboxConfig::default()
            },
            SandboxConfig {
                open_files: 10,
                ..SandboxConfig::default()
            },
            SandboxConfig {
                memory_mb: Some(MAX_MB + 1),
                ..SandboxConfig::default()
            },
        ] {
            assert!(bad.validate(home).is_err());
        }
        assert!(check_switch("on").is_ok() && check_switch("off").is_ok());
        assert!(check_switch("yes").unwrap_err().contains("agents.sandbox"));
    }

    /// Issue 27: a `memory_mb` set in the file and not keepable per agent
    /// tree (no memory controller in cgroup v1 or v2) is refused, naming
    /// why and the ways out; kept on v1 or v2; unset or 0, nothing to keep.
    #[test]
    fn issue27_a_memory_limit_no_controller_can_keep_is_refused() {
        use agency_sandbox::Hierarchy;
        let set = SandboxConfig {
            memory_mb: Some(4096),
            ..SandboxConfig::default()
        };
        let e = set.check_memory(None).unwrap_err().to_string();
        for want in [
            "failed to enforce sandbox.memory_mb = 4096",
            "no memory controller in cgroup v1 or v2",
            "remove memory_mb from [sandbox]",
            "set it to 0",
        ] {
            assert!(e.contains(want), "{want}: {e}");
        }
        set.check_memory(Some(Hierarchy::V1)).unwrap();
        set.check_memory(Some(Hierarchy::V2)).unwrap();
        SandboxConfig::default().check_memory(None).unwrap();
        SandboxConfig {
            memory_mb: Some(0),
            ..SandboxConfig::default()
        }
        .check_memory(None)
        .unwrap();
        assert_eq!(
            SandboxConfig::default().limits().memory_bytes,
            DEFAULT_MEMORY_MB << 20
        );
    }
}
