//! What a sandbox allows: the policy the daemon writes (JSON) for each
//! agent process and `agency sandbox-exec` applies. Everything not listed
//! is denied; validation refuses a policy that would grant the whole file
//! system or ask for a limit that cannot be enforced, so a mistake in the
//! daemon fails closed instead of quietly widening the sandbox.

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::SandboxError;

/// The sandbox of one agent process tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Full access beneath these directories (the agent's run directory:
    /// workspace, HOME, TMPDIR), or to these files (device files that must
    /// be written, such as `/dev/null`: see [`crate::system_read_write_files`]).
    pub read_write: Vec<PathBuf>,
    /// Read and execute beneath these directories, or of these files.
    pub read_only: Vec<PathBuf>,
    /// TCP ports the process tree may connect to (Landlock filters ports,
    /// not addresses; every other TCP connect, and every bind, is denied).
    pub connect_ports: Vec<u16>,
    /// Resource limits.
    #[serde(default)]
    pub limits: Limits,
    /// `cgroup.procs` files the process writes its pid into before
    /// anything else (made by the daemon with [`crate::Cgroups::create`]).
    #[serde(default)]
    pub cgroup_procs: Vec<PathBuf>,
    /// Put the process tree in a network namespace of its own, holding
    /// only `lo`, where 127.0.0.1:PORT (and `[::1]:PORT`) for each of
    /// [`Policy::connect_ports`] is forwarded to the same port on the
    /// host's loopback, and nothing else is reachable: Landlock filters
    /// ports, not addresses, so without this a remote host listening on one
    /// of those port numbers is reachable too. Needs root (`CAP_SYS_ADMIN`
    /// for the namespace). Absent in older policies: off.
    #[serde(default)]
    pub isolate_network: bool,
}

/// Resource limits; 0 means no limit for that one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Processes (and threads) of the whole tree, enforced by the cgroup's
    /// `pids.max`; needs [`Policy::cgroup_procs`]. (`RLIMIT_NPROC` counts
    /// every process of the user, which for root is the whole machine.)
    pub max_processes: u64,
    /// Memory: `RLIMIT_DATA` of each process (not `RLIMIT_AS`: V8 and
    /// others reserve huge `PROT_NONE` regions they never touch), and the
    /// tree's limit where a memory controller is usable (`memory.max` on
    /// cgroup v2, `memory.limit_in_bytes` on v1: see [`crate::Cgroups`]).
    pub memory_bytes: u64,
    /// CPU time of each process (`RLIMIT_CPU`), in seconds.
    pub cpu_seconds: u64,
    /// Largest file a process may write (`RLIMIT_FSIZE`).
    pub file_size_bytes: u64,
    /// Open files per process (`RLIMIT_NOFILE`).
    pub open_files: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_processes: 512,
            memory_bytes: 4 << 30,
            cpu_seconds: 3600,
            file_size_bytes: 1 << 30,
            open_files: 4096,
        }
    }
}

impl Policy {
    /// A policy granting nothing (no file, no port), with default limits
    /// and no cgroup; callers fill in what the agent needs.
    pub fn deny_all() -> Policy {
        Policy {
            read_write: Vec::new(),
            read_only: Vec::new(),
            connect_ports: Vec::new(),
            limits: Limits::default(),
            cgroup_procs: Vec::new(),
            isolate_network: false,
        }
    }

    /// Parse and validate a policy from its JSON.
    pub fn from_json(text: &str) -> Result<Policy, SandboxError> {
        let policy: Policy = serde_json::from_str(text)
            .map_err(|e| SandboxError::InvalidPolicy(format!("not a valid policy: {e}")))?;
        policy.validate()?;
        Ok(policy)
    }

    /// Read, parse and validate the policy file at `path`.
    pub fn load(path: &Path) -> Result<Policy, SandboxError> {
        let text = std::fs::read_to_string(path).map_err(|e| SandboxError::ReadPolicy {
            path: path.to_owned(),
            why: e.to_string(),
        })?;
        Policy::from_json(&text).map_err(|e| SandboxError::ReadPolicy {
            path: path.to_owned(),
            why: e.to_string(),
        })
    }

    /// The policy as JSON (what [`Policy::from_json`] reads).
    pub fn to_json(&self) -> Result<String, SandboxError> {
        serde_json::to_string_pretty(self)
            .map_err(|e| SandboxError::InvalidPolicy(format!("failed to write the policy: {e}")))
    }

    /// Refuse what cannot be applied as meant: relative or unnormalised
    /// paths (`..` would make the grant depend on the working directory or
    /// on symlinks), `/` itself (it would grant `$AGENCY_HOME` with the
    /// rest), port 0, cgroup files that are not `cgroup.procs`, and a
    /// process limit without a cgroup to enforce it.
    pub fn validate(&self) -> Result<(), SandboxError> {
        for (list, paths) in [
            ("read_write", &self.read_write),
            ("read_only", &self.read_only),
        ] {
            for p in paths {
                check_path(list, p)?;
                if p.parent().is_none() {
                    return Err(SandboxError::InvalidPolicy(format!(
                        "{list} grants {}: that is the whole file system",
                        p.display()
                    )));
                }
            }
        }
        if self.connect_ports.contains(&0) {
            return Err(SandboxError::InvalidPolicy(
                "connect_ports holds port 0, which no server listens on".into(),
            ));
        }
        for p in &self.cgroup_procs {
            check_path("cgroup_procs", p)?;
            if p.file_name().is_none_or(|n| n != "cgroup.procs") {
                return Err(SandboxError::InvalidPolicy(format!(
                    "cgroup_procs names {}, which is not a cgroup.procs file",
                    p.display()
                )));
            }
        }
        if self.isolate_network && self.connect_ports.len() > crate::netns::MAX_PORTS {
            return Err(SandboxError::InvalidPolicy(format!(
                "isolate_network forwards at most {} ports; connect_ports has {}",
                crate::netns::MAX_PORTS,
                self.connect_ports.len()
            )));
        }
        if self.limits.max_processes != 0 && self.cgroup_procs.is_empty() {
            return Err(SandboxError::InvalidPolicy(
                "limits.max_processes needs a cgroup (cgroup_procs is empty); set it to 0 for no limit"
                    .into(),
            ));
        }
        Ok(())
    }
}

fn check_path(list: &str, p: &Path) -> Result<(), SandboxError> {
    let bad = |why: &str| {
        Err(SandboxError::InvalidPolicy(format!(
            "{list} path {:?} {why}",
            p.display().to_string()
        )))
    };
    if !p.is_absolute() {
        return bad("is not absolute");
    }
    if p.as_os_str().as_encoded_bytes().contains(&0) {
        return bad("contains a NUL byte");
    }
    if p.components()
        .any(|c| matches!(c, Component::ParentDir | Component::CurDir))
    {
        return bad("has a `.` or `..` component");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid() -> Policy {
        Policy {
            read_write: vec!["/work/run/a1".into(), "/dev/null".into()],
            read_only: vec!["/usr".into(), "/etc/passwd".into()],
            connect_ports: vec![8080],
            limits: Limits::default(),
            cgroup_procs: vec!["/sys/fs/cgroup/unified/agency-x/a1/cgroup.procs".into()],
            isolate_network: true,
        }
    }

    #[test]
    fn round_trips_through_json() {
        let p = valid();
        let back = Policy::from_json(&p.to_json().expect("json")).expect("parse");
        assert_eq!(back, p);
    }

    #[test]
    fn limits_default_when_omitted_and_per_field() {
        let p = Policy::from_json(
            r#"{"read_write":[],"read_only":[],"connect_ports":[],"limits":{"cpu_seconds":5,"max_processes":0}}"#,
        )
        .expect("parse");
        assert_eq!(p.limits.cpu_seconds, 5);
        assert_eq!(p.limits.open_files, Limits::default().open_files);
        assert!(p.cgroup_procs.is_empty());
        assert!(!p.isolate_network, "older policies are not isolated");
        let p = Policy::from_json(
            r#"{"read_write":[],"read_only":[],"connect_ports":[],"cgroup_procs":["/c/cgroup.procs"]}"#,
        )
        .expect("parse");
        assert_eq!(p.limits, Limits::default());
    }

    #[test]
    fn unknown_fields_are_refused() {
        // A typo must not silently drop a restriction.
        let e = Policy::from_json(
            r#"{"read_write":[],"read_only":[],"connect_ports":[],"conect_ports":[1]}"#,
        )
        .expect_err("unknown field");
        assert!(e.to_string().contains("conect_ports"), "{e}");
        let e = Policy::from_json(
            r#"{"read_write":[],"read_only":[],"connect_ports":[],"limits":{"memory":1}}"#,
        )
        .expect_err("unknown limit");
        assert!(e.to_string().contains("memory"), "{e}");
    }

    #[test]
    fn missing_grants_are_refused() {
        // The lists are required: an empty policy is an error, not "allow".
        assert!(Policy::from_json("{}").is_err());
    }

    #[test]
    fn bad_paths_are_refused() {
        for (field, path) in [
            ("read_write", "relative/dir"),
            ("read_only", "/usr/../root"),
            ("read_write", "/"),
            ("read_only", "/"),
            ("read_only", "./x"),
        ] {
            let mut p = valid();
            match field {
                "read_write" => p.read_write.push(path.into()),
                _ => p.read_only.push(path.into()),
            }
            let e = p.validate().expect_err(path);
            assert!(e.to_string().contains(field), "{path}: {e}");
        }
    }

    #[test]
    fn port_zero_and_stray_cgroup_files_are_refused() {
        let mut p = valid();
        p.connect_ports.push(0);
        assert!(p.validate().is_err());
        let mut p = valid();
        p.cgroup_procs = vec!["/sys/fs/cgroup/unified/agency-x/a1/cgroup.kill".into()];
        assert!(p.validate().is_err());
        let mut p = valid();
        p.cgroup_procs = vec!["cgroup.procs".into()];
        assert!(p.validate().is_err());
    }

    #[test]
    fn an_isolated_network_forwards_a_bounded_number_of_ports() {
        let mut p = valid();
        p.connect_ports = (1..=crate::netns::MAX_PORTS as u16 + 1).collect();
        let e = p.validate().expect_err("too many ports to forward");
        assert!(e.to_string().contains("isolate_network"), "{e}");
        p.isolate_network = false;
        p.validate().expect("not forwarded, not bounded");
    }

    #[test]
    fn a_process_limit_needs_a_cgroup() {
        let mut p = valid();
        p.cgroup_procs.clear();
        let e = p.validate().expect_err("no cgroup");
        assert!(e.to_string().contains("max_processes"), "{e}");
        p.limits.max_processes = 0;
        p.validate().expect("no limit, no cgroup");
    }
}
