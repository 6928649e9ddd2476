//! Bringing the loopback interface up in a fresh network namespace, with
//! one hand-built rtnetlink message instead of running `ip link set lo up`
//! (the sandbox must not depend on an external program, and this is the
//! only network configuration it does).
//!
//! A new network namespace holds exactly one interface, `lo`, with index 1,
//! down: a socket may bind 127.0.0.1 but nothing can connect to it
//! (`ENETUNREACH`). Setting `IFF_UP` on it makes the kernel add
//! 127.0.0.1/8 (and ::1 where IPv6 is enabled). The request is an
//! `RTM_NEWLINK` on index 1 changing only that flag, sent with
//! `NLM_F_ACK` so the kernel answers with an `NLMSG_ERROR` carrying 0 (done)
//! or a negative errno.
//!
//! Layouts (native byte order, from `<linux/netlink.h>` and
//! `<linux/rtnetlink.h>`; these are kernel ABI and do not change):
//!
//! ```text
//! struct nlmsghdr  { u32 len; u16 type; u16 flags; u32 seq; u32 pid; }   16 bytes
//! struct ifinfomsg { u8 family; u8 pad; u16 type; i32 index;
//!                    u32 flags; u32 change; }                            16 bytes
//! struct nlmsgerr  { i32 error; struct nlmsghdr msg; /* ... */ }
//! ```

use std::io;

use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketFlags, SocketType};

/// `RTM_NEWLINK`: create or modify a link.
const RTM_NEWLINK: u16 = 16;
/// `NLMSG_ERROR`: the kernel's answer to a request sent with `NLM_F_ACK`.
const NLMSG_ERROR: u16 = 2;
/// `NLM_F_REQUEST | NLM_F_ACK`.
const FLAGS_REQUEST_ACK: u16 = 0x1 | 0x4;
/// `IFF_UP`.
const IFF_UP: u32 = 0x1;
/// The loopback interface's index in a new network namespace.
const LOOPBACK_INDEX: i32 = 1;
/// Sizes of the structures above.
const NLMSGHDR_LEN: usize = 16;
const IFINFOMSG_LEN: usize = 16;
/// Our request's sequence number, to recognise its answer.
const SEQ: u32 = 1;

/// The request: a netlink header and an `ifinfomsg` setting `IFF_UP` (in
/// `flags`, and only that bit in `change`, so nothing else is touched) on
/// interface 1. No attributes.
fn request() -> Vec<u8> {
    let len = (NLMSGHDR_LEN + IFINFOMSG_LEN) as u32;
    let mut m = Vec::with_capacity(len as usize);
    // struct nlmsghdr
    m.extend_from_slice(&len.to_ne_bytes());
    m.extend_from_slice(&RTM_NEWLINK.to_ne_bytes());
    m.extend_from_slice(&FLAGS_REQUEST_ACK.to_ne_bytes());
    m.extend_from_slice(&SEQ.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes()); // pid: the kernel fills in ours
    // struct ifinfomsg
    m.push(libc::AF_UNSPEC as u8); // family
    m.push(0); // padding
    m.extend_from_slice(&0u16.to_ne_bytes()); // type (ARPHRD_*): unchanged
    m.extend_from_slice(&LOOPBACK_INDEX.to_ne_bytes());
    m.extend_from_slice(&IFF_UP.to_ne_bytes()); // flags
    m.extend_from_slice(&IFF_UP.to_ne_bytes()); // change: only IFF_UP
    m
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

/// Read the kernel's answer to our request out of one datagram: `Ok` for
/// an acknowledgement (error 0), the errno it carries otherwise; messages
/// that are not the answer to [`SEQ`] are skipped.
fn parse_ack(mut b: &[u8]) -> io::Result<Option<()>> {
    let malformed = || io::Error::new(io::ErrorKind::InvalidData, "a malformed netlink answer");
    while b.len() >= NLMSGHDR_LEN {
        let len = u32_at(b, 0).ok_or_else(malformed)? as usize;
        let kind = u16_at(b, 4).ok_or_else(malformed)?;
        let seq = u32_at(b, 8).ok_or_else(malformed)?;
        if len < NLMSGHDR_LEN || len > b.len() {
            return Err(malformed());
        }
        if kind == NLMSG_ERROR && seq == SEQ {
            let error = u32_at(b, NLMSGHDR_LEN).ok_or_else(malformed)? as i32;
            return match error {
                0 => Ok(Some(())),
                e => Err(io::Error::from_raw_os_error(-e)),
            };
        }
        // Messages are padded to 4 bytes (NLMSG_ALIGN).
        let next = (len + 3) & !3;
        b = b.get(next.min(b.len())..).unwrap_or_default();
    }
    Ok(None)
}

/// Set `lo` up in the calling thread's network namespace (which must be a
/// new one: index 1 is `lo` only there). Needs `CAP_NET_ADMIN` over it.
pub(crate) fn loopback_up() -> io::Result<()> {
    // Protocol `None` is NETLINK_ROUTE.
    let fd = rustix::net::socket_with(
        AddressFamily::NETLINK,
        SocketType::RAW,
        SocketFlags::CLOEXEC,
        None,
    )?;
    // Unconnected: a netlink datagram without an address goes to the
    // kernel (port 0).
    rustix::net::send(&fd, &request(), SendFlags::empty())?;
    let mut buf = vec![0u8; 8192];
    loop {
        let (n, _) = rustix::net::recv(&fd, &mut buf[..], RecvFlags::empty())?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the kernel closed the netlink socket without answering",
            ));
        }
        if let Some(()) = parse_ack(buf.get(..n).unwrap_or_default())? {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_request_has_the_kernel_layout() {
        let m = request();
        assert_eq!(m.len(), 32);
        assert_eq!(u32_at(&m, 0), Some(32));
        assert_eq!(u16_at(&m, 4), Some(16));
        assert_eq!(u16_at(&m, 6), Some(5));
        assert_eq!(u32_at(&m, 20), Some(1), "ifindex");
        assert_eq!(u32_at(&m, 24), Some(1), "flags");
        assert_eq!(u32_at(&m, 28), Some(1), "change");
    }

    fn answer(seq: u32, error: i32) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&36u32.to_ne_bytes());
        m.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
        m.extend_from_slice(&0u16.to_ne_bytes());
        m.extend_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(&error.to_ne_bytes());
        m.extend_from_slice(&[0; 16]);
        m
    }

    #[test]
    fn answers_are_read() {
        assert!(parse_ack(&answer(SEQ, 0)).unwrap().is_some());
        let e = parse_ack(&answer(SEQ, -libc::EPERM)).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EPERM));
        // Someone else's answer, then ours.
        let mut two = answer(SEQ + 1, -libc::EINVAL);
        two.extend(answer(SEQ, 0));
        assert!(parse_ack(&two).unwrap().is_some());
        assert!(parse_ack(&answer(SEQ + 1, 0)).unwrap().is_none());
        let mut short = answer(SEQ, 0);
        short[0] = 200;
        assert!(parse_ack(&short).is_err());
    }

    /// In a thread of its own in a new network namespace (a namespace is
    /// per thread; this one ends with the thread): before, a listener on
    /// 127.0.0.1 cannot be reached; after, it answers.
    #[test]
    fn loopback_comes_up_in_a_new_namespace() {
        std::thread::spawn(|| {
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let e = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::ENETUNREACH), "{e}");
            loopback_up().unwrap();
            std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
            if std::path::Path::new("/proc/net/if_inet6").exists() {
                std::net::TcpListener::bind("[::1]:0").unwrap();
            }
            // Idempotent: up again is fine.
            loopback_up().unwrap();
        })
        .join()
        .unwrap();
    }
}
