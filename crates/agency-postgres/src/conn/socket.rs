//! The socket a store connection speaks through, driven by the thread
//! that waits for the answer (`super::drive`): a non-blocking socket whose
//! reads and writes say "not yet" instead of blocking, and remember when a
//! write could not go out, so the driver knows to wait until it can.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::Config;
use tokio_postgres::config::Host;

/// A connected socket to the server.
#[derive(Debug)]
pub(crate) enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

/// The socket the client library owns, and what its driver keeps: a
/// second handle to the same socket (to wait on) and whether a write had
/// to wait.
#[derive(Debug)]
pub(crate) struct Socket {
    stream: Stream,
    write_blocked: Arc<AtomicBool>,
}

/// What the driver keeps of a [`Socket`].
#[derive(Debug)]
pub(crate) struct Waitable {
    fd: OwnedFd,
    write_blocked: Arc<AtomicBool>,
}

impl Waitable {
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Whether a write waits for room since the last call (and forget it).
    pub(crate) fn take_write_blocked(&self) -> bool {
        self.write_blocked.swap(false, Ordering::Relaxed)
    }
}

/// Open a socket to the first of the URL's hosts that answers, made
/// non-blocking.
pub(crate) fn open(config: &Config) -> io::Result<(Socket, Waitable)> {
    let hosts = config.get_hosts();
    let ports = config.get_ports();
    let timeout = config.get_connect_timeout().copied();
    let mut last = None;
    let default = [Host::Tcp("localhost".to_owned())];
    let hosts = if hosts.is_empty() {
        &default[..]
    } else {
        hosts
    };
    for (i, host) in hosts.iter().enumerate() {
        // One port for all hosts, or one each.
        let port = ports
            .get(i)
            .or_else(|| ports.first())
            .copied()
            .unwrap_or(5432);
        match connect(host, port, timeout) {
            Ok(s) => return wrap(s),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::other("no host to connect to")))
}

fn connect(host: &Host, port: u16, timeout: Option<Duration>) -> io::Result<Stream> {
    match host {
        Host::Tcp(name) => {
            let mut last = None;
            for addr in std::net::ToSocketAddrs::to_socket_addrs(&(name.as_str(), port))? {
                let tried = match timeout {
                    Some(t) => TcpStream::connect_timeout(&addr, t),
                    None => TcpStream::connect(addr),
                };
                match tried {
                    Ok(s) => {
                        // Statements are small and answered at once: no
                        // waiting to fill a packet.
                        s.set_nodelay(true)?;
                        return Ok(Stream::Tcp(s));
                    }
                    Err(e) => last = Some(e),
                }
            }
            Err(last.unwrap_or_else(|| io::Error::other(format!("{name} has no address"))))
        }
        Host::Unix(dir) => Ok(Stream::Unix(UnixStream::connect(
            dir.join(format!(".s.PGSQL.{port}")),
        )?)),
    }
}

fn wrap(stream: Stream) -> io::Result<(Socket, Waitable)> {
    let fd = match &stream {
        Stream::Tcp(s) => {
            s.set_nonblocking(true)?;
            OwnedFd::from(s.try_clone()?)
        }
        Stream::Unix(s) => {
            s.set_nonblocking(true)?;
            OwnedFd::from(s.try_clone()?)
        }
    };
    let write_blocked = Arc::new(AtomicBool::new(false));
    Ok((
        Socket {
            stream,
            write_blocked: write_blocked.clone(),
        },
        Waitable { fd, write_blocked },
    ))
}

impl Socket {
    fn read_some(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match &mut self.stream {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
        }
    }

    fn write_some(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.stream {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
        }
    }
}

// `Pending` here registers no waker: the only task that polls a socket is
// `super::drive`, which waits on the socket itself before polling again.
impl AsyncRead for Socket {
    fn poll_read(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            match this.read_some(buf.initialize_unfilled()) {
                Ok(n) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Poll::Pending,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        loop {
            match this.write_some(buf) {
                Ok(n) => return Poll::Ready(Ok(n)),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    this.write_blocked.store(true, Ordering::Relaxed);
                    return Poll::Pending;
                }
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Writes go straight to the kernel: nothing is buffered here.
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let done = match &self.stream {
            Stream::Tcp(s) => s.shutdown(std::net::Shutdown::Write),
            Stream::Unix(s) => s.shutdown(std::net::Shutdown::Write),
        };
        Poll::Ready(match done {
            Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(()),
            other => other,
        })
    }
}
