//! The forwarder of an isolated agent ([`crate::Policy::isolate_network`]):
//! the process `agency sandbox-forward --parent PID` that accepts on the
//! listeners inside the agent's network namespace and relays each
//! connection to the same port on the host's loopback.
//!
//! It is spawned by the agent's `sandbox-exec` before the namespace is made
//! (so it is in the host's namespace, in the agent's cgroups, and outside
//! the agent's Landlock domain: the agent cannot signal or trace it), and
//! receives the listeners over its stdin, a unix seqpacket socket. Then it
//! confines itself with the same [`crate::apply`] as an agent, with
//! nothing granted but TCP connect to the forwarded ports: no file at all,
//! no capability, seccomp, no new privileges. It ends with the agent: it
//! holds a pidfd of its parent and exits when that becomes readable (the
//! parent exited), checking its parent id as well every second; the cgroup
//! kill of the agent ends it too. (Not `PR_SET_PDEATHSIG`: the kernel sends
//! that signal as the dying parent, and the agent's Landlock signal scope
//! stops it, as it would the agent's own `kill`.)
//!
//! Each connection uses two threads (one per direction: blocking copies
//! cannot deadlock that way), and at most [`MAX_CONNECTIONS`] are relayed
//! at once (threads count against the agent's process limit); more wait in
//! the listeners' backlog.

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::net::{Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer, SendFlags,
};
use rustix::process::{Pid, PidfdFlags, getppid, pidfd_open};

use crate::netns::{MAX_PORTS, READY};
use crate::{Limits, Policy, SandboxError};

/// Connections relayed at once.
pub const MAX_CONNECTIONS: usize = 64;
/// A relay thread copies through an 8 KiB buffer and calls little else.
const STACK: usize = 256 << 10;

fn fail(why: impl std::fmt::Display) -> SandboxError {
    SandboxError::apply("forwarder", why)
}

/// Run the forwarder for the agent `parent` (the process that spawned this
/// one): receive the listeners on stdin, confine this process, answer
/// `ready`, and relay until the parent is gone. A failure before `ready` is
/// sent to the parent, which reports it as its own (`failed to apply the
/// sandbox: network namespace: the forwarder: …`), and this returns `Ok`;
/// `Err` only when even that was impossible (stdin is not the socket).
pub fn forward(parent: u32) -> Result<(), SandboxError> {
    let parent = i32::try_from(parent).map_err(|_| fail(format!("no such parent: {parent}")))?;
    let Some(parent_fd) = parent_pidfd(parent)? else {
        return Ok(());
    };
    let stdin = io::stdin();
    let control = stdin.as_fd();
    let listeners = receive(control)?;
    if let Err(e) = confine(&listeners) {
        // Told to the agent, which reports it and exits.
        return send(control, e.to_string().as_bytes())
            .map_err(|_| e)
            .map(|_| ());
    }
    if !is_parent(parent) {
        return Ok(());
    }
    send(control, READY).map_err(|e| fail(format!("failed to answer the agent: {e}")))?;
    let slots = Arc::new(Slots::default());
    for listener in listeners {
        let slots = Arc::clone(&slots);
        // If one cannot start, its port stays unanswered; the others work.
        let _ = std::thread::Builder::new()
            .stack_size(STACK)
            .spawn(move || serve(&listener, &slots));
    }
    let second = Timespec {
        tv_sec: 1,
        tv_nsec: 0,
    };
    while is_parent(parent) {
        let mut fds = [PollFd::new(&parent_fd, PollFlags::IN)];
        match rustix::event::poll(&mut fds, Some(&second)) {
            // Readable: the parent has exited.
            Ok(n) if n > 0 => return Ok(()),
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(fail(format!("failed to watch the agent: {e}"))),
        }
    }
    Ok(())
}

/// A pidfd of `parent`, or `None` if it is no longer this process's
/// parent. Opened first and checked after: if `parent` is still the
/// parent once the pidfd exists, the pidfd is of that process (a parent's
/// pid cannot be reused while it lives).
fn parent_pidfd(parent: i32) -> Result<Option<OwnedFd>, SandboxError> {
    let pid = Pid::from_raw(parent).ok_or_else(|| fail(format!("no such parent: {parent}")))?;
    let fd = match pidfd_open(pid, PidfdFlags::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::SRCH) => return Ok(None),
        Err(e) => return Err(fail(format!("failed to open a pidfd of the agent: {e}"))),
    };
    Ok(is_parent(parent).then_some(fd))
}

/// Whether `parent` is still this process's parent.
fn is_parent(parent: i32) -> bool {
    Pid::as_raw(getppid()) == parent
}

fn send(control: std::os::fd::BorrowedFd<'_>, message: &[u8]) -> io::Result<usize> {
    let mut none = SendAncillaryBuffer::default();
    Ok(rustix::net::sendmsg(
        control,
        &[IoSlice::new(message)],
        &mut none,
        SendFlags::empty(),
    )?)
}

/// The listeners, passed in one message; each must be a TCP listener on a
/// loopback address (anything else is not from our `sandbox-exec`).
fn receive(control: std::os::fd::BorrowedFd<'_>) -> Result<Vec<TcpListener>, SandboxError> {
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2 * MAX_PORTS))];
    let mut ancillary = RecvAncillaryBuffer::new(&mut space);
    let mut data = [0u8; 64];
    let got = rustix::net::recvmsg(
        control,
        &mut [IoSliceMut::new(&mut data)],
        &mut ancillary,
        RecvFlags::CMSG_CLOEXEC,
    )
    .map_err(|e| fail(format!("failed to receive the listeners on stdin: {e}")))?;
    let mut listeners = Vec::new();
    for message in ancillary.drain() {
        if let RecvAncillaryMessage::ScmRights(fds) = message {
            listeners.extend(fds.map(TcpListener::from));
        }
    }
    if got.bytes == 0 || listeners.is_empty() {
        return Err(fail("no listeners were received"));
    }
    for l in &listeners {
        match l.local_addr() {
            Ok(a) if a.ip().is_loopback() => {}
            other => return Err(fail(format!("not a loopback listener: {other:?}"))),
        }
    }
    Ok(listeners)
}

/// The forwarder's own sandbox: no file, TCP connect to the forwarded
/// ports only, everything else as for an agent.
fn confine(listeners: &[TcpListener]) -> Result<(), SandboxError> {
    let mut ports: Vec<u16> = listeners
        .iter()
        .filter_map(|l| l.local_addr().ok().map(|a| a.port()))
        .collect();
    ports.sort_unstable();
    ports.dedup();
    let policy = Policy {
        connect_ports: ports,
        limits: Limits {
            max_processes: 0,
            ..Limits::default()
        },
        ..Policy::deny_all()
    };
    crate::apply(&policy)
}

/// A count of relayed connections, bounded by [`MAX_CONNECTIONS`].
#[derive(Default)]
struct Slots {
    used: Mutex<usize>,
    freed: Condvar,
}

impl Slots {
    fn take(self: &Arc<Self>) -> Slot {
        let mut used = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        while *used >= MAX_CONNECTIONS {
            used = self
                .freed
                .wait(used)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *used += 1;
        Slot(Arc::clone(self))
    }
}

/// One connection's place; given back when dropped.
struct Slot(Arc<Slots>);

impl Drop for Slot {
    fn drop(&mut self) {
        let mut used = self.0.used.lock().unwrap_or_else(PoisonError::into_inner);
        *used = used.saturating_sub(1);
        self.0.freed.notify_one();
    }
}

/// Accept on one listener for as long as the process lives.
fn serve(listener: &TcpListener, slots: &Arc<Slots>) {
    let Ok(local) = listener.local_addr() else {
        return;
    };
    let targets = targets(local);
    loop {
        let slot = slots.take();
        match listener.accept() {
            Ok((inbound, _)) => {
                // On failure both are dropped: the connection is closed.
                let _ = std::thread::Builder::new()
                    .stack_size(STACK)
                    .spawn(move || relay(inbound, targets, slot));
            }
            // A listener that is no longer one: nothing more will come.
            Err(e) if matches!(e.raw_os_error(), Some(libc::EBADF | libc::EINVAL)) => return,
            // Out of descriptors or memory, for a moment.
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// Where a connection to `local` (inside) goes: the same port on the
/// host's loopback, the same family first (a "localhost" URL may lead to
/// either, whichever the host's server listens on).
fn targets(local: SocketAddr) -> [SocketAddr; 2] {
    let v4 = SocketAddr::from((Ipv4Addr::LOCALHOST, local.port()));
    let v6 = SocketAddr::from((Ipv6Addr::LOCALHOST, local.port()));
    if local.is_ipv6() { [v6, v4] } else { [v4, v6] }
}

fn relay(inbound: TcpStream, targets: [SocketAddr; 2], _slot: Slot) {
    let Some(outbound) = targets.iter().find_map(|t| TcpStream::connect(t).ok()) else {
        return;
    };
    // Each side chose its own batching; the relay must not add Nagle's.
    let _ = inbound.set_nodelay(true);
    let _ = outbound.set_nodelay(true);
    std::thread::scope(|s| {
        let up = std::thread::Builder::new()
            .stack_size(STACK)
            .spawn_scoped(s, || pump(&inbound, &outbound));
        if up.is_ok() {
            pump(&outbound, &inbound);
        }
    });
}

/// Copy `from` to `to` until end of file, then pass the end on (half
/// close); on an error, end both directions.
fn pump(from: &TcpStream, to: &TcpStream) {
    let (mut r, mut w) = (from, to);
    match io::copy(&mut r, &mut w) {
        Ok(_) => {
            let _ = to.shutdown(Shutdown::Write);
        }
        Err(_) => {
            let _ = from.shutdown(Shutdown::Both);
            let _ = to.shutdown(Shutdown::Both);
        }
    }
}
