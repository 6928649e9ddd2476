//! Agency's sandbox for agent processes.
//!
//! The daemon does not confine a child from a `pre_exec` closure (that
//! would need `unsafe`); it runs `agency sandbox-exec --policy FILE --
//! PROGRAM…`, which calls [`apply`] on itself and then execs the program.
//! Every restriction below survives `execve` and is inherited by every
//! descendant, and none can be undone from inside:
//!
//! - **cgroups** ([`Cgroups`], [`AgentCgroup`]): the tree is counted and
//!   bounded (`pids.max`; the tree's memory where a v2 or v1 memory
//!   controller is usable) and can be killed as a whole, including
//!   children that called `setsid` or double-forked;
//! - **rlimits**: memory (`RLIMIT_DATA`), CPU time, file size, open files;
//! - **no_new_privs** and **no capabilities**, even for root: bounding,
//!   ambient, inheritable, permitted and effective sets emptied, securebits
//!   locked so an exec as uid 0 gains none back;
//! - **seccomp**: no UDP/raw/other sockets (TCP only), no new namespaces,
//!   no io_uring, BPF, perf, keyrings, ptrace, mounts or kernel modules;
//! - **Landlock** (ABI 6 or later, required): the file system beneath the
//!   policy's paths only, TCP connect to the policy's ports only, no bind,
//!   no signals and no abstract unix sockets outside the sandbox;
//! - optionally a **network namespace** of its own (`netns`,
//!   [`Policy::isolate_network`]): only `lo`, the policy's ports forwarded
//!   to the host's loopback by a separate, confined process ([`forward`]),
//!   so that a TCP port of the daemon's is reachable on loopback only.
//!
//! Stopping what an agent (or any child of the daemon) started by its
//! process group is [`process_group`]'s, the one implementation of it.
//!
//! The crate does no terminal I/O: it returns [`SandboxError`]s.

mod apply;
mod cgroup;
mod error;
mod exec_request;
mod forward;
mod landlock_rules;
mod netlink;
mod netns;
mod policy;
mod probe;
pub mod process_group;
mod seccomp;
mod system;

pub use apply::apply;
pub use cgroup::{AgentCgroup, Cgroups, Hierarchy};
pub use error::SandboxError;
pub use exec_request::{ExecRequest, ExecRequestError, MAX_EXEC_REQUEST};
pub use forward::{MAX_CONNECTIONS, forward};
pub use netns::FORWARD_COMMAND;
pub use policy::{Limits, Policy};
pub use probe::{Controller, Probe, probe};
pub use system::{system_read_only, system_read_write_files};
