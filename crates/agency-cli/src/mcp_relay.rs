//! The launcher's relay for a stdio MCP server (issue 11 item 5): `agency
//! mcp-launch NAME` runs the server as its child and stands between it and
//! the agent's MCP client, relaying newline-delimited JSON-RPC both ways.
//!
//! It decides nothing. The daemon's guard (`/mcp-guard/NAME/…`, with the
//! agent's token and the guard session `/launch` gave this launcher) is
//! asked about each `tools/list` answer (pinned and filtered), each
//! `tools/call` before it reaches the server (a refusal becomes the call's
//! tool error result, and the server never sees the call) and each call's
//! result (checked against the manifest's output schema). When the daemon
//! cannot be asked, nothing passes: the call is refused, the listing and
//! the result are replaced by errors.
//!
//! The server runs in its own process group, from an empty environment
//! plus the variables every agent process may have and its own `env`
//! (and, when its manifest declares `egress`, the proxy variables for the
//! daemon's egress proxy with the server's own key: its manifest's hosts
//! are then its one way out; otherwise it has none); it
//! is stopped (SIGTERM to its group, SIGKILL after a grace) when the agent
//! closes stdin, when the launcher is told to stop, or when the server's
//! output ends. The launcher runs inside the agent's sandbox, and so does
//! the server.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agency_daemon::mcp_guard::{
    CallAnswer, CallReport, ResultAnswer, ResultReport, SESSION_HEADER, ToolsAnswer, ToolsReport,
    refusal_result,
};
use agency_daemon::runtime::INHERITED_ENV;
use anyhow::{Context, Result, anyhow};
use nix::sys::signal::{SigSet, Signal, killpg};
use nix::unistd::Pid;
use reqwest::Url;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::client::{self, http_client};

/// The launcher's exit code once a signal told it to stop (0 otherwise).
static EXIT: AtomicI32 = AtomicI32::new(0);

/// How long the server gets to exit after its stdin closes or SIGTERM.
const GRACE: Duration = Duration::from_secs(2);

/// How the launcher reaches the daemon's guard.
pub struct GuardLink {
    pub http: reqwest::blocking::Client,
    /// The daemon's agent listener (`AGENCY_MCP_URL`'s origin).
    pub base: Url,
    pub token: String,
    pub session: String,
    pub server: String,
}

impl GuardLink {
    fn post<T: Serialize, A: DeserializeOwned>(&self, what: &str, body: &T) -> Result<A> {
        let url = self
            .base
            .join(&format!("/mcp-guard/{}/{what}", self.server))
            .context("failed to make the guard's URL")?;
        let resp = self
            .http
            .post(url.clone())
            .bearer_auth(&self.token)
            .header(SESSION_HEADER, &self.session)
            .json(body)
            .send()
            .with_context(|| format!("failed to reach the Agency daemon at {url}"))?;
        let status = resp.status();
        let text = resp
            .text()
            .with_context(|| format!("failed to read the daemon's answer from {url}"))?;
        if !status.is_success() {
            return Err(anyhow!("{}", client::api_error(status.as_u16(), &text)));
        }
        serde_json::from_str(&text).with_context(|| format!("failed to parse the answer of {url}"))
    }
}

/// What a request forwarded to the server is waiting for.
enum Pending {
    List,
    Call(String),
}

type PendingMap = Arc<Mutex<HashMap<String, Pending>>>;

fn lock(p: &PendingMap) -> std::sync::MutexGuard<'_, HashMap<String, Pending>> {
    p.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write_message(msg: &Value) -> Result<()> {
    crate::commands::write_stdout(format!("{msg}\n").as_bytes())
}

fn error_response(id: &Value, code: i64, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

/// Block the signals that end the launcher, so that a thread of ours takes
/// them (and stops the server too). Must run before any thread starts —
/// the HTTP client's included — or that thread would take them and the
/// launcher die without stopping its server. A child's mask is reset by
/// std's spawn.
pub fn block_signals() -> Result<SigSet> {
    let mut signals = SigSet::empty();
    for s in [Signal::SIGTERM, Signal::SIGINT, Signal::SIGHUP] {
        signals.add(s);
    }
    signals
        .thread_block()
        .context("failed to take the launcher's signals")?;
    Ok(signals)
}

/// What to run: the server's command line and environment from its launch
/// specification, and the egress proxy URL `/launch` gave (if any).
pub struct Server<'a> {
    pub command: &'a str,
    pub args: &'a [String],
    pub env: &'a BTreeMap<String, String>,
    pub egress_proxy: Option<&'a str>,
}

/// Hosts a server reaches without the proxy: loopback, as for agents (in
/// the sandbox only the daemon's own listeners are there).
const NO_PROXY: &str = "127.0.0.1,localhost,::1";

/// Run server `name` behind the guard; `signals` from [`block_signals`].
pub fn run(name: &str, server: &Server<'_>, guard: GuardLink, signals: SigSet) -> Result<ExitCode> {
    let Server {
        command,
        args,
        env,
        egress_proxy,
    } = *server;
    let mut cmd = Command::new(command);
    cmd.env_clear();
    for k in INHERITED_ENV.iter().chain(&["HOME", "TMPDIR"]) {
        if let Some(v) = std::env::var_os(k) {
            cmd.env(k, v);
        }
    }
    cmd.args(args).envs(env);
    // Set last: the server's way out is Agency's proxy or none.
    if let Some(url) = egress_proxy {
        for k in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
            cmd.env(k, url);
        }
        for k in ["NO_PROXY", "no_proxy"] {
            cmd.env(k, NO_PROXY);
        }
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd
        .spawn()
        .with_context(|| format!("failed to run MCP server {name} ({command})"))?;
    let group = Pid::from_raw(i32::try_from(child.id()).context("a process id out of range")?);
    let mut to_server = child.stdin.take().context("the server's stdin")?;
    let from_server = child.stdout.take().context("the server's stdout")?;
    let child = Arc::new(Mutex::new(child));

    {
        let child = child.clone();
        std::thread::spawn(move || {
            if let Ok(sig) = signals.wait() {
                // Set first: the reader thread, seeing the server's output
                // end, exits with it too.
                EXIT.store(128 + sig as i32, Ordering::SeqCst);
                stop(&child, group, false);
                std::process::exit(128 + sig as i32);
            }
        });
    }
    let pending: PendingMap = Arc::default();
    let guard = Arc::new(guard);
    let reader = {
        let (pending, guard, child) = (pending.clone(), guard.clone(), child.clone());
        let name = name.to_owned();
        std::thread::spawn(move || {
            if let Err(e) = from_server_loop(from_server, &pending, &guard) {
                eprintln!("agency mcp-launch {name}: {e:#}");
            }
            // The server's output ended: answer what waits, and end.
            for (id, _) in lock(&pending).drain() {
                let id: Value = serde_json::from_str(&id).unwrap_or(Value::Null);
                let _ = write_message(&error_response(
                    &id,
                    -32603,
                    &format!("failed to get an answer from MCP server {name}: it ended"),
                ));
            }
            stop(&child, group, false);
            std::process::exit(EXIT.load(Ordering::SeqCst));
        })
    };
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let line = line.context("failed to read stdin")?;
        if line.trim().is_empty() {
            continue;
        }
        if !from_agent(&line, &mut to_server, &pending, &guard)? {
            break;
        }
    }
    // The agent is done: close the server's stdin (a well-behaved server
    // exits), then make sure it does.
    drop(to_server);
    stop(&child, group, true);
    let _ = reader.join();
    Ok(ExitCode::SUCCESS)
}

/// Stop the server's process group: SIGTERM, a grace, SIGKILL. With
/// `polite` (its stdin was just closed), first give it the grace to exit
/// on its own, as MCP's stdio shutdown asks. Safe to call again (the group
/// is gone, or the child reaped).
fn stop(child: &Mutex<std::process::Child>, group: Pid, polite: bool) {
    let mut child = child
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let exited = |child: &mut std::process::Child| {
        let deadline = Instant::now() + GRACE;
        while Instant::now() < deadline {
            if matches!(child.try_wait(), Ok(Some(_))) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    };
    let done = matches!(child.try_wait(), Ok(Some(_))) || (polite && exited(&mut child));
    if !done {
        let _ = killpg(group, Signal::SIGTERM);
        exited(&mut child);
    }
    // Whatever is left in its group goes too.
    let _ = killpg(group, Signal::SIGKILL);
    let _ = child.wait();
}

/// One message from the agent. Returns false when the server's stdin is
/// gone (nothing more can be relayed).
fn from_agent(
    line: &str,
    to_server: &mut ChildStdin,
    pending: &PendingMap,
    guard: &GuardLink,
) -> Result<bool> {
    let msg: Value = match serde_json::from_str(line) {
        Ok(m) => m,
        Err(e) => {
            write_message(&error_response(
                &Value::Null,
                -32700,
                &format!("Parse error: {e}"),
            ))?;
            return Ok(true);
        }
    };
    if msg.is_array() {
        // Batches left MCP in 2025-06-18; refusing one keeps every call
        // going through the checks below.
        write_message(&error_response(
            &Value::Null,
            -32600,
            "failed to relay a JSON-RPC batch: Agency's MCP guard takes one message per line",
        ))?;
        return Ok(true);
    }
    let method = msg.get("method").and_then(Value::as_str);
    let id = msg.get("id").filter(|_| method.is_some()).cloned();
    match (method, id) {
        (Some("tools/call"), Some(id)) => {
            let params = msg.get("params").cloned().unwrap_or(Value::Null);
            let tool = params
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            let arguments = params.get("arguments").cloned().unwrap_or(json!({}));
            let answer: Result<CallAnswer> = guard.post(
                "call",
                &CallReport {
                    tool: tool.clone(),
                    arguments,
                },
            );
            let refusal = match answer {
                Ok(CallAnswer { allow: true, .. }) => None,
                Ok(CallAnswer { message, .. }) => Some(message.unwrap_or_else(|| {
                    format!("failed to call tool {tool}: Agency refused the call")
                })),
                Err(e) => Some(format!(
                    "failed to call tool {tool} of MCP server {}: Agency could not check the call ({e:#}); the call was not sent",
                    guard.server
                )),
            };
            if let Some(message) = refusal {
                write_message(
                    &json!({ "jsonrpc": "2.0", "id": id, "result": refusal_result(&message) }),
                )?;
                return Ok(true);
            }
            lock(pending).insert(id.to_string(), Pending::Call(tool));
        }
        (Some("tools/list"), Some(id)) => {
            lock(pending).insert(id.to_string(), Pending::List);
        }
        _ => {}
    }
    match to_server
        .write_all(format!("{}\n", line.trim()).as_bytes())
        .and_then(|()| to_server.flush())
    {
        Ok(()) => Ok(true),
        Err(_) => Ok(false),
    }
}

/// Relay the server's messages to the agent, through the guard where it
/// has a say, until the server's output ends.
fn from_server_loop(
    from_server: std::process::ChildStdout,
    pending: &PendingMap,
    guard: &GuardLink,
) -> Result<()> {
    for line in BufReader::new(from_server).lines() {
        let line = line.context("failed to read the server's output")?;
        if line.trim().is_empty() {
            continue;
        }
        let Ok(mut msg) = serde_json::from_str::<Value>(&line) else {
            eprintln!(
                "agency mcp-launch {}: skipped a line of the server that is not JSON",
                guard.server
            );
            continue;
        };
        let is_response = msg.get("method").is_none();
        let waiting = match msg.get("id") {
            Some(id) if is_response => lock(pending).remove(&id.to_string()),
            _ => None,
        };
        let Some(waiting) = waiting else {
            crate::commands::write_stdout(format!("{}\n", line.trim()).as_bytes())?;
            continue;
        };
        if let Some(result) = msg.get_mut("result").map(Value::take) {
            match waiting {
                Pending::List => match listed(guard, result) {
                    Ok(r) => msg["result"] = r,
                    Err(error) => {
                        // No listing rather than an unchecked one.
                        if let Value::Object(m) = &mut msg {
                            m.remove("result");
                            m.insert("error".to_owned(), error);
                        }
                    }
                },
                Pending::Call(tool) => {
                    let answer: Result<ResultAnswer> = guard.post(
                        "result",
                        &ResultReport {
                            tool: tool.clone(),
                            result,
                        },
                    );
                    msg["result"] = match answer {
                        Ok(a) => a.result,
                        Err(e) => refusal_result(&format!(
                            "failed to get the result of tool {tool} of MCP server {}: Agency could not check it ({e:#}), so it is withheld",
                            guard.server
                        )),
                    };
                }
            }
        }
        write_message(&msg)?;
    }
    Ok(())
}

/// The listing the agent may see, or the JSON-RPC error in its place.
fn listed(guard: &GuardLink, result: Value) -> Result<Value, Value> {
    match guard.post::<_, ToolsAnswer>("tools", &ToolsReport { result }) {
        Ok(a) => {
            for w in &a.withheld {
                eprintln!(
                    "agency mcp-launch {}: withheld tool {}: {}",
                    guard.server, w.tool, w.reason
                );
            }
            Ok(a.result)
        }
        Err(e) => Err(json!({ "code": -32603, "message": format!(
            "failed to list the tools of MCP server {}: Agency could not check them ({e:#})",
            guard.server
        )})),
    }
}

/// The guard link of a launch, from the launcher's environment.
pub fn link(server: &str, mcp_url: &str, token: &str, session: String) -> Result<GuardLink> {
    let base =
        Url::parse(mcp_url).with_context(|| format!("failed to parse AGENCY_MCP_URL={mcp_url}"))?;
    Ok(GuardLink {
        http: http_client()?,
        base,
        token: token.trim().to_owned(),
        session,
        server: server.to_owned(),
    })
}
