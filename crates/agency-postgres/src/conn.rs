//! One PostgreSQL connection driven from synchronous code.
//!
//! The store's callers are synchronous (the service runs a closure per
//! transaction) and may sit on a tokio worker thread. `tokio-postgres`
//! splits a connection in two: the client half queues requests, the
//! connection half speaks to the socket. Here the thread that waits for an
//! answer drives both itself ([`drive`]): it polls its request and the
//! connection until neither can move, then sleeps in `poll(2)` on the
//! socket. No runtime thread stands between a statement and the server
//! (one hop less per round trip, and no one thread that every connection
//! of the store queues behind), and no async runtime is entered, so it
//! works on any thread, inside an async runtime or not.

mod socket;

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use rustix::event::{PollFd, PollFlags};
use tokio_postgres::tls::NoTlsStream;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Config, Connection, NoTls, Row, Statement};

use socket::{Socket, Waitable};

/// A bound parameter list.
pub(crate) type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

/// How long a session may sit idle inside a transaction before the server
/// ends it (milliseconds): far longer than any pause between a closure's
/// statements, shorter than the default lease (15 s).
const IDLE_IN_TRANSACTION_MS: u64 = 10_000;

/// Statements cached per connection before the cache is emptied: room for
/// every statement the store issues (a few dozen fixed ones plus the
/// variants of the few built from filters).
const STATEMENT_CACHE: usize = 512;

/// A small runtime for a task that lives on its own (the event
/// listener). Dropped without waiting (it may be dropped on an async
/// thread, where blocking is not allowed): its tasks end with it.
pub(crate) struct Runtime(Option<tokio::runtime::Runtime>);

impl Runtime {
    pub(crate) fn new() -> std::io::Result<Runtime> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("agency-postgres")
            .enable_all()
            .build()?;
        Ok(Runtime(Some(rt)))
    }

    pub(crate) fn handle(&self) -> Option<&tokio::runtime::Handle> {
        self.0.as_ref().map(|rt| rt.handle())
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Runtime")
    }
}

/// One connection and its prepared statements.
pub(crate) struct Conn {
    client: Client,
    io: Io,
    statements: HashMap<String, Statement>,
}

/// The connection half and what its driver waits on.
struct Io {
    /// `None` once it ended (the server closed the session, the socket
    /// failed): dropping it fails every request still waiting.
    connection: Option<Pin<Box<Connection<Socket, NoTlsStream>>>>,
    socket: Waitable,
    woken: Arc<Woken>,
}

/// Set when a future the driver polls can move again without the socket
/// (a channel between the halves got a message or room).
#[derive(Default)]
struct Woken(AtomicBool);

impl Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }
}

/// Run `fut` to its end on this thread, moving `connection` (if any) along
/// with it: poll both until neither can move, then sleep until the socket
/// is readable (or writable, when a write had to wait).
fn drive<F: Future>(
    connection: &mut Option<Pin<Box<Connection<Socket, NoTlsStream>>>>,
    socket: &Waitable,
    woken: &Arc<Woken>,
    fut: F,
) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let waker = Waker::from(woken.clone());
    let mut cx = Context::from_waker(&waker);
    loop {
        woken.0.store(false, Ordering::Release);
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
        if let Some(c) = connection.as_mut()
            && let Poll::Ready(ended) = c.as_mut().poll(&mut cx)
        {
            if let Err(e) = ended {
                tracing::debug!(error = %e, "a store connection ended");
            }
            *connection = None;
            continue;
        }
        if woken.0.load(Ordering::Acquire) {
            continue;
        }
        wait(socket);
    }
}

/// Sleep until the socket can be read (or written, if a write waited).
fn wait(socket: &Waitable) {
    let mut flags = PollFlags::IN;
    if socket.take_write_blocked() {
        flags |= PollFlags::OUT;
    }
    let mut fds = [PollFd::from_borrowed_fd(socket.fd(), flags)];
    // An interrupted wait is a wait to retry; any other failure (none is
    // expected for one valid descriptor) is left to the next read, which
    // reports it.
    let _ = rustix::event::poll(&mut fds, None);
}

impl fmt::Debug for Conn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Conn")
            .field("statements", &self.statements.len())
            .finish_non_exhaustive()
    }
}

/// Why a connection could not be opened.
#[derive(Debug)]
pub(crate) enum ConnectError {
    Postgres(tokio_postgres::Error),
    /// No socket to the server could be opened.
    Socket(std::io::Error),
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectError::Postgres(e) => write!(f, "{e}"),
            ConnectError::Socket(e) => write!(f, "failed to reach the server: {e}"),
        }
    }
}

impl Conn {
    /// Connect to the server `config` names.
    pub(crate) fn connect(config: &Config) -> Result<Conn, ConnectError> {
        let (socket, waitable) = socket::open(config).map_err(ConnectError::Socket)?;
        let woken = Arc::new(Woken::default());
        let (client, connection) = drive(
            &mut None,
            &waitable,
            &woken,
            config.connect_raw(socket, NoTls),
        )
        .map_err(ConnectError::Postgres)?;
        let mut conn = Conn {
            client,
            io: Io {
                connection: Some(Box::pin(connection)),
                socket: waitable,
                woken,
            },
            statements: HashMap::new(),
        };
        // A daemon stopped (SIGSTOP, a stalled VM) inside a write
        // transaction would hold the writers' lock of every daemon on the
        // database for as long as it stays stopped: the server ends such a
        // session instead, and the others go on.
        conn.batch(&format!(
            "SET idle_in_transaction_session_timeout = {IDLE_IN_TRANSACTION_MS}"
        ))
        .map_err(ConnectError::Postgres)?;
        Ok(conn)
    }

    /// Run `fut` (a request of this connection's client) to its end.
    fn run<'a, F: Future + 'a>(&'a mut self, f: impl FnOnce(&'a Client) -> F) -> F::Output {
        let Io {
            connection,
            socket,
            woken,
        } = &mut self.io;
        drive(connection, socket, woken, f(&self.client))
    }

    /// Whether the server side is gone (a broken connection is not reused).
    pub(crate) fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    /// Read what the server sent while the connection sat idle, without
    /// waiting: a session the server ended is then seen as closed before
    /// it is handed out again.
    pub(crate) fn refresh(&mut self) {
        let Io {
            connection, woken, ..
        } = &mut self.io;
        if let Some(c) = connection.as_mut() {
            let waker = Waker::from(woken.clone());
            if c.as_mut().poll(&mut Context::from_waker(&waker)).is_ready() {
                *connection = None;
            }
        }
    }

    /// The prepared statement for `sql`, prepared once per connection.
    pub(crate) fn prepare(&mut self, sql: &str) -> Result<Statement, tokio_postgres::Error> {
        if let Some(st) = self.statements.get(sql) {
            return Ok(st.clone());
        }
        let st = self.run(|c| c.prepare(sql))?;
        if self.statements.len() >= STATEMENT_CACHE {
            self.statements.clear();
        }
        self.statements.insert(sql.to_owned(), st.clone());
        Ok(st)
    }

    /// Run a statement; the number of rows it changed.
    pub(crate) fn execute(
        &mut self,
        sql: &str,
        params: Params,
    ) -> Result<u64, tokio_postgres::Error> {
        let st = self.prepare(sql)?;
        self.run(|c| c.execute(&st, params))
    }

    /// Run a query; every row.
    pub(crate) fn query(
        &mut self,
        sql: &str,
        params: Params,
    ) -> Result<Vec<Row>, tokio_postgres::Error> {
        let st = self.prepare(sql)?;
        self.run(|c| c.query(&st, params))
    }

    /// Run a query; its first row, if any.
    pub(crate) fn query_opt(
        &mut self,
        sql: &str,
        params: Params,
    ) -> Result<Option<Row>, tokio_postgres::Error> {
        let st = self.prepare(sql)?;
        // `query_opt` of the client refuses more than one row; the store's
        // callers ask for the first.
        let rows = self.run(|c| c.query(&st, params))?;
        Ok(rows.into_iter().next())
    }

    /// Run one statement in a transaction of its own, `begin` … COMMIT,
    /// pipelined: the three go out together and cost one round trip. A
    /// failed statement leaves the transaction aborted, which the COMMIT
    /// then rolls back.
    pub(crate) fn execute_alone(
        &mut self,
        begin: &str,
        sql: &str,
        params: Params,
    ) -> Result<u64, tokio_postgres::Error> {
        let st = self.prepare(sql)?;
        let (began, done, committed) = self.run(|c| {
            futures_util::future::join3(
                c.batch_execute(begin),
                c.execute(&st, params),
                c.batch_execute("COMMIT"),
            )
        });
        began?;
        let n = done?;
        committed?;
        Ok(n)
    }

    /// Run statements without parameters in one round trip (the simple
    /// query protocol): BEGIN with its options, COMMIT, a migration.
    pub(crate) fn batch(&mut self, sql: &str) -> Result<(), tokio_postgres::Error> {
        self.run(|c| c.batch_execute(sql))
    }
}
