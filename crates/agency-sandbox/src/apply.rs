//! Applying a [`Policy`] to the current process, layer by layer, in the
//! one order that works: joining cgroups and raising nothing need root's
//! capabilities, so they come before the capabilities are dropped;
//! seccomp needs `no_new_privs`; Landlock comes last so the steps before
//! it can still open what they need. Each step checks its own effect
//! where it can, and the first failure stops everything (the caller must
//! then not run the program: fail closed).

use std::io::Write;
use std::path::Path;

use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
use rustix::thread::{
    CapabilitiesSecureBits, CapabilitySet, CapabilitySets, capabilities,
    capability_is_in_bounding_set, clear_ambient_capability_set,
    remove_capability_from_bounding_set, set_capabilities, set_capabilities_secure_bits,
    set_no_new_privs,
};

use crate::{Limits, Policy, SandboxError, landlock_rules, netns, seccomp};

/// Apply `policy` to the current process, which must be single-threaded
/// (capabilities, seccomp and Landlock are per thread; the exec that
/// follows keeps only the calling thread). In order:
///
/// 1. join the policy's cgroups;
///    then, with [`Policy::isolate_network`], a network namespace of its
///    own with the policy's ports forwarded to the host's loopback by a
///    forwarder process spawned now (in the cgroups, still privileged,
///    outside the Landlock domain to come: see the `netns` module);
/// 2. rlimits: `RLIMIT_DATA` (memory), `RLIMIT_CPU`, `RLIMIT_FSIZE`,
///    `RLIMIT_NOFILE` (never raised above the current hard limit), and no
///    core dumps;
/// 3. `PR_SET_NO_NEW_PRIVS`;
/// 4. every capability dropped — bounding, ambient, inheritable,
///    permitted, effective — with the securebits locked so that an exec as
///    uid 0 gains none back;
/// 5. seccomp (see the `seccomp` module);
/// 6. Landlock: the policy's paths and ports, the scopes; ABI 6 required.
///
/// Before all that, every inherited descriptor above stderr is marked
/// close-on-exec: Landlock checks opening, not using, so a descriptor the
/// parent leaked (a database, a listening socket, a file a shell opened
/// with `exec 3<`) would otherwise carry access past the walls.
pub fn apply(policy: &Policy) -> Result<(), SandboxError> {
    policy
        .validate()
        .map_err(|e| SandboxError::apply("policy", e))?;
    single_threaded()?;
    close_fds::CloseFdsBuilder::new().cloexecfrom(3);
    join_cgroups(&policy.cgroup_procs)?;
    if policy.isolate_network {
        netns::isolate(&policy.connect_ports)?;
    }
    set_limits(&policy.limits)?;
    set_no_new_privs(true).map_err(|e| SandboxError::apply("no_new_privs", e))?;
    drop_capabilities()?;
    seccomp::install()?;
    seccomp_canary()?;
    landlock_rules::restrict(policy)
}

fn single_threaded() -> Result<(), SandboxError> {
    let status = std::fs::read_to_string("/proc/self/status").map_err(|e| {
        SandboxError::apply("threads", format!("failed to read /proc/self/status: {e}"))
    })?;
    let threads = status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse::<u32>().ok());
    match threads {
        Some(1) => Ok(()),
        Some(n) => Err(SandboxError::apply(
            "threads",
            format!("the process has {n} threads; the sandbox would confine only one"),
        )),
        None => Err(SandboxError::apply(
            "threads",
            "failed to read the thread count from /proc/self/status",
        )),
    }
}

/// Move this process into each group ("0" is the writer itself, whatever
/// pid namespace it is in).
fn join_cgroups(files: &[std::path::PathBuf]) -> Result<(), SandboxError> {
    for file in files {
        join(file)
            .map_err(|e| SandboxError::apply(format!("join cgroup {}", file.display()), e))?;
    }
    Ok(())
}

fn join(file: &Path) -> std::io::Result<()> {
    // No `create`: a missing group is an error, not a new file.
    let mut f = std::fs::OpenOptions::new().write(true).open(file)?;
    f.write_all(b"0")
}

fn set_limits(limits: &Limits) -> Result<(), SandboxError> {
    let wanted = [
        ("RLIMIT_DATA", Resource::Data, limits.memory_bytes),
        ("RLIMIT_CPU", Resource::Cpu, limits.cpu_seconds),
        ("RLIMIT_FSIZE", Resource::Fsize, limits.file_size_bytes),
        ("RLIMIT_NOFILE", Resource::Nofile, limits.open_files),
    ];
    for (name, resource, value) in wanted {
        if value == 0 {
            continue;
        }
        // Never above the hard limit in force: a limit only lowers.
        let value = getrlimit(resource)
            .maximum
            .map_or(value, |max| max.min(value));
        set_limit(name, resource, value)?;
    }
    // A core dump would write the process's memory where it stands.
    set_limit("RLIMIT_CORE", Resource::Core, 0)
}

fn set_limit(name: &str, resource: Resource, value: u64) -> Result<(), SandboxError> {
    let limit = Rlimit {
        current: Some(value),
        maximum: Some(value),
    };
    setrlimit(resource, limit).map_err(|e| SandboxError::apply(format!("rlimit {name}"), e))?;
    if getrlimit(resource) != limit {
        return Err(SandboxError::apply(
            format!("rlimit {name}"),
            format!("set to {value} but reads back {:?}", getrlimit(resource)),
        ));
    }
    Ok(())
}

/// The capabilities the kernel knows, one bit each (ends where the
/// bounding-set query says the number is invalid).
fn known_capabilities() -> Vec<CapabilitySet> {
    (0..64)
        .map(|n| CapabilitySet::from_bits_retain(1 << n))
        .take_while(|c| capability_is_in_bounding_set(*c).is_ok())
        .collect()
}

fn drop_capabilities() -> Result<(), SandboxError> {
    let fail = |e: rustix::io::Errno| SandboxError::apply("capabilities", e);
    let before = capabilities(None).map_err(fail)?;
    let caps = known_capabilities();
    if before.effective.contains(CapabilitySet::SETPCAP) {
        // Locked: root's exec computes no capabilities (NO_ROOT), uid
        // changes adjust none (NO_SETUID_FIXUP), no ambient raise.
        set_capabilities_secure_bits(
            CapabilitiesSecureBits::NO_ROOT
                | CapabilitiesSecureBits::NO_ROOT_LOCKED
                | CapabilitiesSecureBits::NO_SETUID_FIXUP
                | CapabilitiesSecureBits::NO_SETUID_FIXUP_LOCKED
                | CapabilitiesSecureBits::KEEP_CAPS_LOCKED
                | CapabilitiesSecureBits::NO_CAP_AMBIENT_RAISE
                | CapabilitiesSecureBits::NO_CAP_AMBIENT_RAISE_LOCKED,
        )
        .map_err(|e| SandboxError::apply("capabilities: securebits", e))?;
        for cap in &caps {
            remove_capability_from_bounding_set(*cap).map_err(|e| {
                SandboxError::apply(
                    format!("capabilities: drop {cap:?} from the bounding set"),
                    e,
                )
            })?;
        }
    }
    clear_ambient_capability_set()
        .map_err(|e| SandboxError::apply("capabilities: ambient set", e))?;
    let none = CapabilitySet::empty();
    set_capabilities(
        None,
        CapabilitySets {
            effective: none,
            permitted: none,
            inheritable: none,
        },
    )
    .map_err(fail)?;
    // Check, do not trust.
    let after = capabilities(None).map_err(fail)?;
    if !(after.effective.is_empty() && after.permitted.is_empty() && after.inheritable.is_empty()) {
        return Err(SandboxError::apply(
            "capabilities",
            format!("some remain after dropping: {after:?}"),
        ));
    }
    let bounding: Vec<&CapabilitySet> = caps
        .iter()
        .filter(|c| capability_is_in_bounding_set(**c).unwrap_or(true))
        .collect();
    // Without CAP_SETPCAP (a non-root daemon) the bounding set cannot be
    // emptied, and need not be: no_new_privs keeps an exec from gaining
    // beyond the (now empty) permitted set. For root it must be empty.
    if !bounding.is_empty() && rustix::process::geteuid().is_root() {
        return Err(SandboxError::apply(
            "capabilities",
            format!("{} remain in the bounding set", bounding.len()),
        ));
    }
    Ok(())
}

/// A UDP socket must now be refused by the filter.
fn seccomp_canary() -> Result<(), SandboxError> {
    match std::net::UdpSocket::bind("127.0.0.1:0") {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => Ok(()),
        Err(e) => Err(SandboxError::apply(
            "seccomp",
            format!("self-check: a UDP socket failed with {e}, expected a denial"),
        )),
        Ok(_) => Err(SandboxError::apply(
            "seccomp",
            "self-check: a UDP socket could still be made",
        )),
    }
}
