//! ToolRunner (seed 001 §8): the Implementor's `runCommand` actions.
//!
//! Which commands run is decided here once, for both modes: a command the
//! plan rules block (`agency_core::policy::plan`) is skipped, whatever the
//! mode. Mock mode (the default) records each allowed command as not
//! executed. Live mode runs each with `sh -c` in the run's own workspace,
//! `<home>/pipelines/<run id>/workspace`, which outlives the run so the
//! user can look at what the commands did:
//!
//! - confined as agents' processes are (`Confiner::confine_in`: Landlock
//!   read-write beneath the run's directory's `workspace/` and `run/`
//!   alone, the system read-only, not the Agency home; no TCP at all; no
//!   signals or ptrace outside the sandbox, so no `/proc/<daemon>/environ`;
//!   seccomp, rlimits, a cgroup of its own), unless `agents.sandbox = "off"`;
//! - from an empty environment plus the variables agents inherit, its HOME
//!   and TMPDIR under `run/`: nothing of the daemon's environment;
//! - one command at a time, each until its exit or its timeout, after which
//!   its process group and cgroup are killed, so nothing it started
//!   outlives it;
//! - its output (stdout and stderr, interleaved as they came) kept up to
//!   [`MAX_OUTPUT`] bytes, with a note saying when it was cut.
//!
//! Live mode needs the run's level to be 1 or more (level 0 allows only
//! mock mode; the service refuses such a run, the runner checks again),
//! and the stage's report records the mode, the level that allowed it and
//! the workspace. A command that cannot be confined stops the stage
//! (`failed_infra`): nothing runs unconfined by accident.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agency_core::HandlerId;
use agency_core::policy::plan::{PlanSeverity, scan_plan_text};
use agency_core::status::StageStatus as Stored;
use agency_org::pipeline::StageModel;
use agency_service::pipelines::{NextStage, StageEnd};
use agency_supervisor::confine::{Confiner, Place};
use agency_supervisor::runtime::{DEFAULT_PATH, INHERITED_ENV};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;

use crate::code::{self, CodeEnd};
use crate::runner::failed;

/// The most output kept per command (bytes).
pub const MAX_OUTPUT: usize = 16 << 10;
/// One command's deadline unless the daemon says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// The directories of a run's directory a command may write: its
/// workspace, and `run/` (its HOME and TMPDIR).
const WRITABLE: &[&str] = &["workspace", "run"];
/// How long the output is still read after the command ended (a
/// descendant of an unconfined command may hold a pipe open).
const DRAIN: Duration = Duration::from_secs(5);

/// What live mode needs from the daemon.
#[derive(Debug, Clone)]
pub struct LiveTools {
    /// Confines each command as agents' processes are.
    pub confiner: Arc<Confiner>,
    /// Where runs' directories go (`<home>/pipelines`).
    pub root: PathBuf,
    /// One command's deadline.
    pub timeout: Duration,
}

/// Why live mode could not run the commands (the stage ends `failed_infra`).
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("failed to create the run's workspace {path}: {source}")]
    Workspace {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("failed to confine command {command:?}: {why}")]
    Confine { command: String, why: String },
    #[error("failed to start command {command:?}: {source}")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
}

/// Where the runs' directories go under the daemon's home.
pub fn root_of(home: &Path) -> PathBuf {
    home.join("pipelines")
}

/// Run `run`'s workspace under `root`: the working directory of its live
/// commands, kept after the run.
pub fn workspace_of(root: &Path, run: HandlerId) -> PathBuf {
    root.join(run.to_string()).join("workspace")
}

/// The Implementor's `runCommand` commands in `ctx`: those that may run,
/// and those the plan rules block (skipped in either mode).
pub fn proposed(ctx: &Map<String, Value>) -> (Vec<String>, Vec<String>) {
    let actions = ctx
        .get("Implementor")
        .and_then(|i| i.get("actions"))
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut allowed = Vec::new();
    let mut skipped = Vec::new();
    for a in actions {
        if a.get("type").and_then(Value::as_str) != Some("runCommand") {
            continue;
        }
        let Some(command) = a.get("command").and_then(Value::as_str) else {
            continue;
        };
        let blocked = scan_plan_text(command)
            .iter()
            .any(|f| f.severity == PlanSeverity::Block);
        if blocked {
            skipped.push(command.to_owned());
        } else {
            allowed.push(command.to_owned());
        }
    }
    (allowed, skipped)
}

/// Mock mode's output: every allowed command recorded, none executed.
pub fn mock(ctx: &Map<String, Value>) -> Value {
    let (allowed, skipped) = proposed(ctx);
    let executed: Vec<Value> = allowed
        .iter()
        .map(|command| {
            json!({
                "command": command,
                "success": true,
                "output": "not executed: mock mode records commands without running them",
                "mockMode": true,
            })
        })
        .collect();
    json!({ "executedCommands": executed, "skippedCommands": skipped })
}

/// The stage's report: the mode and the level that allowed it (and, live,
/// the workspace and how commands were confined).
pub fn report(live: Option<(&Path, &str)>, level: i64) -> Value {
    match live {
        None => json!({ "step": "tool_runner", "mode": "mock", "level": level }),
        Some((workspace, sandbox)) => json!({
            "step": "tool_runner",
            "mode": "live",
            "level": level,
            "workspace": workspace.display().to_string(),
            "sandbox": sandbox,
        }),
    }
}

/// The ToolRunner stage of a run in live mode: its commands run, but for
/// `refused` ((command, why): those the tool-call policy refused, which
/// are skipped), then its output passes the stage's contract like any code
/// step's.
pub async fn live_stage(
    tools: Option<&LiveTools>,
    stage: &StageModel,
    next: &NextStage,
    refused: &[(String, String)],
) -> StageEnd {
    // The run's level, never an earlier stage's text, allows live mode.
    if next.level < 1 {
        return failed(
            Stored::BlockedPolicy,
            format!(
                "stage {}: live mode needs level 1 or more, and the run is at level {}",
                stage.name, next.level
            ),
        );
    }
    let Some(tools) = tools else {
        return failed(
            Stored::FailedInfra,
            format!(
                "stage {}: this daemon runs no live tools; start the run without --live",
                stage.name
            ),
        );
    };
    let workspace = workspace_of(&tools.root, next.run);
    let out = match live(tools, next.run, &next.context, refused).await {
        Ok(v) => Ok(v),
        Err(e) => {
            return failed(Stored::FailedInfra, format!("stage {}: {e}", stage.name));
        }
    };
    tracing::info!(run = %next.run, workspace = %workspace.display(), "pipeline run's live ToolRunner ended");
    let sandbox = tools.confiner.status();
    let mut report = report(Some((&workspace, &sandbox)), next.level);
    if !refused.is_empty()
        && let Value::Object(m) = &mut report
    {
        let refused: Vec<Value> = refused
            .iter()
            .map(|(c, why)| json!({ "command": c, "why": why }))
            .collect();
        m.insert("refusedByPolicy".to_owned(), Value::Array(refused));
    }
    match code::accept_output("tool_runner", stage, next, out, report) {
        CodeEnd::Ended(end) => end,
        CodeEnd::NeedsApproval { .. } => failed(
            Stored::FailedInfra,
            format!("stage {}: ToolRunner asked for an approval", stage.name),
        ),
    }
}

/// Run `run`'s allowed commands in its workspace, one after the other,
/// but for `refused` (skipped); the stage's output (not yet validated).
pub async fn live(
    tools: &LiveTools,
    run: HandlerId,
    ctx: &Map<String, Value>,
    refused: &[(String, String)],
) -> Result<Value, LiveError> {
    let (mut allowed, mut skipped) = proposed(ctx);
    allowed.retain(|c| {
        let out = refused.iter().any(|(r, _)| r == c);
        if out {
            skipped.push(c.clone());
        }
        !out
    });
    let dir = tools.root.join(run.to_string());
    let made = {
        let dir = dir.clone();
        tokio::task::spawn_blocking(move || make_dirs(&dir))
            .await
            .unwrap_or_else(|e| {
                Err(LiveError::Workspace {
                    path: PathBuf::new(),
                    source: std::io::Error::other(e),
                })
            })
    };
    made?;
    let mut executed = Vec::with_capacity(allowed.len());
    for (i, command) in allowed.iter().enumerate() {
        let ran = run_one(
            tools,
            &dir,
            &format!("pipeline-{}-{i}", run.uuid().simple()),
            command,
        )
        .await?;
        executed.push(json!({
            "command": command,
            "success": ran.success,
            "output": ran.output,
            "mockMode": false,
        }));
    }
    Ok(json!({ "executedCommands": executed, "skippedCommands": skipped }))
}

/// The run's directory (not writable by its commands: it holds their
/// policy), its workspace, HOME and TMPDIR; owner-only.
fn make_dirs(dir: &Path) -> Result<(), LiveError> {
    use std::os::unix::fs::DirBuilderExt;
    let run = dir.join("run");
    for d in [
        dir.to_owned(),
        dir.join("workspace"),
        run.join("home"),
        run.join("tmp"),
    ] {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&d)
            .map_err(|source| LiveError::Workspace { path: d, source })?;
    }
    Ok(())
}

/// How one command ended.
struct Ran {
    success: bool,
    output: String,
}

/// Output kept so far, and how much came in all.
#[derive(Default)]
struct Output {
    kept: Vec<u8>,
    total: usize,
}

async fn run_one(
    tools: &LiveTools,
    dir: &Path,
    cgroup: &str,
    command: &str,
) -> Result<Ran, LiveError> {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .env_clear()
        .current_dir(dir.join("workspace"));
    for k in INHERITED_ENV {
        if let Some(v) = std::env::var_os(k) {
            cmd.env(k, v);
        }
    }
    if std::env::var_os("PATH").is_none() {
        cmd.env("PATH", DEFAULT_PATH);
    }
    cmd.env("HOME", dir.join("run/home"))
        .env("TMPDIR", dir.join("run/tmp"));
    let confined = {
        let confiner = tools.confiner.clone();
        let (dir, cgroup) = (dir.to_owned(), cgroup.to_owned());
        tokio::task::spawn_blocking(move || {
            confiner.confine_in(
                cmd,
                &Place {
                    cgroup: &cgroup,
                    spawn_dir: &dir,
                    writable: WRITABLE,
                    programs: &[],
                    readable: &[],
                    // No network: nothing of the daemon's, nothing outside.
                    connect_ports: &[],
                },
            )
        })
        .await
    };
    let (mut cmd, cgroup) = match confined {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            return Err(LiveError::Confine {
                command: command.to_owned(),
                why: e.to_string(),
            });
        }
        Err(e) => {
            return Err(LiveError::Confine {
                command: command.to_owned(),
                why: e.to_string(),
            });
        }
    };
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let spawned = cmd.spawn();
    let mut child = match spawned {
        Ok(c) => c,
        Err(source) => {
            release(cgroup).await;
            return Err(LiveError::Spawn {
                command: command.to_owned(),
                source,
            });
        }
    };
    let pgid = child.id().unwrap_or(0);
    let out = Arc::new(Mutex::new(Output::default()));
    let mut reads = {
        let (a, b) = (child.stdout.take(), child.stderr.take());
        let (oa, ob) = (out.clone(), out.clone());
        tokio::spawn(async move { tokio::join!(read_into(a, oa), read_into(b, ob)) })
    };
    let status = tokio::time::timeout(tools.timeout, child.wait()).await;
    // Ended or out of time: nothing it started outlives it (its group,
    // and its cgroup for what left the group), which closes its pipes.
    agency_sandbox::process_group::kill_group(pgid);
    if status.is_err() {
        let _ = tokio::time::timeout(DRAIN, child.wait()).await;
    }
    release(cgroup).await;
    let _ = tokio::time::timeout(DRAIN, &mut reads).await;
    reads.abort();
    let out = std::mem::take(&mut *out.lock().unwrap_or_else(|p| p.into_inner()));
    let mut text = String::from_utf8_lossy(&out.kept).into_owned();
    let code = match &status {
        Ok(Ok(s)) => s.code(),
        _ => None,
    };
    // `sandbox-exec` could not apply the policy: the command did not run,
    // and no later one would be confined either.
    if let Some(why) = agency_supervisor::confine::sandbox_failure(code, Some(&out.kept)) {
        return Err(LiveError::Confine {
            command: command.to_owned(),
            why,
        });
    }
    if out.total > out.kept.len() {
        text.push_str(&format!(
            "\n[output cut at {MAX_OUTPUT} bytes: the command wrote {} bytes]",
            out.total
        ));
    }
    let success = match status {
        Ok(Ok(s)) => {
            if !s.success() {
                text.push_str(&format!("\n[{s}]"));
            }
            s.success()
        }
        Ok(Err(e)) => {
            text.push_str(&format!("\n[failed to wait for the command: {e}]"));
            false
        }
        Err(_) => {
            text.push_str(&format!(
                "\n[killed: the command did not finish within {} s]",
                tools.timeout.as_secs()
            ));
            false
        }
    };
    Ok(Ran {
        success,
        output: text,
    })
}

/// Kill what is left in the command's cgroup and remove it.
async fn release(cgroup: Option<agency_sandbox::AgentCgroup>) {
    if let Some(cg) = cgroup {
        match tokio::task::spawn_blocking(move || cg.remove()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "failed to remove a live command's cgroup"),
            Err(e) => tracing::warn!(error = %e, "failed to remove a live command's cgroup"),
        }
    }
}

/// Append what `r` yields to `out`, keeping at most [`MAX_OUTPUT`] bytes
/// and reading on to the end (a full pipe must not stop the command).
async fn read_into(r: Option<impl AsyncRead + Unpin>, out: Arc<Mutex<Output>>) {
    let Some(mut r) = r else { return };
    let mut buf = [0u8; 8192];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let mut o = out.lock().unwrap_or_else(|p| p.into_inner());
                o.total += n;
                let room = MAX_OUTPUT.saturating_sub(o.kept.len());
                let take = room.min(n);
                o.kept.extend_from_slice(&buf[..take]);
            }
        }
    }
}

#[cfg(test)]
#[path = "tool_runner_tests.rs"]
mod tests;
