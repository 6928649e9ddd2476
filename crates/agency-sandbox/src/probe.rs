//! What this machine offers the sandbox, without changing anything: the
//! Landlock ABI, the cgroup v2 mount, where a `pids` controller is. For
//! `agency status` and for start-up errors that say what is missing.

use std::path::PathBuf;

use serde::Serialize;

use crate::SandboxError;
use crate::cgroup::Layout;

/// Where agents' process counts would be limited.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "hierarchy", content = "group")]
pub enum PidsController {
    /// On cgroup v2, beneath this group (the daemon's own).
    V2(PathBuf),
    /// On the cgroup v1 `pids` hierarchy, beneath this group.
    V1(PathBuf),
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
    pub pids: Option<PidsController>,
    /// cgroup v2 offers a `memory` controller to this process's group (the
    /// tree's memory is then bounded too, not only each process's).
    pub memory_v2: bool,
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
        let pids = match &self.pids {
            Some(PidsController::V2(p)) => format!("pids on cgroup v2 ({})", p.display()),
            Some(PidsController::V1(p)) => format!("pids on cgroup v1 ({})", p.display()),
            None => "no pids controller".to_owned(),
        };
        let kill = match &self.cgroup_v2 {
            Some(p) => format!("cgroup.kill on cgroup v2 ({})", p.display()),
            None => "no cgroup v2 (kills by signal)".to_owned(),
        };
        format!("{landlock}; {pids}; {kill}")
    }
}

/// Look at the machine: Landlock ABI, cgroup v2 path, pids controller.
pub fn probe() -> Result<Probe, SandboxError> {
    let layout = Layout::discover()?;
    let v2_pids = layout.v2_own.as_ref().filter(|own| {
        std::fs::read_to_string(own.join("cgroup.controllers"))
            .is_ok_and(|s| s.split_whitespace().any(|c| c == "pids"))
    });
    let memory_v2 = layout.v2_own.as_ref().is_some_and(|own| {
        std::fs::read_to_string(own.join("cgroup.controllers"))
            .is_ok_and(|s| s.split_whitespace().any(|c| c == "memory"))
    });
    let pids = match (v2_pids, &layout.v1_pids_own) {
        (Some(own), _) => Some(PidsController::V2(own.clone())),
        (None, Some(own)) => Some(PidsController::V1(own.clone())),
        (None, None) => None,
    };
    Ok(Probe {
        landlock_abi: crate::landlock_rules::abi(),
        cgroup_v2: layout.v2_mount,
        pids,
        memory_v2,
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
            pids: Some(PidsController::V1("/sys/fs/cgroup/pids".into())),
            memory_v2: false,
        };
        assert!(p.problems().is_empty());
        assert!(p.summary().contains("Landlock ABI 7"), "{}", p.summary());
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
