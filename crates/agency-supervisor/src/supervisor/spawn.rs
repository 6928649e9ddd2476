//! One agent spawn, from a handler taken off the queue to its process
//! running (delivery → process started within a bare
//! spawn in the same sandbox + 2 ms).
//!
//! The store is asked once: [`Service::spawn_prepare`] checks that the
//! handler may start an agent, starts it (agent row, token, budget charge,
//! run record) and reads everything the launch needs, in one write
//! transaction on one blocking thread. Then, on the dispatcher: the first
//! message is composed, the runtime's command built and wrapped in the
//! sandbox, and the process spawned. Recording its process group (a
//! second write, for the reaper after a crash; lazy, like the first)
//! happens after the process runs, in the task that waits for its exit,
//! so it neither delays this agent nor the dispatcher.

use std::collections::BTreeSet;
use std::sync::Arc;

use agency_core::HandlerId;
use agency_core::prompt::previous_run_note;
use agency_service::{PreparedSpawn, RunReport, ServiceError, SpawnRequest};

use super::standby::Template;
use super::{Msg, Running, State};
use crate::agent_log::{LogCapture, Secrets};
use crate::runtime::SpawnSpec;

#[derive(Debug, thiserror::Error)]
pub(super) enum SpawnError {
    #[error(transparent)]
    Service(ServiceError),
    #[error("failed to create {}: {cause}", path.display())]
    Dir {
        path: std::path::PathBuf,
        cause: std::io::Error,
    },
    /// The runtime could not build the agent's command.
    #[error(transparent)]
    Command(agency_config::ConfigError),
    #[error(transparent)]
    Confine(crate::confine::ConfineError),
    #[error("failed to make the pipe for the agent's output: {0}")]
    Pipe(std::io::Error),
    #[error("failed to run the {runtime} runtime: {cause}")]
    Run {
        runtime: String,
        cause: std::io::Error,
    },
}

impl State {
    /// Start an agent for `h` if it may have one now.
    pub(super) async fn spawn(&mut self, h: HandlerId) -> Result<(), SpawnError> {
        let began = std::time::Instant::now();
        // A standby sandbox waits in a spawn directory of its own, which
        // becomes this agent's (`standby.rs`).
        let standby = self.standby.take();
        let dir = match &standby {
            Some(s) => s.dir.clone(),
            None => self.runs.join(uuid::Uuid::new_v4().simple().to_string()),
        };
        let workspace = dir.join("workspace");
        let run_dir = dir.join("run");
        let ws = workspace.clone();
        let keep_warm = self.cfg.keep_warm_defaults();
        let runtime = self.runtime.name().to_owned();
        let lease_spec = self.lease.as_ref().map(|l| l.spec.clone());
        let prepared = self
            .blocking(move |s| {
                s.spawn_prepare(&SpawnRequest {
                    handler: h,
                    workspace: &ws,
                    runtime: &runtime,
                    keep_warm,
                    lease: lease_spec.as_ref(),
                })
            })
            .await;
        let p = match prepared {
            Ok(Some(p)) => p,
            // Nothing was made yet: the directories come after the store
            // said yes, so a handler considered without work costs no I/O.
            // The standby waits for the next one.
            Ok(None) => {
                self.standby = standby;
                return Ok(());
            }
            Err(e) => {
                self.standby = standby;
                return Err(SpawnError::Service(e));
            }
        };
        let prepared_at = began.elapsed();
        let initial_message = first_message(&p);
        let PreparedSpawn {
            minted,
            system_prompt,
            mcp_servers,
            keep_warm,
            upstream,
            lease,
            ..
        } = p;
        let keep_warm_ms = crate::warm::keep_warm_ms(
            keep_warm,
            (self.runtime.name(), self.runtime.keeps_warm()),
            h,
        );
        let mcp_servers = self.usable_servers(h, mcp_servers);
        let launch_nonces = mcp_servers
            .iter()
            .map(|n| (n.clone(), self.hooks.launch_nonce(minted.agent, n)))
            .collect();
        let spec = SpawnSpec {
            handler: h,
            agent: minted.agent,
            token: minted.token,
            mcp_url: self.mcp_url.clone(),
            workspace,
            run_dir,
            system_prompt,
            initial_message,
            mcp_servers,
            launcher: self.launcher.clone(),
            launch_nonces,
            egress_proxy: Some(self.egress_proxy),
            upstream,
            keep_warm_ms,
        };
        let agent = spec.agent;
        // Kept for `agency run AGENT --prompt`; not awaited: the run need
        // not wait for its record, and a failure costs only that view.
        {
            let svc = self.svc.clone();
            let (prompt, first) = (spec.system_prompt.clone(), spec.initial_message.clone());
            tokio::task::spawn_blocking(move || {
                if let Err(e) = svc.agent_record_prompt(agent, &prompt, &first) {
                    tracing::warn!(%agent, error = %e, "failed to keep the run's prompt");
                }
            });
        }
        let mut log_reader = None;
        let mut cgroup = None;
        let mut launched_at = std::time::Duration::ZERO;
        let mut template = None;
        let mut dirs_at = std::time::Duration::ZERO;
        let command = [&spec.workspace, &spec.run_dir]
            .into_iter()
            .try_for_each(|d| {
                std::fs::create_dir_all(d).map_err(|cause| SpawnError::Dir {
                    path: d.clone(),
                    cause,
                })
            })
            .and_then(|()| {
                dirs_at = began.elapsed();
                self.runtime.command(&spec).map_err(SpawnError::Command)
            });
        let command_at = began.elapsed();
        // The standby, if it fits: the command goes down its stdin.
        // Either way its directory is this spawn's now: kept.
        let mut handed = None;
        if let Some(sb) = standby {
            match &command {
                Ok(cmd) => {
                    launched_at = began.elapsed();
                    match sb.hand_over(cmd.as_std()).await {
                        Ok(h) => handed = Some(h),
                        Err(sb) => sb.discard(false).await,
                    }
                }
                Err(_) => sb.discard(false).await,
            }
        }
        let child = match handed {
            Some(h) => {
                log_reader = Some(h.log);
                cgroup = Some(h.cgroup);
                self.confine_upload_pack(&spec);
                template = command.as_ref().ok().and_then(|c| Template::of(c.as_std()));
                Ok(h.child)
            }
            None => command
                .and_then(|cmd| {
                    template = Template::of(cmd.as_std());
                    // Inside the sandbox (agency sandbox-exec), unless it is off;
                    // a sandbox that cannot be built keeps the agent from
                    // starting (the error names the cause and the way out).
                    let (cmd, cg) = self
                        .confiner
                        .confine(
                            cmd,
                            &spec,
                            &self.runtime.programs(),
                            &self.extra_connect_ports,
                        )
                        .map_err(SpawnError::Confine)?;
                    if cg.is_some() {
                        self.confine_upload_pack(&spec);
                    }
                    cgroup = cg.map(Arc::new);
                    Ok(cmd)
                })
                .and_then(|mut cmd| {
                    let (reader, out, err) = crate::agent_log::pipe().map_err(SpawnError::Pipe)?;
                    log_reader = Some(reader);
                    // A group of its own: stopping the agent reaches every process
                    // it started. (process_group(0), not setsid in pre_exec, which
                    // forces a slow fork in a large daemon.) Its output is
                    // captured for the run record (agent_log.rs).
                    cmd.process_group(0)
                        .stdin(std::process::Stdio::null())
                        .stdout(out)
                        .stderr(err)
                        .kill_on_drop(false);
                    launched_at = began.elapsed();
                    cmd.spawn().map_err(|cause| SpawnError::Run {
                        runtime: self.runtime.name().to_owned(),
                        cause,
                    })
                }),
        };
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                let report = RunReport {
                    reason: format!("spawn failed: {e}"),
                    normal: false,
                    ..RunReport::default()
                };
                let _ = self.blocking(move |s| s.agent_finish(agent, &report)).await;
                if let Some(cg) = cgroup {
                    crate::confine::release(cg).await;
                }
                let _ = std::fs::remove_dir_all(&dir);
                self.hooks.agent_ended(agent);
                self.upload_packs.forget_agent(agent);
                self.note_failure(h);
                return Err(e);
            }
        };
        let pgid = child.id().unwrap_or(0);
        // The command (and with it our copies of the pipe's write end) is
        // gone: the capture sees the end of output when the agent's are.
        let log = log_reader.map(|r| {
            LogCapture::start(
                r,
                self.log.agent_log_head_bytes,
                self.log.agent_log_tail_bytes,
                Secrets::new(self.servers.clone(), spec.token.clone()),
            )
        });
        // Followers find it from now until its run is recorded.
        let live = Some(self.live.add(
            agent,
            spec.run_dir.clone(),
            log.as_ref().map(LogCapture::follow),
        ));
        tracing::info!(handler = %h, agent = %agent, runtime = self.runtime.name(), pid = pgid, "agent started");
        // Where a spawn's time goes: the store transaction, then
        // directories, command and sandbox, then the fork and exec.
        tracing::debug!(
            agent = %agent,
            prepare_us = prepared_at.as_micros(),
            dirs_us = dirs_at.saturating_sub(prepared_at).as_micros(),
            command_us = command_at.saturating_sub(dirs_at).as_micros(),
            launch_us = launched_at.saturating_sub(prepared_at).as_micros(),
            spawn_us = (began.elapsed() - launched_at).as_micros(),
            "agent spawn timings"
        );
        let (tx, svc) = (self.tx.clone(), self.svc.clone());
        tokio::spawn(async move {
            // Recorded so that a daemon restarted after a crash can stop
            // the group (the leader's start time guards against a reused
            // pid). Here, not before the dispatcher goes on: the agent
            // already runs, and its exit is reported only after this, so
            // the record never lands after the run's end.
            if let Some(started) = crate::process::start_time(pgid) {
                let recorded = tokio::task::spawn_blocking(move || {
                    svc.agent_record_process(agent, pgid, started)
                })
                .await;
                if !matches!(recorded, Ok(Ok(()))) {
                    tracing::warn!(agent = %agent, "failed to record the process group of agent {agent}");
                }
            }
            let status = child.wait().await.ok();
            use std::os::unix::process::ExitStatusExt;
            let _ = tx.send(Msg::Exited {
                handler: h,
                agent,
                status: status.and_then(|s| s.code()),
                signalled: status.is_some_and(|s| s.signal().is_some()),
            });
        });
        self.by_agent.insert(agent, h);
        self.activity.touch(agent);
        self.schedule_idle_check(agent, self.cfg.idle_timeout_ms);
        self.running.insert(
            h,
            Running {
                agent,
                pgid,
                spec,
                stop_reason: None,
                config_restart: false,
                log,
                live,
                cgroup: cgroup.clone(),
                lease,
                leased_at: tokio::time::Instant::now(),
            },
        );
        // The next confined agent's sandbox, set up while none is needed.
        if let (Some(t), Some(_)) = (&template, &cgroup) {
            self.prepare_standby(t);
        }
        Ok(())
    }

    /// The daemon's `repo_push` reads this agent's clones with
    /// git-upload-pack inside the agent's own sandbox, so a hostile clone
    /// (alternates into another agent's directory, a swapped file) reads
    /// only what the agent itself may read. The policy is the agent's, in
    /// its spawn directory, which the agent cannot write (`confine.rs`).
    /// Nothing of the agent's configures that git (a
    /// `.gitconfig` in the agent's HOME set `uploadpack.packObjectsHook`):
    /// an empty environment, no global or system configuration, a HOME
    /// that holds nothing. The repository's own configuration cannot name
    /// a hook for upload-pack; git reads those from protected
    /// configuration only.
    fn confine_upload_pack(&self, spec: &SpawnSpec) {
        let Some(spawn_dir) = spec.workspace.parent() else {
            return;
        };
        let policy = spawn_dir.join(crate::confine::POLICY_FILE);
        let path = std::env::var("PATH")
            .ok()
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".to_owned());
        self.upload_packs.set(
            spec.agent,
            vec![
                "/usr/bin/env".to_owned(),
                "-i".to_owned(),
                format!("PATH={path}"),
                "HOME=/dev/null".to_owned(),
                "XDG_CONFIG_HOME=/dev/null".to_owned(),
                "GIT_CONFIG_NOSYSTEM=1".to_owned(),
                "GIT_CONFIG_GLOBAL=/dev/null".to_owned(),
                "GIT_NO_LAZY_FETCH=1".to_owned(),
                self.launcher.to_string_lossy().into_owned(),
                "sandbox-exec".to_owned(),
                "--policy".to_owned(),
                policy.to_string_lossy().into_owned(),
                "--".to_owned(),
            ],
        );
    }

    /// The granted servers that `agency.toml` declares (a capability on an
    /// undeclared one is reported, not fatal: the user may add it later).
    pub(super) fn usable_servers(&self, h: HandlerId, granted: BTreeSet<String>) -> Vec<String> {
        let (known, unknown): (Vec<String>, Vec<String>) = granted
            .into_iter()
            .partition(|n| self.servers.is_declared(n));
        if !unknown.is_empty() {
            tracing::warn!(
                handler = %h,
                servers = %unknown.join(", "),
                "the handler holds capabilities on MCP servers that agency.toml does not declare"
            );
        }
        known
    }
}

/// The first user message of an agent: how the previous agent ended when
/// that was not normally, what is waiting in its inbox (so a run can be
/// told apart from the last one) and the instruction to begin, then what
/// its memory holds for the work.
fn first_message(p: &PreparedSpawn) -> String {
    let mut first = inbox_message(&p.inbox_subjects);
    if let Some(prev) = &p.previous {
        let note = previous_run_note(&format!("agent {}", prev.agent), &prev.ended_how);
        first = format!("{note}\n\n{first}");
    }
    if let Some(m) = &p.memory {
        first = format!("{first}\n\n{m}");
    }
    first
}

/// What is waiting in the inbox, then the instruction to begin.
fn inbox_message(subjects: &[String]) -> String {
    if subjects.is_empty() {
        return "Begin: your inbox is empty; work on your outcomes.".to_owned();
    }
    let list: Vec<String> = subjects.iter().map(|s| format!("- {s}")).collect();
    format!(
        "Begin: your inbox has {} unread message(s):\n{}\nProcess your inbox first, then work on your outcomes.",
        subjects.len(),
        list.join("\n")
    )
}
