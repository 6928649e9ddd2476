//! The seccomp layer: system calls an agent has no use for and that would
//! widen what it can reach or attack, denied with `EPERM` (`clone3` with
//! `ENOSYS`, so that libc falls back to `clone`, whose flags a filter can
//! see).
//!
//! - sockets: only TCP over IPv4/IPv6 (Landlock then filters the ports)
//!   and netlink route queries (`getifaddrs`); no UDP (no DNS tunnelling
//!   or datagram exfiltration), no raw or packet sockets, no vsock, and no
//!   unix sockets from `socket()` — Landlock before ABI 9 cannot confine
//!   connecting to a pathname socket, and one such connect (a root D-Bus
//!   or container-runtime socket) would be a way out. `socketpair()` (pipes
//!   between a program's own processes) stays, stream and seqpacket only;
//! - namespaces: `unshare`, `setns`, `clone` with a `CLONE_NEW*` flag;
//! - mounts (old and new API), `pivot_root`, `chroot`;
//! - kernel attack surface and introspection: io_uring, BPF,
//!   `perf_event_open`, `userfaultfd`, keyrings, `ptrace` and
//!   `process_vm_*`, kernel modules and kexec, `syslog`,
//!   `open_by_handle_at`, swap, reboot, accounting, quotas.
//!
//! On x86_64 the filter also refuses the x32 system call numbers, which
//! share the x86_64 architecture tag and would otherwise bypass the
//! per-number rules; 32-bit (`int 0x80`) calls are killed by the
//! architecture check.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};

use crate::SandboxError;

type Rules = BTreeMap<i64, Vec<SeccompRule>>;

fn fail(e: impl std::fmt::Display) -> SandboxError {
    SandboxError::apply("seccomp", e)
}

/// `arg` (32 bits, as the kernel reads these int arguments) compared.
fn arg(index: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, SandboxError> {
    SeccompCondition::new(index, SeccompCmpArgLen::Dword, op, value).map_err(fail)
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, SandboxError> {
    SeccompRule::new(conditions).map_err(fail)
}

/// Socket type values (with `SOCK_NONBLOCK`/`SOCK_CLOEXEC`) for `base`.
fn with_flags(base: i32) -> [u64; 4] {
    let b = base as u64;
    let nb = libc::SOCK_NONBLOCK as u64;
    let ce = libc::SOCK_CLOEXEC as u64;
    [b, b | nb, b | ce, b | nb | ce]
}

/// Rules under which `socket()` is denied.
fn socket_rules() -> Result<Vec<SeccompRule>, SandboxError> {
    use SeccompCmpOp::{Eq, Ne};
    let (inet, inet6, netlink) = (
        libc::AF_INET as u64,
        libc::AF_INET6 as u64,
        libc::AF_NETLINK as u64,
    );
    let mut rules = vec![
        // Any family but these three (AF_UNIX included, see the module doc).
        rule(vec![
            arg(0, Ne, inet)?,
            arg(0, Ne, inet6)?,
            arg(0, Ne, netlink)?,
        ])?,
        // Netlink: route queries only.
        rule(vec![
            arg(0, Eq, netlink)?,
            arg(2, Ne, libc::NETLINK_ROUTE as u64)?,
        ])?,
    ];
    for family in [inet, inet6] {
        // Not a stream socket (UDP, raw, SCTP seqpacket, …).
        let mut not_stream = vec![arg(0, Eq, family)?];
        for t in with_flags(libc::SOCK_STREAM) {
            not_stream.push(arg(1, Ne, t)?);
        }
        rules.push(rule(not_stream)?);
        // A stream that is not TCP (SCTP, MPTCP): Landlock's port rules
        // are for TCP.
        rules.push(rule(vec![
            arg(0, Eq, family)?,
            arg(2, Ne, 0)?,
            arg(2, Ne, libc::IPPROTO_TCP as u64)?,
        ])?);
    }
    Ok(rules)
}

/// Rules under which `socketpair()` is denied: any family but AF_UNIX, and
/// datagram pairs (a datagram socket can still `sendto` any address).
fn socketpair_rules() -> Result<Vec<SeccompRule>, SandboxError> {
    use SeccompCmpOp::{Eq, Ne};
    let unix = libc::AF_UNIX as u64;
    let mut not_connected = vec![arg(0, Eq, unix)?];
    for t in with_flags(libc::SOCK_STREAM)
        .into_iter()
        .chain(with_flags(libc::SOCK_SEQPACKET))
    {
        not_connected.push(arg(1, Ne, t)?);
    }
    Ok(vec![rule(vec![arg(0, Ne, unix)?])?, rule(not_connected)?])
}

/// The denylist filter (match: EPERM) and the clone3 filter (match: ENOSYS).
pub(crate) fn filters() -> Result<Vec<BpfProgram>, SandboxError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(fail)?;
    let mut deny: Rules = BTreeMap::new();
    for nr in DENIED {
        deny.insert(*nr, Vec::new());
    }
    deny.insert(libc::SYS_socket, socket_rules()?);
    deny.insert(libc::SYS_socketpair, socketpair_rules()?);
    let mut clone = Vec::new();
    for flag in NAMESPACE_FLAGS {
        let f = *flag as u64;
        clone.push(rule(vec![arg(0, SeccompCmpOp::MaskedEq(f), f)?])?);
    }
    deny.insert(libc::SYS_clone, clone);
    let deny = SeccompFilter::new(
        deny,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(fail)?;
    let clone3 = SeccompFilter::new(
        [(libc::SYS_clone3, Vec::new())].into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .map_err(fail)?;
    let mut deny: BpfProgram = deny.try_into().map_err(fail)?;
    if matches!(arch, TargetArch::x86_64) {
        let mut guarded = x32_guard();
        guarded.append(&mut deny);
        deny = guarded;
    }
    let clone3: BpfProgram = clone3.try_into().map_err(fail)?;
    Ok(vec![deny, clone3])
}

/// Install the filters on the calling thread (inherited across exec).
/// Needs `no_new_privs` (or CAP_SYS_ADMIN).
pub(crate) fn install() -> Result<(), SandboxError> {
    for program in filters()? {
        seccompiler::apply_filter(&program).map_err(fail)?;
    }
    Ok(())
}

/// `if (nr >= X32_SYSCALL_BIT) return ERRNO(ENOSYS);` ahead of the
/// compiled filter.
fn x32_guard() -> Vec<sock_filter> {
    const BPF_LD_W_ABS: u16 = 0x20;
    const BPF_JGE_K: u16 = 0x05 | 0x30;
    const BPF_RET_K: u16 = 0x06;
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    vec![
        sock_filter {
            code: BPF_LD_W_ABS,
            jt: 0,
            jf: 0,
            k: 0,
        },
        sock_filter {
            code: BPF_JGE_K,
            jt: 0,
            jf: 1,
            k: X32_SYSCALL_BIT,
        },
        sock_filter {
            code: BPF_RET_K,
            jt: 0,
            jf: 0,
            k: libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32,
        },
    ]
}

/// `clone` flags that make a new namespace (CLONE_NEWTIME shares its bit
/// with CSIGNAL in `clone` and is only usable with `unshare`, denied
/// wholesale).
const NAMESPACE_FLAGS: &[i32] = &[
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWNS,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWCGROUP,
];

/// Denied whatever their arguments.
const DENIED: &[i64] = &[
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_syslog,
    libc::SYS_open_by_handle_at,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_acct,
    libc::SYS_quotactl,
];
