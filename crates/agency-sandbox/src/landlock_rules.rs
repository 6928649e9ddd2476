//! The Landlock layer, applied last: file system, TCP and scope rules.
//!
//! Every access right of ABI 6 is handled and required (the ruleset is
//! refused, not weakened, on an older kernel), so whatever is not granted
//! below is denied: reading, writing, executing, creating, renaming,
//! linking, truncating and device ioctls outside the granted paths; TCP
//! bind everywhere; TCP connect except to the granted ports; signals and
//! abstract unix sockets to processes outside the sandbox (so also
//! ptrace-class access to them: `/proc/PID/environ`, `mem`). Rights of
//! later ABIs (connecting to pathname unix sockets, UDP) are handled too
//! where the kernel has them.

use std::path::Path;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    PathFd, RestrictSelfAttr, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope,
};

use crate::{Policy, SandboxError};

/// The oldest ABI the sandbox accepts: file system (with `Refer`,
/// `Truncate`, `IoctlDev`), TCP, and the signal and abstract-socket scopes.
const REQUIRED: ABI = ABI::V6;
/// [`REQUIRED`] as a number, for messages.
pub(crate) const REQUIRED_NUMBER: u32 = 6;
/// The newest ABI this crate knows; its extra rights are used when the
/// kernel has them.
const NEWEST: ABI = ABI::V10;

fn err(step: &str) -> impl Fn(landlock::RulesetError) -> SandboxError + '_ {
    move |e| SandboxError::apply(format!("landlock: {step}"), e)
}

/// Restrict the current thread (and what it execs) to `policy`.
pub(crate) fn restrict(policy: &Policy) -> Result<(), SandboxError> {
    let created = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(REQUIRED))
        .map_err(|e| unsupported("the file system rules", e))?
        .handle_access(AccessNet::from_all(REQUIRED))
        .map_err(|e| unsupported("the TCP rules", e))?
        .scope(Scope::from_all(REQUIRED))
        .map_err(|e| unsupported("the signal and abstract socket scopes", e))?
        // Newer rights: handled where the kernel has them.
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(NEWEST))
        .map_err(err("handle the file system rights"))?
        .handle_access(AccessNet::from_all(NEWEST))
        .map_err(err("handle the network rights"))?
        .scope(Scope::from_all(NEWEST))
        .map_err(err("handle the scopes"))?
        .create()
        .map_err(err("create the ruleset"))?;

    let mut created = created;
    for path in &policy.read_write {
        created = created
            .add_rule(path_rule(path, AccessFs::from_all(NEWEST))?)
            .map_err(|e| SandboxError::apply(format!("landlock: grant {}", path.display()), e))?;
    }
    for path in &policy.read_only {
        created = created
            .add_rule(path_rule(path, AccessFs::from_read(NEWEST))?)
            .map_err(|e| SandboxError::apply(format!("landlock: grant {}", path.display()), e))?;
    }
    for port in &policy.connect_ports {
        created = created
            .add_rule(NetPort::new(*port, AccessNet::ConnectTcp))
            .map_err(|e| SandboxError::apply(format!("landlock: allow TCP port {port}"), e))?;
    }
    let status = created
        .restrict_self()
        .map_err(err("restrict the process"))?;
    if status.ruleset == RulesetStatus::NotEnforced || !status.no_new_privs {
        return Err(SandboxError::apply(
            "landlock",
            "the kernel did not enforce the ruleset",
        ));
    }
    canary()
}

/// A rule for `path`: `access` beneath a directory, or the part of it that
/// applies to a single file.
fn path_rule(path: &Path, access: BitFlags<AccessFs>) -> Result<PathBeneath<PathFd>, SandboxError> {
    let fd = PathFd::new(path)
        .map_err(|e| SandboxError::apply(format!("landlock: open {}", path.display()), e))?;
    let meta = rustix::fs::fstat(&fd)
        .map_err(|e| SandboxError::apply(format!("landlock: stat {}", path.display()), e))?;
    let is_dir =
        rustix::fs::FileType::from_raw_mode(meta.st_mode) == rustix::fs::FileType::Directory;
    let access = if is_dir {
        access
    } else {
        access & AccessFs::from_file(NEWEST)
    };
    Ok(PathBeneath::new(fd, access))
}

fn unsupported(what: &str, e: landlock::RulesetError) -> SandboxError {
    SandboxError::apply(
        "landlock",
        format!(
            "the kernel cannot enforce {what} (Landlock ABI {} or later is needed: Linux 6.12+ with Landlock enabled): {e}",
            REQUIRED_NUMBER
        ),
    )
}

/// Check that the restriction really holds: `/` is never granted (policy
/// validation refuses it), so listing it must now be denied.
fn canary() -> Result<(), SandboxError> {
    match std::fs::read_dir("/") {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Ok(()),
        Err(e) => Err(SandboxError::apply(
            "landlock",
            format!("self-check: listing / failed with {e}, expected a denial"),
        )),
        Ok(_) => Err(SandboxError::apply(
            "landlock",
            "self-check: / can still be listed",
        )),
    }
}

/// The newest Landlock ABI the kernel supports (as far as this crate can
/// tell them apart), or `None` without Landlock. Creates no restriction.
pub(crate) fn abi() -> Option<u32> {
    let hard = || Ruleset::default().set_compatibility(CompatLevel::HardRequirement);
    let fs = |a: BitFlags<AccessFs>| hard().handle_access(a).is_ok();
    let net = |a: BitFlags<AccessNet>| hard().handle_access(a).is_ok();
    let scope = |s: BitFlags<Scope>| hard().scope(s).is_ok();
    // Flags of landlock_restrict_self(): checked on a created ruleset.
    let created = || {
        Ruleset::default()
            .handle_access(AccessFs::Execute)
            .ok()?
            .create()
            .ok()
            .map(|c| c.set_compatibility(CompatLevel::HardRequirement))
    };
    if !fs(AccessFs::Execute.into()) {
        return None;
    }
    let levels: [(u32, bool); 9] = [
        (10, net(AccessNet::BindUdp.into())),
        (9, fs(AccessFs::ResolveUnix.into())),
        (8, created().is_some_and(|c| c.all_threads(true).is_ok())),
        (7, created().is_some_and(|c| c.log_new_exec(true).is_ok())),
        (6, scope(Scope::Signal.into())),
        (5, fs(AccessFs::IoctlDev.into())),
        (4, net(AccessNet::ConnectTcp.into())),
        (3, fs(AccessFs::Truncate.into())),
        (2, fs(AccessFs::Refer.into())),
    ];
    Some(levels.into_iter().find(|(_, ok)| *ok).map_or(1, |(v, _)| v))
}
