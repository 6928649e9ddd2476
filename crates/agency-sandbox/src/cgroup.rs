//! Cgroups for agent process trees: one parent group per daemon (per
//! Agency home), one group per agent beneath it, in every hierarchy the
//! sandbox uses — cgroup v2 (for `cgroup.kill`, and for `pids`/`memory`
//! where those controllers are enabled there) and, on hybrid machines
//! whose v2 hierarchy has no controllers, the v1 `pids` and `memory`
//! hierarchies (without the v1 `memory` group, `memory_mb`
//! bounded each process through `RLIMIT_DATA` but not the tree).
//!
//! A process joins its groups itself (`agency sandbox-exec` writes its
//! pid into [`AgentCgroup::procs_files`] before anything else), and its
//! descendants cannot leave them: the sandbox denies writes to `/sys`.
//! So killing the group kills the whole tree, including children that
//! called `setsid` or double-forked — process groups and sessions cannot
//! promise that.
//!
//! Groups are created beneath the daemon's own cgroup in each hierarchy
//! (from `/proc/self/cgroup`), so a daemon that is itself confined keeps
//! its agents inside its own limits.

use std::collections::BTreeSet;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process};

use crate::{Limits, SandboxError};

/// How long [`AgentCgroup::remove`] waits for the processes to die.
const REMOVE_WAIT: Duration = Duration::from_secs(10);
/// Rounds of SIGKILL for hierarchies without `cgroup.kill`.
const KILL_ROUNDS: usize = 500;

/// The parent cgroup of one daemon, in each hierarchy used.
#[derive(Debug, Clone)]
pub struct Cgroups {
    name: String,
    /// The parent group on cgroup v2, if v2 is mounted.
    v2: Option<PathBuf>,
    /// `pids` is enabled for the agents' groups on v2.
    v2_pids: bool,
    /// `memory` is enabled for the agents' groups on v2.
    v2_memory: bool,
    /// The parent group on the v1 `pids` hierarchy, used when v2 has no
    /// `pids` controller.
    v1_pids: Option<PathBuf>,
    /// The parent group on the v1 `memory` hierarchy, used when v2 has no
    /// `memory` controller.
    v1_memory: Option<PathBuf>,
}

/// The cgroup hierarchy a controller is used in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Hierarchy {
    V1,
    V2,
}

impl std::fmt::Display for Hierarchy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Hierarchy::V1 => "cgroup v1",
            Hierarchy::V2 => "cgroup v2",
        })
    }
}

/// One agent's groups.
#[derive(Debug, Clone)]
pub struct AgentCgroup {
    v2: Option<PathBuf>,
    v1_pids: Option<PathBuf>,
    v1_memory: Option<PathBuf>,
}

/// Where the cgroup hierarchies are mounted and where this process sits in
/// them (what [`Cgroups::open`] and [`crate::probe`] start from).
#[derive(Debug, Clone, Default)]
pub(crate) struct Layout {
    /// This process's own group on cgroup v2 (mount point joined with its
    /// path), if v2 is mounted.
    pub v2_own: Option<PathBuf>,
    /// The v2 mount point.
    pub v2_mount: Option<PathBuf>,
    /// This process's own group on the v1 `pids` hierarchy, if mounted.
    pub v1_pids_own: Option<PathBuf>,
    /// This process's own group on the v1 `memory` hierarchy, if mounted.
    pub v1_memory_own: Option<PathBuf>,
}

impl Layout {
    /// Read `/proc/self/mountinfo` and `/proc/self/cgroup`.
    pub(crate) fn discover() -> Result<Layout, SandboxError> {
        let read =
            |p: &str| std::fs::read_to_string(p).map_err(|e| SandboxError::cgroup("read", p, e));
        Ok(Layout::parse(
            &read("/proc/self/mountinfo")?,
            &read("/proc/self/cgroup")?,
        ))
    }

    fn parse(mountinfo: &str, own: &str) -> Layout {
        // Own paths: "0::/path" on v2, "N:ctrl,ctrl:/path" on v1.
        let mut v2_path = None;
        let mut pids_path = None;
        let mut memory_path = None;
        for line in own.lines() {
            let mut parts = line.splitn(3, ':');
            let (Some(id), Some(ctrls), Some(path)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            if id == "0" && ctrls.is_empty() {
                v2_path = Some(path.to_owned());
            } else {
                if ctrls.split(',').any(|c| c == "pids") {
                    pids_path = Some(path.to_owned());
                }
                if ctrls.split(',').any(|c| c == "memory") {
                    memory_path = Some(path.to_owned());
                }
            }
        }
        let mut layout = Layout::default();
        for line in mountinfo.lines() {
            // id parent dev root mountpoint opts [optional…] - fstype source superopts
            let Some((left, right)) = line.split_once(" - ") else {
                continue;
            };
            let left: Vec<&str> = left.split(' ').collect();
            let right: Vec<&str> = right.split(' ').collect();
            if left.len() < 5 || right.len() < 3 {
                continue;
            }
            let (root, mount) = (unescape(left[3]), PathBuf::from(unescape(left[4])));
            match right[0] {
                "cgroup2" if layout.v2_mount.is_none() => {
                    layout.v2_own = v2_path.as_deref().map(|p| beneath(&mount, &root, p));
                    layout.v2_mount = Some(mount);
                }
                "cgroup" => {
                    let has = |c: &str| right[2].split(',').any(|o| o == c);
                    if layout.v1_pids_own.is_none() && has("pids") {
                        layout.v1_pids_own =
                            pids_path.as_deref().map(|p| beneath(&mount, &root, p));
                    }
                    if layout.v1_memory_own.is_none() && has("memory") {
                        layout.v1_memory_own =
                            memory_path.as_deref().map(|p| beneath(&mount, &root, p));
                    }
                }
                _ => {}
            }
        }
        layout
    }
}

/// The directory of cgroup `path` in a hierarchy mounted at `mount` whose
/// mount shows the subtree `root`.
fn beneath(mount: &Path, root: &str, path: &str) -> PathBuf {
    let rel = path.strip_prefix(root).unwrap_or(path);
    let rel = rel.trim_start_matches('/');
    if rel.is_empty() {
        mount.to_owned()
    } else {
        mount.join(rel)
    }
}

/// Undo mountinfo's octal escapes (`\040` for a space, …).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let digit = |k: usize| u32::from(b[i + k] - b'0');
            // The kernel escapes bytes, so at most \377.
            out.push(u8::try_from(digit(1) * 64 + digit(2) * 8 + digit(3)).unwrap_or(b'?'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn check_name(what: &str, name: &str) -> Result<(), SandboxError> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok {
        Ok(())
    } else {
        Err(SandboxError::Unavailable(format!(
            "failed to name a cgroup after {what} {name:?}: only letters, digits, '-' and '_' (at most 128)"
        )))
    }
}

/// Write `value` into an existing cgroup control file.
fn write(path: &Path, value: &str) -> Result<(), SandboxError> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|mut f| f.write_all(value.as_bytes()))
        .map_err(|e| SandboxError::cgroup("write", path, e))
}

fn mkdir(path: &Path) -> Result<(), SandboxError> {
    match std::fs::create_dir(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(SandboxError::cgroup("create cgroup", path, e)),
    }
}

/// Whether `controller` is listed in a `cgroup.controllers` or
/// `cgroup.subtree_control` file.
fn lists(path: &Path, controller: &str) -> bool {
    std::fs::read_to_string(path)
        .map(|s| s.split_whitespace().any(|c| c == controller))
        .unwrap_or(false)
}

/// Make `controller` available to the children of `dir` (v2): it must be
/// enabled in every ancestor down to `dir`; `dir`'s own parent is tried
/// when it is not (that fails on a non-root group holding processes,
/// which then means: not usable here).
fn enable_v2(own: &Path, parent: &Path, controller: &str) -> bool {
    if !lists(&own.join("cgroup.controllers"), controller) {
        return false;
    }
    let own_ctl = own.join("cgroup.subtree_control");
    if !lists(&own_ctl, controller) && write(&own_ctl, &format!("+{controller}")).is_err() {
        return false;
    }
    let ctl = parent.join("cgroup.subtree_control");
    lists(&ctl, controller) || write(&ctl, &format!("+{controller}")).is_ok()
}

fn limit_value(n: u64) -> String {
    if n == 0 {
        "max".to_owned()
    } else {
        n.to_string()
    }
}

/// Bound a v1 `memory` group to `bytes` (0: no limit, which v1 spells
/// `-1`): `memory.limit_in_bytes`, and `memory.memsw.limit_in_bytes`
/// (memory plus swap) where swap is accounted, or the tree could swap out
/// what the limit refuses. The kernel keeps memsw at or above the memory
/// limit, so it is lifted first and lowered last.
fn set_v1_memory(dir: &Path, bytes: u64) -> Result<(), SandboxError> {
    let value = if bytes == 0 {
        "-1".to_owned()
    } else {
        bytes.to_string()
    };
    let memsw = dir.join("memory.memsw.limit_in_bytes");
    let swap = memsw.exists();
    if swap {
        write(&memsw, "-1")?;
    }
    write(&dir.join("memory.limit_in_bytes"), &value)?;
    if swap {
        write(&memsw, &value)?;
    }
    Ok(())
}

/// The pids listed in a `cgroup.procs` file (none if it is gone).
fn pids_in(dir: &Path) -> Result<Vec<i32>, SandboxError> {
    let path = dir.join("cgroup.procs");
    match std::fs::read_to_string(&path) {
        Ok(s) => Ok(s.lines().filter_map(|l| l.trim().parse().ok()).collect()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(SandboxError::cgroup("read", path, e)),
    }
}

fn rmdir_when_empty(dir: &Path, deadline: Instant) -> Result<(), SandboxError> {
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            // Busy while the last processes are still exiting.
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            Err(e) => return Err(SandboxError::cgroup("remove cgroup", dir, e)),
        }
    }
}

impl Cgroups {
    /// Find the cgroup v2 mount (`/sys/fs/cgroup/unified` on hybrid
    /// machines, `/sys/fs/cgroup` on pure v2), a `pids` controller (v2
    /// if it can be enabled beneath this process's group, else the v1
    /// `pids` hierarchy) and a `memory` controller (the same way; none is
    /// not an error here: [`Cgroups::memory_hierarchy`] says, and the
    /// daemon refuses a configured memory limit it cannot keep), and make
    /// the parent group `name` in each (the daemon passes `agency-<short
    /// hash of the home path>`). Errors name what is missing.
    pub fn open(name: &str) -> Result<Cgroups, SandboxError> {
        check_name("daemon", name)?;
        let layout = Layout::discover()?;
        let mut cg = Cgroups {
            name: name.to_owned(),
            v2: None,
            v2_pids: false,
            v2_memory: false,
            v1_pids: None,
            v1_memory: None,
        };
        if let Some(own) = &layout.v2_own {
            let parent = own.join(name);
            mkdir(&parent)?;
            cg.v2_pids = enable_v2(own, &parent, "pids");
            cg.v2_memory = enable_v2(own, &parent, "memory");
            cg.v2 = Some(parent);
        }
        if !cg.v2_pids {
            match &layout.v1_pids_own {
                Some(own) => {
                    let parent = own.join(name);
                    mkdir(&parent)?;
                    cg.v1_pids = Some(parent);
                }
                None => {
                    return Err(SandboxError::Unavailable(match &layout.v2_own {
                        Some(own) => format!(
                            "failed to find a cgroup pids controller: it cannot be enabled beneath {} (cgroup v2) and no cgroup v1 pids hierarchy is mounted",
                            own.display()
                        ),
                        None => "failed to find a cgroup pids controller: neither cgroup v2 nor a cgroup v1 pids hierarchy is mounted".to_owned(),
                    }));
                }
            }
        }
        if !cg.v2_memory
            && let Some(own) = &layout.v1_memory_own
        {
            let parent = own.join(name);
            mkdir(&parent)?;
            cg.v1_memory = Some(parent);
        }
        Ok(cg)
    }

    /// Where agents' process counts are bounded (`pids.max`).
    pub fn pids_hierarchy(&self) -> Hierarchy {
        if self.v2_pids {
            Hierarchy::V2
        } else {
            Hierarchy::V1
        }
    }

    /// Where agents' memory is bounded as a tree (`memory.max` on v2,
    /// `memory.limit_in_bytes` on v1); `None`: nowhere, each process is
    /// bounded by `RLIMIT_DATA` alone.
    pub fn memory_hierarchy(&self) -> Option<Hierarchy> {
        if self.v2_memory {
            Some(Hierarchy::V2)
        } else if self.v1_memory.is_some() {
            Some(Hierarchy::V1)
        } else {
            None
        }
    }

    /// The parent group's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where the parent groups are (for `agency status` and errors).
    pub fn parents(&self) -> Vec<PathBuf> {
        self.v2
            .iter()
            .chain(&self.v1_pids)
            .chain(&self.v1_memory)
            .cloned()
            .collect()
    }

    /// The handle of agent `agent`'s groups, without creating them.
    pub fn agent(&self, agent: &str) -> Result<AgentCgroup, SandboxError> {
        check_name("agent", agent)?;
        Ok(AgentCgroup {
            v2: self.v2.as_ref().map(|p| p.join(agent)),
            v1_pids: self.v1_pids.as_ref().map(|p| p.join(agent)),
            v1_memory: self.v1_memory.as_ref().map(|p| p.join(agent)),
        })
    }

    /// Make agent `agent`'s groups and set their limits: `pids.max` from
    /// `limits.max_processes`, and the tree's memory from
    /// `limits.memory_bytes` where a memory controller is usable
    /// (`memory.max` on v2, `memory.limit_in_bytes` on v1). A group left
    /// over under the same name is reused (its limits reset).
    pub fn create(&self, agent: &str, limits: &Limits) -> Result<AgentCgroup, SandboxError> {
        let group = self.agent(agent)?;
        let made = (|| -> Result<(), SandboxError> {
            if let Some(dir) = &group.v2 {
                mkdir(dir)?;
                if self.v2_pids {
                    write(&dir.join("pids.max"), &limit_value(limits.max_processes))?;
                }
                if self.v2_memory {
                    write(&dir.join("memory.max"), &limit_value(limits.memory_bytes))?;
                }
            }
            if let Some(dir) = &group.v1_pids {
                mkdir(dir)?;
                write(&dir.join("pids.max"), &limit_value(limits.max_processes))?;
            }
            if let Some(dir) = &group.v1_memory {
                mkdir(dir)?;
                set_v1_memory(dir, limits.memory_bytes)?;
            }
            Ok(())
        })();
        if let Err(e) = made {
            let _ = group.remove();
            return Err(e);
        }
        Ok(group)
    }

    /// Kill every process in every agent group left under the parent and
    /// remove those groups (a restarted daemon reaps its predecessor's
    /// agents). Returns how many processes were found.
    pub fn reap_all(&self) -> Result<usize, SandboxError> {
        let mut agents = BTreeSet::new();
        for parent in self.parents() {
            let entries = match std::fs::read_dir(&parent) {
                Ok(e) => e,
                Err(e) if e.kind() == ErrorKind::NotFound => continue,
                Err(e) => return Err(SandboxError::cgroup("list", parent, e)),
            };
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    agents.insert(entry.file_name().to_string_lossy().into_owned());
                }
            }
        }
        let mut found = 0;
        for agent in agents {
            let Ok(group) = self.agent(&agent) else {
                continue;
            };
            found += group.pids()?.len();
            group.remove()?;
        }
        Ok(found)
    }

    /// Reap every agent group, then remove the parent groups themselves
    /// (a daemon shutting down cleanly leaves nothing in the hierarchy).
    pub fn remove(&self) -> Result<usize, SandboxError> {
        let found = self.reap_all()?;
        let deadline = Instant::now() + REMOVE_WAIT;
        for parent in self.parents() {
            rmdir_when_empty(&parent, deadline)?;
        }
        Ok(found)
    }
}

impl AgentCgroup {
    /// The `cgroup.procs` files to write the agent's pid into (what goes
    /// into [`crate::Policy::cgroup_procs`]).
    pub fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs().map(|d| d.join("cgroup.procs")).collect()
    }

    fn dirs(&self) -> impl Iterator<Item = &PathBuf> {
        self.v2.iter().chain(&self.v1_pids).chain(&self.v1_memory)
    }

    /// The processes in the groups now.
    pub fn pids(&self) -> Result<Vec<i32>, SandboxError> {
        let mut all = BTreeSet::new();
        for dir in self.dirs() {
            all.extend(pids_in(dir)?);
        }
        Ok(all.into_iter().collect())
    }

    /// Kill every process in the group: one write to `cgroup.kill` on v2
    /// (the kernel kills the whole subtree atomically, forks in flight
    /// included); without it, SIGKILL every listed pid until none is left.
    pub fn kill(&self) -> Result<(), SandboxError> {
        if let Some(dir) = &self.v2 {
            let kill = dir.join("cgroup.kill");
            match write(&kill, "1") {
                Ok(()) => return Ok(()),
                Err(SandboxError::Cgroup { source, .. })
                    if source.kind() == ErrorKind::NotFound =>
                {
                    if !dir.exists() {
                        return Ok(());
                    }
                    // A kernel before 5.14: no cgroup.kill, fall back.
                }
                Err(e) => return Err(e),
            }
        }
        for _ in 0..KILL_ROUNDS {
            let pids = self.pids()?;
            if pids.is_empty() {
                return Ok(());
            }
            for pid in pids {
                if let Some(pid) = Pid::from_raw(pid) {
                    // Gone already is fine.
                    let _ = kill_process(pid, Signal::KILL);
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let left = self.pids()?.len();
        if left == 0 {
            return Ok(());
        }
        Err(SandboxError::Unavailable(format!(
            "failed to kill every process of cgroup {}: {left} still running",
            self.dirs()
                .next()
                .map(|d| d.display().to_string())
                .unwrap_or_default()
        )))
    }

    /// No process is left in the group (true if it does not exist).
    pub fn is_empty(&self) -> bool {
        if let Some(dir) = &self.v2 {
            // `populated` covers descendants too.
            match std::fs::read_to_string(dir.join("cgroup.events")) {
                Ok(s) => {
                    if s.lines().any(|l| l.trim() == "populated 1") {
                        return false;
                    }
                }
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(_) => return false,
            }
        }
        self.pids().is_ok_and(|p| p.is_empty())
    }

    /// Kill the processes, wait (bounded) until they are gone, and remove
    /// the groups.
    pub fn remove(&self) -> Result<(), SandboxError> {
        self.kill()?;
        let deadline = Instant::now() + REMOVE_WAIT;
        while !self.is_empty() {
            if Instant::now() >= deadline {
                return Err(SandboxError::Unavailable(format!(
                    "failed to empty cgroup {} within {}s",
                    self.dirs()
                        .next()
                        .map(|d| d.display().to_string())
                        .unwrap_or_default(),
                    REMOVE_WAIT.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        for dir in self.dirs() {
            rmdir_when_empty(dir, deadline)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID_MOUNTS: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    #[test]
    fn finds_hybrid_hierarchies_and_own_groups() {
        let own = "9:name=systemd:/\n8:pids:/daemons\n4:memory:/x/y\n0::/svc/agency\n";
        let l = Layout::parse(HYBRID_MOUNTS, own);
        assert_eq!(
            l.v2_mount.as_deref(),
            Some(Path::new("/sys/fs/cgroup/unified"))
        );
        assert_eq!(
            l.v2_own.as_deref(),
            Some(Path::new("/sys/fs/cgroup/unified/svc/agency"))
        );
        assert_eq!(
            l.v1_pids_own.as_deref(),
            Some(Path::new("/sys/fs/cgroup/pids/daemons"))
        );
        assert_eq!(
            l.v1_memory_own.as_deref(),
            Some(Path::new("/sys/fs/cgroup/memory/x/y"))
        );
    }

    #[test]
    fn finds_pure_v2_with_a_namespaced_root() {
        let mounts = "30 1 0:26 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let l = Layout::parse(mounts, "0::/kubepods/pod1/c1\n");
        assert_eq!(l.v2_own.as_deref(), Some(Path::new("/sys/fs/cgroup/c1")));
        assert!(l.v1_pids_own.is_none());
        assert!(l.v1_memory_own.is_none());
        let l = Layout::parse(mounts, "0::/\n");
        assert_eq!(l.v2_own.as_deref(), Some(Path::new("/sys/fs/cgroup")));
    }

    #[test]
    fn mount_points_are_unescaped() {
        assert_eq!(unescape(r"/mnt/a\040b"), "/mnt/a b");
        assert_eq!(unescape(r"/plain"), "/plain");
        assert_eq!(unescape(r"/trailing\04"), r"/trailing\04");
    }

    #[test]
    fn names_cannot_leave_the_parent() {
        for bad in ["", "..", "a/b", "pids.max", "x y", &"a".repeat(129)] {
            assert!(check_name("agent", bad).is_err(), "{bad}");
        }
        check_name("agent", "agency-0123abcd").expect("ok");
        check_name("agent", "6f1c2d3e-aaaa-bbbb-cccc-0123456789ab").expect("ok");
    }

    #[test]
    fn zero_means_no_limit() {
        assert_eq!(limit_value(0), "max");
        assert_eq!(limit_value(64), "64");
    }
}
