//! The standby sandbox: the next agent's sandbox, set up
//! before the agent is known.
//!
//! Most of a confined spawn's time is the kernel's, not ours: moving the
//! new process into its cgroups waits for an RCU grace period per
//! hierarchy (the cgroup threadgroup lock; 5–25 ms on the 2-core test
//! machine, and paid on nearly every spawn when spawns are tens of
//! milliseconds apart), and its network namespace and forwarder take
//! another ~3 ms. None of it depends on which handler the agent is for.
//! So after each confined spawn the dispatcher starts one
//! `agency sandbox-exec --await-command` in a fresh spawn directory
//! (`run/standby-<id>`) and cgroup, under the very policy a spawn there
//! would get; it applies the policy and waits on its stdin. The next
//! spawn takes that directory as its own,
//! writes the runtime's command (`agency_sandbox::ExecRequest`) to the
//! standby's stdin, and the standby execs it: a pipe write instead of the
//! set-up.
//!
//! Nothing weaker than a direct spawn: the policy is applied before the
//! command is sent, the command is the same as a direct spawn's, and a
//! standby that does not fit (another program) or is gone is discarded
//! and the spawn goes the direct way. Only the dispatcher holds the
//! standby's stdin: if the daemon dies, the pipe closes and the standby
//! exits without running anything; a crashed daemon's standby left in its
//! cgroup is killed at the next start like any agent.

use std::ffi::OsString;
use std::io::PipeReader;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agency_sandbox::{AgentCgroup, ExecRequest};
use tokio::io::AsyncWriteExt;

use super::State;
use crate::confine::path_of;

/// How long the command may take to reach the standby (it is read as soon
/// as the policy is applied, which takes milliseconds).
const HAND_OVER_TIMEOUT: Duration = Duration::from_secs(5);

/// One standby sandbox, waiting for its command.
pub(super) struct Standby {
    /// `run/standby-<id>`: the spawn directory (run directory now,
    /// workspace later) of the agent that takes it. Named so a listing of
    /// `run/` tells a waiting standby from agents; never renamed, since
    /// the standby reads its policy and grants from that path while it
    /// sets up, which may still be going on when an agent takes it.
    pub dir: PathBuf,
    /// The program the policy grants, and the PATH it was resolved with.
    program: PathBuf,
    path: Option<OsString>,
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    log: PipeReader,
    cgroup: Arc<AgentCgroup>,
}

/// A standby that took its command: the agent's process.
pub(super) struct HandedOver {
    pub child: tokio::process::Child,
    pub log: PipeReader,
    pub cgroup: Arc<AgentCgroup>,
}

/// What a standby is prepared from: the program a spawn ran and the PATH
/// it ran with (the policy's grants follow from these alone; the rest of
/// the policy is the daemon's configuration).
pub(super) struct Template {
    program: PathBuf,
    path: Option<OsString>,
}

impl Template {
    pub fn of(cmd: &std::process::Command) -> Option<Template> {
        Some(Template {
            program: crate::confine::resolved_program(cmd)?,
            path: path_of(cmd),
        })
    }
}

impl Standby {
    /// Give the standby `cmd` to exec. `Err` returns it unused: it does
    /// not fit `cmd`, has exited, or did not take the command in time.
    pub async fn hand_over(mut self, cmd: &std::process::Command) -> Result<HandedOver, Standby> {
        if crate::confine::resolved_program(cmd).as_ref() != Some(&self.program)
            || path_of(cmd) != self.path
            || !matches!(self.child.try_wait(), Ok(None))
        {
            return Err(self);
        }
        let request = ExecRequest {
            program: self.program.clone(),
            args: cmd.get_args().map(ToOwned::to_owned).collect(),
            env: cmd
                .get_envs()
                .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
                .collect(),
            cwd: cmd.get_current_dir().map(ToOwned::to_owned),
        };
        let bytes = match request.encode() {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = %e, "failed to hand the agent's command to the standby sandbox");
                return Err(self);
            }
        };
        let sent = tokio::time::timeout(HAND_OVER_TIMEOUT, async {
            self.stdin.write_all(&bytes).await?;
            // The end of stdin is the end of the command.
            self.stdin.shutdown().await
        })
        .await;
        match sent {
            Ok(Ok(())) => Ok(HandedOver {
                child: self.child,
                log: self.log,
                cgroup: self.cgroup,
            }),
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "the standby sandbox did not take its command");
                Err(self)
            }
            Err(_) => {
                tracing::warn!("the standby sandbox did not take its command within 5 s");
                Err(self)
            }
        }
    }

    /// Stop it and remove its cgroup (and its directory unless a spawn
    /// has taken that).
    pub async fn discard(mut self, remove_dir: bool) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
        crate::confine::release(self.cgroup).await;
        if remove_dir {
            let dir = self.dir;
            let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(dir)).await;
        }
    }
}

impl State {
    /// After a confined spawn of `t` (the runtime's command): start the
    /// next agent's standby, unless one waits already. A failure is
    /// logged and costs nothing but the next spawn's speed.
    pub(super) fn prepare_standby(&mut self, t: &Template) {
        if self.standby.is_some() || self.shutting_down {
            return;
        }
        let mut template = std::process::Command::new(&t.program);
        if let Some(p) = &t.path {
            template.env("PATH", p);
        }
        let dir = self
            .runs
            .join(format!("standby-{}", uuid::Uuid::new_v4().simple()));
        // The agent's HOME and TMPDIR are made now too (`runtime::
        // clean_env` finds them): creating a directory allocates an inode,
        // which on a busy file system (many files recently deleted: ext4
        // then scans for inodes it may reuse) took milliseconds of the
        // spawn. The workspace is made with the policy, which grants it
        // (`confine.rs`); the runtime's files (`run/prompt.md`) come with
        // the agent, so a directory without them is a standby still
        // waiting.
        let run_dir = dir.join("run");
        let started = (|| {
            for d in [run_dir.join("home"), run_dir.join("tmp")] {
                std::fs::create_dir_all(&d)
                    .map_err(|e| format!("failed to create {}: {e}", d.display()))?;
            }
            let Some(sb) = self
                .confiner
                .standby(
                    &template,
                    &dir,
                    &self.runtime.programs(),
                    &self.extra_connect_ports,
                )
                .map_err(|e| e.to_string())?
            else {
                return Ok(None);
            };
            let cgroup = Arc::new(sb.cgroup);
            let spawned = crate::agent_log::pipe()
                .map_err(|e| format!("failed to make the pipe for the agent's output: {e}"))
                .and_then(|(log, out, err)| {
                    let mut command = sb.command;
                    // As an agent's (spawn.rs): a process group of its own.
                    command
                        .process_group(0)
                        .stdin(std::process::Stdio::piped())
                        .stdout(out)
                        .stderr(err)
                        .kill_on_drop(false);
                    let mut child = command
                        .spawn()
                        .map_err(|e| format!("failed to start the standby sandbox: {e}"))?;
                    let stdin = child
                        .stdin
                        .take()
                        .ok_or("the standby sandbox has no stdin")?;
                    Ok((child, stdin, log))
                });
            match spawned {
                Ok((child, stdin, log)) => Ok(Some(Standby {
                    dir: dir.clone(),
                    program: sb.program,
                    path: t.path.clone(),
                    child,
                    stdin,
                    log,
                    cgroup,
                })),
                Err(e) => {
                    let _ = cgroup.remove();
                    Err(e)
                }
            }
        })();
        match started {
            Ok(Some(s)) => self.standby = Some(s),
            Ok(None) => {
                let _ = std::fs::remove_dir_all(&dir);
            }
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                tracing::warn!(error = %e, "failed to prepare a standby sandbox; the next agent starts without one");
            }
        }
    }
}
