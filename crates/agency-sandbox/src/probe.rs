//! What this machine offers the sandbox, without changing anything: the
//! Landlock ABI, the cgroup v2 mount, where a `pids` and a `memory`
//! controller are. For `agency status` and for start-up errors that say
//! what is missing.

use std::path::PathBuf;

use serde::Serialize;

use crate::SandboxError;
use crate::cgroup::Layout;

/// Where a controller (`pids`, `memory`) would bound agents' trees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "hierarchy", content = "group")]
pub enum Controller {
    /// On cgroup v2, beneath this group (the daemon's own).
    V2(PathBuf),
    /// On the controller's cgroup v1 hierarchy, beneath this group.
    V1(PathBuf),
}

impl Controller {
    /// The hierarchy it is on.
    pub fn hierarchy(&self) -> crate::Hierarchy {
        match self {
            Controller::V2(_) => crate::Hierarchy::V2,
            Controller::V1(_) => crate::Hierarchy::V1,
        }
    }

    fn describe(&self, name: &str) -> String {
        match self {
            Controller::V2(p) => format!("{name} on cgroup v2 ({})", p.display()),
            Controller::V1(p) => format!("{name} on cgroup v1 ({})", p.display()),
        }
    }
}

/// The sandbox's prerequisites on this machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Probe {
    /// The newest Landlock ABI the kernel supports, `None` without
    /// Landlock (6 or later is required).
    pub landlock_abi: Option<u32>,
    /// Where cgroup v2 is mounted, if it is.
    pub cgroup_v2: Option<PathBuf>,
    /// Where a `pids` controller is usable, if anywhere.
    pub pids: Option<Controller>,
    /// Where a `memory` controller is usable, if anywhere: the tree's
    /// memory is then bounded too, not only each process's (a configured
    /// `memory_mb` is refused without one).
    pub memory: Option<Controller>,
}

impl Probe {
    /// What is missing for the sandbox, one sentence each (empty: usable).
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        match self.landlock_abi {
            None => out.push(
                "Landlock is not available (a kernel built with CONFIG_SECURITY_LANDLOCK and landlock in the lsm= boot list is needed)"
                    .to_owned(),
            ),
            Some(v) if v < crate::landlock_rules::REQUIRED_NUMBER => out.push(format!(
                "the kernel's Landlock ABI is {v}; {} or later (Linux 6.12+) is needed",
                crate::landlock_rules::REQUIRED_NUMBER
            )),
            Some(_) => {}
        }
        if self.pids.is_none() {
            out.push("no cgroup pids controller is usable (neither on cgroup v2 nor a v1 pids hierarchy)".to_owned());
        }
        out
    }

    /// One line for `agency status`.
    pub fn summary(&self) -> String {
        let landlock = self
            .landlock_abi
            .map_or("Landlock unavailable".to_owned(), |v| {
                format!("Landlock ABI {v}")
            });
        let pids = self
            .pids
            .as_ref()
            .map_or("no pids controller".to_owned(), |c| c.describe("pids"));
        let memory = self
            .memory
            .as_ref()
            .map_or("no memory controller in cgroup v1 or v2".to_owned(), |c| {
                c.describe("memory")
            });
        let kill = match &self.cgroup_v2 {
            Some(p) => format!("cgroup.kill on cgroup v2 ({})", p.display()),
            None => "no cgroup v2 (kills by signal)".to_owned(),
        };
        format!("{landlock}; {pids}; {memory}; {kill}")
    }
}

/// Look at the machine: Landlock ABI, cgroup v2 path, pids and memory
/// controllers (v2 where this process's group offers them, else v1).
pub fn probe() -> Result<Probe, SandboxError> {
    let layout = Layout::discover()?;
    let find = |name: &str, v1: &Option<PathBuf>| {
        let v2 = layout.v2_own.as_ref().filter(|own| {
            std::fs::read_to_string(own.join("cgroup.controllers"))
                .is_ok_and(|s| s.split_whitespace().any(|c| c == name))
        });
        match (v2, v1) {
            (Some(own), _) => Some(Controller::V2(own.clone())),
            (None, Some(own)) => Some(Controller::V1(own.clone())),
            (None, None) => None,
        }
    };
    let pids = find("pids", &layout.v1_pids_own);
    let memory = find("memory", &layout.v1_memory_own);
    Ok(Probe {
        landlock_abi: crate::landlock_rules::abi(),
        cgroup_v2: layout.v2_mount,
        pids,
        memory,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_name_what_is_missing() {
        let mut p = Probe {
            landlock_abi: Some(7),
            cgroup_v2: Some("/sys/fs/cgroup/unified".into()),
            pids: Some(Controller::V1("/sys/fs/cgroup/pids".into())),
            memory: None,
        };
        assert!(p.problems().is_empty(), "a memory controller is optional");
        assert!(p.summary().contains("Landlock ABI 7"), "{}", p.summary());
        assert!(
            p.summary()
                .contains("no memory controller in cgroup v1 or v2"),
            "{}",
            p.summary()
        );
        p.memory = Some(Controller::V1("/sys/fs/cgroup/memory/a".into()));
        assert!(
            p.summary()
                .contains("memory on cgroup v1 (/sys/fs/cgroup/memory/a)"),
            "{}",
            p.summary()
        );
        p.landlock_abi = Some(5);
        p.pids = None;
        let problems = p.problems().join("\n");
        assert!(problems.contains("ABI is 5"), "{problems}");
        assert!(problems.contains("pids"), "{problems}");
        p.landlock_abi = None;
        assert!(p.problems()[0].contains("Landlock is not available"));
    }

    /// The project's machines (and CI's) have what the sandbox needs; a
    /// machine without it fails here with the reason.
    #[test]
    fn this_machine_can_sandbox() {
        let p = probe().expect("probe");
        assert!(
            p.problems().is_empty(),
            "{:?}: {}",
            p.problems(),
            p.summary()
        );
        assert!(p.landlock_abi.is_some_and(|v| v >= 6), "{}", p.summary());
        eprintln!("{}", p.summary());
    }
}
