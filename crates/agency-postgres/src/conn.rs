//! One PostgreSQL connection driven from synchronous code.
//!
//! The store's callers are synchronous (the service runs a closure per
//! transaction) and may sit on a tokio worker thread. `tokio-postgres`
//! splits a connection in two: the socket half runs as a task on a small
//! runtime the store owns, and the client half only talks to it through
//! channels, so its futures can be awaited by a plain executor
//! (`futures_executor::block_on`) on any thread, inside an async runtime or
//! not, without nesting runtimes.

use std::collections::HashMap;
use std::fmt;

use futures_executor::block_on;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Config, NoTls, Row, Statement};

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

/// The runtime the connections' socket halves run on. Dropped without
/// waiting (it may be dropped on an async thread, where blocking is not
/// allowed): its tasks end with their clients.
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
    statements: HashMap<String, Statement>,
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
    /// The runtime is gone or its task died.
    Runtime(String),
}

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectError::Postgres(e) => write!(f, "{e}"),
            ConnectError::Runtime(e) => write!(f, "the connection runtime failed: {e}"),
        }
    }
}

impl Conn {
    /// Connect, running the socket half on `rt`.
    pub(crate) fn connect(rt: &Runtime, config: &Config) -> Result<Conn, ConnectError> {
        let handle = rt
            .handle()
            .ok_or_else(|| ConnectError::Runtime("shut down".into()))?;
        let config = config.clone();
        let task = handle.spawn(async move {
            let (client, connection) = config.connect(NoTls).await?;
            // Its error, if any, reaches the client as a closed connection.
            tokio::spawn(async move {
                let _ = connection.await;
            });
            // A daemon stopped (SIGSTOP, a stalled VM) inside a write
            // transaction would hold the writers' lock of every daemon on
            // the database for as long as it stays stopped: the server ends
            // such a session instead, and the others go on.
            client
                .batch_execute(&format!(
                    "SET idle_in_transaction_session_timeout = {IDLE_IN_TRANSACTION_MS}"
                ))
                .await?;
            Ok::<Client, tokio_postgres::Error>(client)
        });
        let client = block_on(task)
            .map_err(|e| ConnectError::Runtime(e.to_string()))?
            .map_err(ConnectError::Postgres)?;
        Ok(Conn {
            client,
            statements: HashMap::new(),
        })
    }

    /// Whether the server side is gone (a broken connection is not reused).
    pub(crate) fn is_closed(&self) -> bool {
        self.client.is_closed()
    }

    /// The prepared statement for `sql`, prepared once per connection.
    pub(crate) fn prepare(&mut self, sql: &str) -> Result<Statement, tokio_postgres::Error> {
        if let Some(st) = self.statements.get(sql) {
            return Ok(st.clone());
        }
        let st = block_on(self.client.prepare(sql))?;
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
        block_on(self.client.execute(&st, params))
    }

    /// Run a query; every row.
    pub(crate) fn query(
        &mut self,
        sql: &str,
        params: Params,
    ) -> Result<Vec<Row>, tokio_postgres::Error> {
        let st = self.prepare(sql)?;
        block_on(self.client.query(&st, params))
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
        let rows = block_on(self.client.query(&st, params))?;
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
        let (began, done, committed) = block_on(futures_util::future::join3(
            self.client.batch_execute(begin),
            self.client.execute(&st, params),
            self.client.batch_execute("COMMIT"),
        ));
        began?;
        let n = done?;
        committed?;
        Ok(n)
    }

    /// Run statements without parameters in one round trip (the simple
    /// query protocol): BEGIN with its options, COMMIT, a migration.
    pub(crate) fn batch(&mut self, sql: &str) -> Result<(), tokio_postgres::Error> {
        block_on(self.client.batch_execute(sql))
    }
}
