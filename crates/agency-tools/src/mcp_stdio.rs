//! Extra stdio MCP servers, run by the daemon: one
//! process per agent and server, outside the agent's sandbox, in a
//! confinement of its own, reached only through `/mcp-proxy/NAME`.
//!
//! Why not inside the agent's sandbox, as its child: a secret given to a
//! process the agent can reach is the agent's. Same sandbox and user, the
//! agent read the server's secrets from `/proc/<server>/environ`, wrote
//! `tools/call` straight into `/proc/<server>/fd/0` past every check, and
//! the server read the agent's token from its launcher's environment. So
//! the daemon starts the server itself, never as a descendant of the
//! agent's processes: `agency sandbox-exec` under a policy of its own
//! (`confine.rs`: its own cgroup, read-write only beneath its own
//! directory `run/mcp-<id>/`, a network namespace with no way out but the
//! egress proxy, and that only when its manifest declares `egress`, with a
//! key bound to the agent and server). Its environment is the daemon's
//! [`INHERITED_ENV`] and its own `env` (secrets filled in): no token of the
//! agent, nothing else of the daemon's.
//!
//! The agent's launcher (`agency mcp-launch NAME`) bridges its stdio to
//! the proxy, which guards every message (`mcp_guard.rs`) and hands it
//! here. A request's id is replaced by one of the server's own and put
//! back on the answer, so the server can neither confuse two agents'
//! requests nor answer one it was not sent. What the server sends
//! unasked is not relayed: a request of its own (sampling, roots) is
//! answered with an error, a notification dropped. The server ends with
//! its agent (`forget_agent`), or with the daemon.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agency_config::mcp_servers::McpServers;
use agency_config::secrets::{ExposeSecret, SecretString};
use agency_core::{AgentId, Principal};
use agency_mcp::AgentIdentity;
use agency_sandbox::AgentCgroup;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::oneshot;

use agency_egress::EgressKeys;
use agency_supervisor::confine::{Confiner, Place};
use agency_supervisor::runtime::{DEFAULT_PATH, INHERITED_ENV};

/// The longest line a server may send (one JSON-RPC message).
const MAX_LINE: usize = 32 << 20;
/// How long a request waits for its answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(600);
/// How long a server has to exit after its stdin closes.
const GRACE: Duration = Duration::from_secs(2);
/// Loopback never goes through the proxy (there is nothing to reach there).
const NO_PROXY: &str = "127.0.0.1,localhost,::1";
/// How much of a server's stderr reaches the daemon's log.
const MAX_LOG: usize = 64 << 10;

/// What the daemon runs for one server: its command with secrets filled in
/// (exposed only when passed to the process; `Debug` shows no value).
#[derive(Clone, Debug)]
pub struct StdioSpec {
    pub command: String,
    pub args: Vec<String>,
    pub env: std::collections::BTreeMap<String, SecretString>,
    /// The manifest declares `egress`: the server gets the egress proxy.
    pub egress: bool,
}

/// Why a message to a stdio server was not delivered or not answered;
/// each names the server. The agent reads it as the request's error.
/// Causes are in the message, not `#[source]`s: printed once.
#[derive(Debug, thiserror::Error)]
pub enum StdioError {
    #[error("failed to start MCP server {name}: {why}")]
    Start { name: String, why: StartFailure },
    #[error("failed to write to MCP server {name}: it was stopped")]
    Stopped { name: String },
    #[error("failed to write to MCP server {name}: {cause} (the server exited?)")]
    Write { name: String, cause: std::io::Error },
    #[error("failed to write to MCP server {name}: it read nothing for {} s", REQUEST_TIMEOUT.as_secs())]
    WriteTimeout { name: String },
    #[error(
        "failed to get an answer from MCP server {name}: the server exited; the daemon's log has its last output"
    )]
    Exited { name: String },
    #[error("failed to get an answer from MCP server {name} within {} s", REQUEST_TIMEOUT.as_secs())]
    AnswerTimeout { name: String },
}

/// The step of starting a server that failed.
#[derive(Debug, thiserror::Error)]
pub enum StartFailure {
    #[error("failed to create {}: {cause}", path.display())]
    CreateDir {
        path: PathBuf,
        cause: std::io::Error,
    },
    /// The blocking task that confines it ended without an answer.
    #[error("{0}")]
    Task(tokio::task::JoinError),
    #[error("{0}")]
    Confine(agency_supervisor::confine::ConfineError),
    #[error("failed to run {command}: {cause}")]
    Run {
        command: String,
        cause: std::io::Error,
    },
    #[error("its pipes could not be opened")]
    Pipes,
}

/// A line the server wrote that is not relayed.
#[derive(Debug, thiserror::Error)]
enum LineError {
    #[error("{0}")]
    Read(std::io::Error),
    #[error("a message over {MAX_LINE} bytes")]
    TooLong,
}

/// The daemon's stdio servers, by agent and server name.
pub struct StdioServers {
    confiner: Arc<Confiner>,
    /// `<home>/run`: each server's directory is made there.
    runs: PathBuf,
    egress_proxy: Option<SocketAddr>,
    keys: Arc<EgressKeys>,
    /// The declared servers, whose secret values are kept out of the log
    /// of a server's stderr (borrowed from there, not copied).
    servers: Arc<McpServers>,
    running: tokio::sync::Mutex<HashMap<(AgentId, String), Arc<Server>>>,
}

impl std::fmt::Debug for StdioServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StdioServers")
            .field("runs", &self.runs)
            .finish_non_exhaustive()
    }
}

/// One running server.
struct Server {
    name: String,
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    /// Requests sent and not yet answered, by the id the server was given.
    pending: Mutex<HashMap<u64, oneshot::Sender<Value>>>,
    next_id: AtomicU64,
    child: tokio::sync::Mutex<Child>,
    cgroup: Option<Arc<AgentCgroup>>,
    dir: PathBuf,
}

impl StdioServers {
    pub fn new(
        confiner: Arc<Confiner>,
        runs: PathBuf,
        egress_proxy: Option<SocketAddr>,
        keys: Arc<EgressKeys>,
        servers: Arc<McpServers>,
    ) -> StdioServers {
        StdioServers {
            confiner,
            runs,
            egress_proxy,
            keys,
            servers,
            running: tokio::sync::Mutex::default(),
        }
    }

    /// Send `msg` (checked by the guard already) to `caller`'s server
    /// `name`, starting it if it is not running. A request's answer is
    /// returned; a notification or response gets `None`.
    pub async fn send(
        &self,
        caller: &AgentIdentity,
        name: &str,
        spec: &StdioSpec,
        mut msg: Value,
    ) -> Result<Option<Value>, StdioError> {
        // A new session (a launcher started again) gets a new server: an
        // MCP server takes one `initialize` in its life.
        if msg.get("method").and_then(Value::as_str) == Some("initialize") {
            self.drop_server(caller.agent, name).await;
        }
        let server = self.server(caller, name, spec).await?;
        let is_request = msg.get("method").is_some() && msg.get("id").is_some();
        if !is_request {
            if msg.get("method").is_none() {
                // A response to a request the server never made through
                // us (its requests are not relayed): nothing to deliver.
                return Ok(None);
            }
            if let Err(e) = server.write(&msg).await {
                self.drop_server(caller.agent, name).await;
                return Err(e);
            }
            return Ok(None);
        }
        let theirs = msg.get("id").cloned().unwrap_or(Value::Null);
        let ours = server.next_id.fetch_add(1, Ordering::Relaxed);
        msg["id"] = json!(ours);
        let (tx, rx) = oneshot::channel();
        server.pending().insert(ours, tx);
        if let Err(e) = server.write(&msg).await {
            // A server that cannot be written to is gone: the next
            // message starts a new one.
            server.pending().remove(&ours);
            self.drop_server(caller.agent, name).await;
            return Err(e);
        }
        let answer = match tokio::time::timeout(REQUEST_TIMEOUT, rx).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => {
                // The reader dropped the sender: the server's output ended.
                self.drop_server(caller.agent, name).await;
                return Err(StdioError::Exited {
                    name: name.to_owned(),
                });
            }
            Err(_) => {
                server.pending().remove(&ours);
                return Err(StdioError::AnswerTimeout {
                    name: name.to_owned(),
                });
            }
        };
        let mut answer = answer;
        answer["id"] = theirs;
        Ok(Some(answer))
    }

    /// The agent ended: its servers stop.
    pub async fn forget_agent(&self, agent: AgentId) {
        let gone: Vec<Arc<Server>> = {
            let mut running = self.running.lock().await;
            let keys: Vec<_> = running
                .keys()
                .filter(|(a, _)| *a == agent)
                .cloned()
                .collect();
            keys.iter().filter_map(|k| running.remove(k)).collect()
        };
        for s in gone {
            s.stop().await;
        }
    }

    /// The daemon stops: every server stops.
    pub async fn stop_all(&self) {
        let gone: Vec<Arc<Server>> = self.running.lock().await.drain().map(|(_, s)| s).collect();
        for s in gone {
            s.stop().await;
        }
    }

    async fn drop_server(&self, agent: AgentId, name: &str) {
        let gone = self.running.lock().await.remove(&(agent, name.to_owned()));
        if let Some(s) = gone {
            s.stop().await;
        }
    }

    async fn server(
        &self,
        caller: &AgentIdentity,
        name: &str,
        spec: &StdioSpec,
    ) -> Result<Arc<Server>, StdioError> {
        let key = (caller.agent, name.to_owned());
        let mut running = self.running.lock().await;
        if let Some(s) = running.get(&key) {
            return Ok(s.clone());
        }
        let server = self.start(caller, name, spec).await?;
        running.insert(key, server.clone());
        Ok(server)
    }

    async fn start(
        &self,
        caller: &AgentIdentity,
        name: &str,
        spec: &StdioSpec,
    ) -> Result<Arc<Server>, StdioError> {
        let fail = |why: StartFailure| StdioError::Start {
            name: name.to_owned(),
            why,
        };
        let id = uuid::Uuid::new_v4().simple().to_string();
        let dir = self.runs.join(format!("mcp-{id}"));
        let (work, run) = (dir.join("work"), dir.join("run"));
        let (home, tmp) = (run.join("home"), run.join("tmp"));
        for d in [&dir, &work, &run, &home, &tmp] {
            crate::org_tools::command::create_private(d).map_err(|cause| {
                fail(StartFailure::CreateDir {
                    path: d.clone(),
                    cause,
                })
            })?;
        }
        let mut cmd = Command::new(&spec.command);
        cmd.args(&spec.args).env_clear().current_dir(&work);
        for k in INHERITED_ENV {
            if let Some(v) = std::env::var_os(k) {
                cmd.env(k, v);
            }
        }
        if std::env::var_os("PATH").is_none() {
            cmd.env("PATH", DEFAULT_PATH);
        }
        cmd.env("HOME", &home).env("TMPDIR", &tmp);
        cmd.envs(spec.env.iter().map(|(k, v)| (k, v.expose_secret())));
        let mut ports = Vec::new();
        if let (true, Some(addr)) = (spec.egress, self.egress_proxy) {
            // The server's own key, bound to this agent and server: the
            // manifest's hosts, and nothing the agent's handler holds.
            // Set last, so no variable of its `env` replaces the one way
            // out its sandbox has.
            let key = self
                .keys
                .issue_server(Principal::agent(caller.handler, caller.agent), name);
            let proxy = format!("http://{}:{key}@{addr}", agency_egress::MCP_PROXY_USER);
            for k in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
                cmd.env(k, &proxy);
            }
            cmd.env("NO_PROXY", NO_PROXY).env("no_proxy", NO_PROXY);
            ports.push(addr.port());
        }
        let confined = {
            let confiner = self.confiner.clone();
            let (d, cgroup) = (dir.clone(), format!("mcp-{id}"));
            tokio::task::spawn_blocking(move || {
                confiner.confine_in(
                    cmd,
                    &Place {
                        cgroup: &cgroup,
                        spawn_dir: &d,
                        writable: &["work", "run"],
                        programs: &[],
                        readable: &[],
                        connect_ports: &ports,
                    },
                )
            })
            .await
            .map_err(|e| fail(StartFailure::Task(e)))?
        };
        let (mut cmd, cgroup) = match confined {
            Ok(c) => c,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(fail(StartFailure::Confine(e)));
            }
        };
        cmd.process_group(0)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                if let Some(cg) = cgroup {
                    let _ = cg.remove();
                }
                let _ = std::fs::remove_dir_all(&dir);
                return Err(fail(StartFailure::Run {
                    command: spec.command.clone(),
                    cause: e,
                }));
            }
        };
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(fail(StartFailure::Pipes));
        };
        let server = Arc::new(Server {
            name: name.to_owned(),
            stdin: tokio::sync::Mutex::new(Some(stdin)),
            pending: Mutex::default(),
            next_id: AtomicU64::new(1),
            child: tokio::sync::Mutex::new(child),
            cgroup: cgroup.map(Arc::new),
            dir,
        });
        tokio::spawn(read_answers(server.clone(), stdout));
        tokio::spawn(log_stderr(name.to_owned(), stderr, self.servers.clone()));
        tracing::info!(server = name, agent = %caller.agent, "started an MCP server for the agent");
        Ok(server)
    }
}

impl Server {
    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<u64, oneshot::Sender<Value>>> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    async fn write(&self, msg: &Value) -> Result<(), StdioError> {
        let mut line = msg.to_string();
        line.push('\n');
        let mut stdin = self.stdin.lock().await;
        let name = || self.name.clone();
        let Some(pipe) = stdin.as_mut() else {
            return Err(StdioError::Stopped { name: name() });
        };
        let written = async {
            pipe.write_all(line.as_bytes()).await?;
            pipe.flush().await
        };
        match tokio::time::timeout(REQUEST_TIMEOUT, written).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(cause)) => Err(StdioError::Write {
                name: name(),
                cause,
            }),
            Err(_) => Err(StdioError::WriteTimeout { name: name() }),
        }
    }

    /// Close its stdin, give it a grace period, then kill its group and
    /// its cgroup, and remove its directory.
    async fn stop(&self) {
        self.stdin.lock().await.take();
        let mut child = self.child.lock().await;
        if tokio::time::timeout(GRACE, child.wait()).await.is_err() {
            if let Some(pid) = child.id() {
                agency_sandbox::process_group::kill_group(pid);
            }
            let _ = child.kill().await;
        }
        if let Some(cg) = self.cgroup.clone() {
            agency_supervisor::confine::release(cg).await;
        }
        let dir = self.dir.clone();
        let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(dir)).await;
        tracing::info!(server = %self.name, "stopped an MCP server");
    }
}

/// Read the server's messages: answers go to their requests; a request of
/// the server's own is refused; anything else is dropped. When the output
/// ends, every waiting request learns it (its sender is dropped).
async fn read_answers(server: Arc<Server>, stdout: impl AsyncRead + Unpin) {
    let mut reader = BufReader::new(stdout);
    loop {
        let line = match read_line(&mut reader).await {
            Ok(Some(l)) => l,
            Ok(None) => break,
            Err(why) => {
                tracing::warn!(server = %server.name, %why, "dropped a message of an MCP server");
                continue;
            }
        };
        let Ok(msg) = serde_json::from_slice::<Value>(&line) else {
            tracing::debug!(server = %server.name, "an MCP server wrote a line that is not JSON");
            continue;
        };
        let method = msg.get("method").and_then(Value::as_str);
        match (method, msg.get("id")) {
            (None, Some(id)) => {
                let waiting = id.as_u64().and_then(|n| server.pending().remove(&n));
                match waiting {
                    Some(tx) => {
                        let _ = tx.send(msg);
                    }
                    None => {
                        tracing::debug!(server = %server.name, "an MCP server answered a request it was not sent")
                    }
                }
            }
            (Some(m), Some(id)) => {
                let refusal = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601,
                    "message": format!("Agency does not relay a server's own requests ({m}) to agents")}});
                let _ = server.write(&refusal).await;
            }
            _ => {}
        }
    }
    server.pending().clear();
}

/// One line of at most [`MAX_LINE`] bytes; a longer one is skipped whole
/// and reported. `None` at the end of output.
async fn read_line(
    reader: &mut BufReader<impl AsyncRead + Unpin>,
) -> Result<Option<Vec<u8>>, LineError> {
    let mut line = Vec::new();
    let mut too_long = false;
    loop {
        let buf = reader.fill_buf().await.map_err(LineError::Read)?;
        if buf.is_empty() {
            return Ok((!line.is_empty() && !too_long).then_some(line));
        }
        let (chunk, done) = match memchr::memchr(b'\n', buf) {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if !too_long && line.len() + chunk.len() <= MAX_LINE {
            line.extend_from_slice(chunk);
        } else {
            too_long = true;
            line.clear();
        }
        let used = done.unwrap_or(buf.len());
        reader.consume(used);
        if done.is_some() {
            if too_long {
                return Err(LineError::TooLong);
            }
            return Ok(Some(line));
        }
    }
}

/// The server's stderr, into the daemon's log (bounded, secrets removed):
/// the user's way to see why a server failed. The agent never sees it.
async fn log_stderr(name: String, stderr: impl AsyncRead + Unpin, servers: Arc<McpServers>) {
    let mut lines = BufReader::new(stderr).lines();
    let mut logged = 0usize;
    while let Ok(Some(mut line)) = lines.next_line().await {
        if logged >= MAX_LOG {
            continue;
        }
        logged += line.len();
        for secret in servers
            .secret_values()
            .map(ExposeSecret::expose_secret)
            .filter(|s| !s.is_empty())
        {
            line = line.replace(secret, "[secret]");
        }
        tracing::info!(server = %name, "mcp server: {line}");
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_bounded_and_a_long_one_is_skipped() {
        let long = vec![b'x'; MAX_LINE + 10];
        let mut input = b"{\"a\":1}\n".to_vec();
        input.extend_from_slice(&long);
        input.extend_from_slice(b"\n{\"b\":2}\nlast");
        let mut r = BufReader::with_capacity(4096, &input[..]);
        assert_eq!(read_line(&mut r).await.unwrap().unwrap(), b"{\"a\":1}");
        assert!(read_line(&mut r).await.is_err());
        assert_eq!(read_line(&mut r).await.unwrap().unwrap(), b"{\"b\":2}");
        assert_eq!(read_line(&mut r).await.unwrap().unwrap(), b"last");
        assert_eq!(read_line(&mut r).await.unwrap(), None);
    }
}
