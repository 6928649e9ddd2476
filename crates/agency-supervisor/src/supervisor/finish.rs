//! Recording an exited agent's run, off the dispatcher: what
//! is left of an unconfined agent's group is stopped, its output's end
//! awaited, its report collected, its workspace deleted and the run
//! recorded (`agent_finish`, a durable write), each of which can take
//! milliseconds (a large workspace, seconds) during which the dispatcher
//! would otherwise start no other agent. The dispatcher gets the store's
//! answer back as `Msg::Finished` and decides the respawn then.

use std::sync::Arc;
use std::time::Duration;

use agency_core::{AgentId, HandlerId};
use agency_service::{RunOutcome, System};

use crate::agent_log::LogCapture;
use crate::live::LiveGuard;
use crate::process::stop_group;
use crate::runtime::{Runtime, SpawnSpec};

/// What recording an exited agent's run needs, moved off the dispatcher.
pub(super) struct Finish {
    pub handler: HandlerId,
    pub agent: AgentId,
    pub status: Option<i32>,
    pub signalled: bool,
    pub spec: SpawnSpec,
    pub log: Option<LogCapture>,
    pub stop_reason: Option<String>,
    pub config_restart: bool,
    /// The process group to stop (an unconfined agent's).
    pub unconfined: Option<u32>,
    /// The run as its followers see it: dropped once the run is recorded,
    /// which ends their streams (`live.rs`).
    pub live: Option<LiveGuard>,
    /// The lease token it ran under: the record is made as its owner.
    pub lease_token: Option<i64>,
}

impl Finish {
    /// Stop what is left, collect the report, delete the workspace,
    /// record the run; what the store said, none if recording failed.
    pub async fn run(
        self,
        svc: Arc<System>,
        runtime: Arc<dyn Runtime>,
        grace: Duration,
    ) -> Option<RunOutcome> {
        let Finish {
            handler: h,
            agent,
            status,
            signalled,
            spec,
            log,
            stop_reason,
            config_restart,
            unconfined,
            live,
            lease_token,
        } = self;
        let began = std::time::Instant::now();
        if let Some(pgid) = unconfined {
            stop_group(pgid, grace).await;
        }
        let log = match log {
            Some(log) => Some(log.finish(Duration::from_secs(2)).await),
            None => None,
        };
        let recorded = tokio::task::spawn_blocking(move || {
            let mut report = runtime.collect(&spec);
            report.log = log;
            // `agency sandbox-exec` could not confine it and ran nothing.
            if let Some(why) = crate::confine::sandbox_failure(status, report.log.as_deref()) {
                report.reason = why;
            }
            if let Some(reason) = stop_reason {
                report.reason = reason;
            } else if config_restart {
                // It saved its state and exited as told: recorded as a
                // restart, so the next agent knows why the previous one
                // stopped.
                report.reason = "restarted: its MCP servers changed".to_owned();
            }
            report.exit_status = status.map(i64::from);
            // A clean exit is still abnormal when the runtime saw the run
            // fail (Claude Code exits 0 with is_error, or without our MCP
            // server).
            report.normal = status == Some(0)
                && !["failed", "error", "stalled"]
                    .iter()
                    .any(|p| report.reason.starts_with(p));
            if report.reason.is_empty() {
                report.reason = if signalled {
                    "killed".to_owned()
                } else {
                    "exited".to_owned()
                };
            }
            tracing::info!(handler = %h, agent = %agent, reason = %report.reason, exit_status = ?status, normal = report.normal, "agent ended");
            // Deleted before the run is recorded (the report holds what
            // was kept of it): a run seen ended has no workspace left.
            if let Some(dir) = spec.workspace.parent() {
                let _ = std::fs::remove_dir_all(dir);
            }
            svc.agent_finish_as(agent, &report, lease_token)
        })
        .await;
        // Followers read the last of the output and the transcript, and
        // then the stored record, which now exists.
        drop(live);
        tracing::debug!(agent = %agent, exit_us = began.elapsed().as_micros(), "agent exit handled");
        match recorded {
            Ok(Ok(outcome)) => Some(outcome),
            Ok(Err(e)) if e.kind() == "lease_lost" => {
                tracing::warn!(agent = %agent, error = %e, "the end of agent {agent} was not recorded: another daemon holds its handler's lease");
                None
            }
            Ok(Err(e)) => {
                tracing::warn!(agent = %agent, error = %e, "failed to record the end of agent {agent}");
                None
            }
            Err(e) => {
                tracing::warn!(agent = %agent, error = %e, "failed to record the end of agent {agent}");
                None
            }
        }
    }
}
