//! An organisation's command tool: a program that reads
//! the input JSON on stdin and writes the output JSON on stdout.
//!
//! Each call runs in a private directory of its own under the home's
//! `run/` (`tool-<uuid>/work` is its working directory, `tool-<uuid>/run`
//! its HOME and TMPDIR), deleted afterwards, from an empty environment
//! plus the variables agents inherit, confined as agents are
//! (`Confiner::confine_in`: read-write that directory alone, its source
//! folder and the system read-only, TCP only to the egress proxy — not the
//! daemon's port —, a cgroup of its own) unless `agents.sandbox = "off"`.
//! Its network is the egress proxy, with a key bound to the calling agent
//! for the length of the run: the tool reaches what the agent's handler
//! may reach. The run ends when the program exits, or at `timeoutMs`:
//! either way its process group and cgroup are killed then, so nothing it
//! started outlives the call or keeps it waiting. A non-zero exit is an
//! error with the tail of its stderr; its stderr is also logged.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use agency_config::secrets::ExposeSecret;
use agency_core::Principal;
use agency_mcp::OrgToolFailure;
use agency_org::{CommandTool, Tool};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use agency_sandbox::AgentCgroup;

use crate::org_tools::CallCtx;
use agency_supervisor::confine::Place;
use agency_supervisor::runtime::{INHERITED_ENV, NO_PROXY};

/// The largest output read from stdout (bytes).
const MAX_STDOUT: usize = 4 << 20;
/// How much of stderr is kept (its end).
const STDERR_TAIL: usize = 4 << 10;

/// Run the command; its output (not yet validated).
pub(crate) async fn call(
    ctx: &CallCtx,
    who: Principal,
    tool: &Tool,
    c: &CommandTool,
    args: &Value,
) -> Result<Value, OrgToolFailure> {
    let dir = ctx.run_root.join(format!("tool-{}", uuid::Uuid::new_v4()));
    let key = ctx.keys.issue_tool(who);
    let r = run_in(ctx, tool, c, args, &dir, &key).await;
    ctx.keys.drop_tool(&key);
    let d = dir.clone();
    let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(d)).await;
    r
}

async fn run_in(
    ctx: &CallCtx,
    tool: &Tool,
    c: &CommandTool,
    args: &Value,
    dir: &Path,
    key: &str,
) -> Result<Value, OrgToolFailure> {
    let fail = |kind: &'static str, why: String| {
        OrgToolFailure::new(kind, format!("failed to run tool {}: {why}", tool.name))
    };
    // A tool defined in a folder (seed 004's `python3 airtable.py`) runs
    // there, read-only; otherwise in its private directory.
    let source_dir = match &c.dir {
        Some(d) => {
            let d = PathBuf::from(d);
            if !d.is_absolute() || !d.is_dir() {
                return Err(fail(
                    "failed",
                    format!(
                        "its folder {} is not an absolute path to a folder; run `agency up` on the sources again",
                        d.display()
                    ),
                ));
            }
            Some(d)
        }
        None => None,
    };
    // The tool's own variables, secrets filled in: this process's only.
    let mut env = Vec::with_capacity(c.env.len());
    for (k, v) in &c.env {
        let what = format!("environment variable {k}");
        env.push((
            k.clone(),
            crate::org_tools::fill_secrets(tool, &what, v, &ctx.secrets)?,
        ));
    }
    let (mut cmd, cgroup) = confined(ctx, tool, &c.command, dir, key, source_dir, &env).await?;
    let mut child = cmd
        .spawn()
        .map_err(|e| fail("failed", format!("starting {:?} failed: {e}", c.command[0])))?;
    let pgid = child.id().unwrap_or(0);
    let input = serde_json::to_vec(args).unwrap_or_default();
    let deadline = tokio::time::Instant::now() + Duration::from_millis(c.timeout_ms);
    // Input and output flow on tasks of their own while the program runs
    // (a full pipe must not stop it), and neither is waited for to end the
    // run: a descendant may hold a pipe open long after the program is
    // gone. The program may exit without reading all of its input: a
    // broken pipe is not the tool's failure, its exit status says.
    let stdin = child.stdin.take();
    let writer = tokio::spawn(async move {
        if let Some(mut s) = stdin {
            let _ = s.write_all(&input).await;
        }
    });
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let mut reads = tokio::spawn(async move {
        tokio::join!(
            read_bounded(stdout, MAX_STDOUT),
            read_tail(stderr, STDERR_TAIL)
        )
    });
    let status = tokio::time::timeout_at(deadline, child.wait()).await;
    // The program has exited (or ran out of time): nothing of the run
    // outlives it, its group (its children) and its cgroup (what left the
    // group, a `setsid` child holding stdout included) are killed, which
    // also closes every pipe they held.
    agency_sandbox::process_group::kill_group(pgid);
    if status.is_err() {
        // Reaped before the call answers, so a timed-out program is gone,
        // not merely signalled, when its caller hears of it (SIGKILL is
        // prompt; the bound only guards against a process stuck in the
        // kernel).
        let _ = tokio::time::timeout(Duration::from_secs(5), child.wait()).await;
    }
    if let Some(cg) = cgroup {
        let _ = tokio::task::spawn_blocking(move || cg.remove()).await;
    }
    writer.abort();
    let finished = match status {
        Ok(status) => tokio::time::timeout_at(deadline, &mut reads)
            .await
            .ok()
            .map(|r| (r, status)),
        Err(_) => None,
    };
    reads.abort();
    let Some((read, status)) = finished else {
        tracing::info!(tool = %tool.name, timeout_ms = c.timeout_ms, "org tool killed at its timeout");
        return Err(fail(
            "timeout",
            format!(
                "it did not finish within {} ms and was killed",
                c.timeout_ms
            ),
        ));
    };
    let (out, err) =
        read.map_err(|e| fail("internal", format!("reading its output failed: {e}")))?;
    let err = String::from_utf8_lossy(&err).into_owned();
    if !err.trim().is_empty() {
        tracing::info!(tool = %tool.name, stderr = %err, "org tool stderr");
    }
    let status = status.map_err(|e| fail("failed", format!("waiting for it failed: {e}")))?;
    if !status.success() {
        let mut why =
            agency_supervisor::confine::sandbox_failure(status.code(), Some(err.as_bytes()))
                .unwrap_or_else(|| {
                    format!(
                        "it exited with {status}; its stderr ends: {}",
                        one_line(&err)
                    )
                });
        // A shim whose version manager the sandbox hides: the likely cause
        // of a "Permission denied", said with its fix.
        if let Some(m) = ctx
            .confiner
            .missing_toolchain(&c.command, c.dir.as_deref().map(Path::new))
        {
            why.push_str("; ");
            why.push_str(&m.advice());
        }
        return Err(fail("failed", why));
    }
    let Some(out) = out else {
        return Err(fail(
            "failed",
            format!("its output is over {MAX_STDOUT} bytes"),
        ));
    };
    serde_json::from_slice(&out).map_err(|e| {
        fail(
            "invalid_output",
            format!("its stdout is not one JSON value: {e}"),
        )
    })
}

/// The command `command` set up to run in the private directory `dir`
/// (created here: `work/` its working directory unless `source_dir` is
/// given, `run/` its HOME and TMPDIR): an empty environment plus
/// `INHERITED_ENV`, the tool's own variables `env` (its secrets: set on
/// this process only, never written to a file), the egress proxy with the
/// per-run `key`, confined (`Confiner::confine_in`) unless the sandbox is
/// off. Shared by command tools and the stdio servers of MCP tools
/// (`org_tools/mcp.rs`), piped and in a process group of its own.
pub(crate) async fn confined(
    ctx: &CallCtx,
    tool: &Tool,
    command: &[String],
    dir: &Path,
    key: &str,
    source_dir: Option<PathBuf>,
    env: &[(String, agency_config::secrets::SecretString)],
) -> Result<(Command, Option<AgentCgroup>), OrgToolFailure> {
    let fail = |kind: &'static str, why: String| {
        OrgToolFailure::new(kind, format!("failed to run tool {}: {why}", tool.name))
    };
    let Some(program) = command.first() else {
        return Err(fail(
            "internal",
            "its command is empty; ask the user to fix the .tool file".to_owned(),
        ));
    };
    // A relative program path (seed 004's `./NAME` script) is the source
    // folder's file, and must stay inside it.
    let program: PathBuf = match (&source_dir, Path::new(program)) {
        (_, p) if p.is_absolute() || !program.contains('/') => p.to_owned(),
        (Some(src), p)
            if p.components().all(|c| {
                matches!(
                    c,
                    std::path::Component::Normal(_) | std::path::Component::CurDir
                )
            }) =>
        {
            src.join(p)
        }
        _ => {
            return Err(fail(
                "internal",
                format!(
                    "its program {program:?} is a relative path outside a source folder; name it absolutely, or by a name on PATH; ask the user to fix the .tool file"
                ),
            ));
        }
    };
    let work = dir.join("work");
    let run = dir.join("run");
    let (home, tmp) = (run.join("home"), run.join("tmp"));
    for d in [dir, &work, &run, &home, &tmp] {
        create_private(d)
            .map_err(|e| fail("internal", format!("creating {}: {e}", d.display())))?;
    }
    let mut cmd = Command::new(&program);
    cmd.args(&command[1..])
        .env_clear()
        .current_dir(source_dir.as_deref().unwrap_or(&work));
    for k in INHERITED_ENV {
        if let Some(v) = std::env::var_os(k) {
            cmd.env(k, v);
        }
    }
    if std::env::var_os("PATH").is_none() {
        cmd.env("PATH", "/usr/local/bin:/usr/bin:/bin");
    }
    // Before the daemon's own variables, which win (the service refuses a
    // tool naming one; this keeps it so).
    for (k, v) in env {
        cmd.env(k, v.expose_secret());
    }
    cmd.env("HOME", &home).env("TMPDIR", &tmp);
    let proxy = format!(
        "http://{}:{key}@{}",
        agency_egress::TOOL_PROXY_USER,
        ctx.egress_proxy
    );
    for k in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
        cmd.env(k, &proxy);
    }
    cmd.env("NO_PROXY", NO_PROXY).env("no_proxy", NO_PROXY);
    let cgroup_name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let confined = {
        let confiner = ctx.confiner.clone();
        let (d, port) = (dir.to_owned(), ctx.egress_proxy.port());
        let readable: Vec<PathBuf> = source_dir.into_iter().collect();
        tokio::task::spawn_blocking(move || {
            let place = Place {
                cgroup: &cgroup_name,
                spawn_dir: &d,
                writable: &["work", "run"],
                programs: &[],
                readable: &readable,
                connect_ports: &[port],
            };
            confiner.confine_in(cmd, &place)
        })
        .await
        .map_err(|e| fail("internal", e.to_string()))?
        .map_err(|e| fail("failed", e.to_string()))?
    };
    let (mut cmd, cgroup) = confined;
    // Both callers talk to the program over pipes and stop its whole
    // group when the run ends.
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    Ok((cmd, cgroup))
}

pub(crate) fn create_private(d: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(d)
    {
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && d.is_dir() => Ok(()),
        r => r,
    }
}

/// All of `r` if it is at most `max` bytes, else `None` (reading on to
/// the end, so the program is not stopped by a full pipe).
async fn read_bounded(r: Option<impl AsyncRead + Unpin>, max: usize) -> Option<Vec<u8>> {
    let mut r = r?;
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    let mut over = false;
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) if !over && out.len() + n <= max => out.extend_from_slice(&buf[..n]),
            Ok(_) => over = true,
        }
    }
    (!over).then_some(out)
}

/// The last `max` bytes of `r`.
pub(crate) async fn read_tail(r: Option<impl AsyncRead + Unpin>, max: usize) -> Vec<u8> {
    let Some(mut r) = r else { return Vec::new() };
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    while let Ok(n) = r.read(&mut buf).await {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        if out.len() > 2 * max {
            out.drain(..out.len() - max);
        }
    }
    if out.len() > max {
        out.drain(..out.len() - max);
    }
    out
}

pub(crate) fn one_line(s: &str) -> String {
    let t: String = s
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let n = t.chars().count();
    if n > 500 {
        t.chars().skip(n - 500).collect()
    } else {
        t
    }
}

/// Where command tools' private directories go.
pub fn run_root(home: &Path) -> PathBuf {
    home.join("run")
}
