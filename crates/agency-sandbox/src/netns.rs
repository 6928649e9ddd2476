//! The network namespace of an agent ([`crate::Policy::isolate_network`]):
//! the agent gets a namespace of its own holding only `lo`, where the
//! policy's ports (and nothing else) are listened on and forwarded to the
//! same ports on the host's loopback. Landlock filters TCP by port, not by
//! address: without this, a remote host listening on one of the daemon's
//! port numbers would be reachable too; inside the namespace there is no
//! route anywhere, and 127.0.0.1:PORT is the forwarder.
//!
//! The order, all while still privileged and single-threaded:
//!
//! 1. a unix seqpacket pair; the forwarder (`/proc/self/exe
//!    sandbox-forward --parent PID`, [`crate::forward`]) is spawned with one
//!    end as its stdin, *before* the namespace is made, so it stays in the
//!    host's namespace and needs no `setns` (nor any privilege) to reach
//!    the host's loopback; it is in the agent's cgroups already;
//! 2. `unshare(CLONE_NEWNET)`, then `lo` up ([`crate::netlink`]);
//! 3. a listener on 127.0.0.1:PORT (and [::1]:PORT where IPv6 is on) per
//!    port: the same numbers, so the agent's URLs do not change;
//! 4. the listeners are passed to the forwarder (`SCM_RIGHTS`), which
//!    confines itself and answers `ready` (or its error);
//! 5. the agent's copies are closed: it must not accept on them (it could
//!    then play the daemon to its own children).
//!
//! Whatever fails, the forwarder is killed and the error returned.

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvFlags, SendAncillaryBuffer, SendAncillaryMessage,
    SendFlags, SocketFlags, SocketType,
};

use crate::{SandboxError, netlink};

/// The hidden subcommand of the running binary that runs
/// [`crate::forward`] (`agency sandbox-forward --parent PID`).
pub const FORWARD_COMMAND: &str = "sandbox-forward";

/// At most this many ports are forwarded (two listeners each must fit in
/// one `SCM_RIGHTS` message, whose kernel limit is 253 descriptors).
pub(crate) const MAX_PORTS: usize = 100;

/// How long the agent waits for the forwarder to say it is ready: it has
/// only to confine itself, which takes milliseconds; a forwarder that
/// hangs must not hang the agent's start forever.
const READY_WAIT: Duration = Duration::from_secs(20);

/// What the forwarder sends back when it serves the listeners.
pub(crate) const READY: &[u8] = b"ready";

fn fail(why: impl std::fmt::Display) -> SandboxError {
    SandboxError::apply("network namespace", why)
}

/// Move the calling (single-threaded, privileged) process into a new
/// network namespace with `ports` forwarded to the host's loopback.
pub(crate) fn isolate(ports: &[u16]) -> Result<(), SandboxError> {
    if ports.len() > MAX_PORTS {
        return Err(fail(format!(
            "{} ports to forward; at most {MAX_PORTS} can be",
            ports.len()
        )));
    }
    if ports.is_empty() {
        // Nothing to forward: the namespace alone, no forwarder.
        return enter();
    }
    let (ours, theirs) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|e| fail(format!("failed to make the forwarder's socket pair: {e}")))?;
    let mut forwarder = spawn_forwarder(theirs)?;
    let result = enter()
        .and_then(|()| listen(ports))
        .and_then(|listeners| hand_over(&ours, &listeners));
    if result.is_err() {
        let _ = forwarder.kill();
        let _ = forwarder.wait();
    }
    // Dropping the Child neither kills nor waits: the forwarder lives on as
    // the agent's child until the agent exits (it watches a pidfd of it).
    result
}

/// The forwarder: this same binary, with the pair's other end as stdin;
/// no environment, no stdout (it must not hold the agent's output pipe
/// open for any reason of its own), stderr shared for its rare errors.
fn spawn_forwarder(theirs: OwnedFd) -> Result<Child, SandboxError> {
    // `/proc/self/exe` is resolved by the child before it execs: the same
    // binary, even if its path was replaced since.
    Command::new("/proc/self/exe")
        .arg0("agency-sandbox-forward")
        .arg(FORWARD_COMMAND)
        .arg("--parent")
        .arg(std::process::id().to_string())
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::from(theirs))
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| fail(format!("failed to start the forwarder: {e}")))
}

/// A new network namespace for this process, with `lo` up.
fn enter() -> Result<(), SandboxError> {
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
        .map_err(|e| fail(format!("unshare: {e}")))?;
    netlink::loopback_up().map_err(|e| fail(format!("failed to bring lo up: {e}")))
}

/// The listeners inside the new namespace: 127.0.0.1:PORT, and [::1]:PORT
/// unless the namespace has no IPv6 (then `::1` does not exist).
fn listen(ports: &[u16]) -> Result<Vec<TcpListener>, SandboxError> {
    let mut listeners = Vec::with_capacity(2 * ports.len());
    for port in ports {
        let v4 = SocketAddr::from((Ipv4Addr::LOCALHOST, *port));
        listeners.push(
            TcpListener::bind(v4).map_err(|e| fail(format!("failed to listen on {v4}: {e}")))?,
        );
        let v6 = SocketAddr::from((Ipv6Addr::LOCALHOST, *port));
        match TcpListener::bind(v6) {
            Ok(l) => listeners.push(l),
            Err(e) if e.kind() == io::ErrorKind::AddrNotAvailable => {}
            Err(e) if e.raw_os_error() == Some(libc::EAFNOSUPPORT) => {}
            Err(e) => return Err(fail(format!("failed to listen on {v6}: {e}"))),
        }
    }
    Ok(listeners)
}

/// Pass the listeners to the forwarder and wait for its answer.
fn hand_over(ours: &OwnedFd, listeners: &[TcpListener]) -> Result<(), SandboxError> {
    let fds: Vec<BorrowedFd<'_>> = listeners.iter().map(AsFd::as_fd).collect();
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(fds.len()))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(fail("failed to pack the listeners for the forwarder"));
    }
    rustix::net::sendmsg(
        ours,
        &[IoSlice::new(b"listeners")],
        &mut control,
        SendFlags::empty(),
    )
    .map_err(|e| {
        fail(format!(
            "failed to pass the listeners to the forwarder: {e}"
        ))
    })?;
    rustix::net::sockopt::set_socket_timeout(
        ours,
        rustix::net::sockopt::Timeout::Recv,
        Some(READY_WAIT),
    )
    .map_err(|e| fail(format!("failed to set a timeout: {e}")))?;
    let mut answer = [0u8; 1024];
    let mut none = RecvAncillaryBuffer::default();
    let got = rustix::net::recvmsg(
        ours,
        &mut [IoSliceMut::new(&mut answer)],
        &mut none,
        RecvFlags::CMSG_CLOEXEC,
    );
    match got {
        Ok(m) if answer.get(..m.bytes) == Some(READY) => Ok(()),
        Ok(m) if m.bytes == 0 => Err(fail("the forwarder exited before it was ready")),
        Ok(m) => Err(fail(format!(
            "the forwarder: {}",
            String::from_utf8_lossy(answer.get(..m.bytes).unwrap_or_default())
        ))),
        Err(e) if e == rustix::io::Errno::AGAIN => Err(fail(format!(
            "the forwarder was not ready after {} seconds",
            READY_WAIT.as_secs()
        ))),
        Err(e) => Err(fail(format!("failed to hear from the forwarder: {e}"))),
    }
}
