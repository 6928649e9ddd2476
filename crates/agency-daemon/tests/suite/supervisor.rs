//! The supervisor with the `command` runtime (shell scripts as agents): an
//! agent is spawned on mail, force-stop leaves zero processes in its group,
//! exits without progress are retried with backoff until the handler is
//! marked stalled and its boss told, and a restart reaps agents left live.

#![allow(clippy::unwrap_used)]

use crate::fixture;

use std::time::{Duration, Instant};

use agency_core::{AgentId, MailTarget, Principal};
use agency_daemon::{Daemon, Home};
use fixture::{
    command_agents, delegate_new, grant_mcp_server, home, home_with_config, mail_from_user,
    processes_of, start, text, wait_for,
};

fn home_with(script: &str) -> (tempfile::TempDir, Home) {
    home_with_extra(script, "")
}

fn home_with_extra(script: &str, extra: &str) -> (tempfile::TempDir, Home) {
    home_with_config(&command_agents(
        &format!("max_concurrent = 4\nstall_after_exits = 3\nrespawn_backoff_ms = 20\n{extra}"),
        script,
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_stop_leaves_no_process_in_the_agents_group() {
    let (_dir, home) = home_with("sleep 300 & sleep 300");
    let (daemon, svc, root) = start(&home).await;
    mail_from_user(&svc, root, "go");
    let root_agent = wait_for("the root's agent", || {
        svc.agents_live(Principal::User)
            .unwrap()
            .first()
            .map(|a| a.id)
    })
    .await;
    let u = delegate_new(&svc, Principal::agent(root, root_agent), root, "Work");
    let u_agent = wait_for("the underling's agent", || {
        svc.agents_live(Principal::User)
            .unwrap()
            .into_iter()
            .find(|a| a.handler == u)
            .map(|a| a.id)
    })
    .await;
    // Both sleeps run in one group of the agent's own, not the daemon's.
    let procs = wait_for("both sleeps", || {
        Some(processes_of(u_agent)).filter(|p| p.len() >= 2)
    })
    .await;
    let pgid = procs[0].1;
    assert!(procs.iter().all(|(_, g)| *g == pgid));
    assert_ne!(pgid, nix::unistd::getpgrp().as_raw() as u32);
    let report = svc.force_stop(Principal::User, u).unwrap();
    assert_eq!(report.agents_to_kill, vec![u_agent]);
    wait_for("the group to be empty", || {
        processes_of(u_agent).is_empty().then_some(())
    })
    .await;
    // The root's agent is untouched; stopping the daemon stops it too.
    assert!(processes_of(root_agent).len() >= 2);
    daemon.stop().await.unwrap();
    assert!(processes_of(root_agent).is_empty());
    let run = svc.agent_run(Principal::User, u_agent).unwrap();
    assert_eq!(run.runtime, "command");
    assert_eq!(run.prompt_hash.len(), 64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exits_without_progress_back_off_then_stall_and_tell_the_boss() {
    let (_dir, home) = home_with("exit 0");
    let (daemon, svc, root) = start(&home).await;
    let started = Instant::now();
    mail_from_user(&svc, root, "go");
    wait_for("the stall", || svc.handler_stalled(root).unwrap()).await;
    // Three agents ran; the backoff between them (20 ms, then 40 ms) shows.
    let agents = svc.agents_recent(Principal::User, Some(10)).unwrap();
    assert_eq!(agents.len(), 3, "{agents:?}");
    assert!(started.elapsed() >= Duration::from_millis(60));
    assert!(agents.iter().all(|a| a.ended_at.is_some()));
    // The boss (the user) was told, and Agency wrote the missing summaries.
    let inbox = svc.mail_inbox(Principal::User, None).unwrap();
    assert!(
        inbox.iter().any(|m| m.subject.starts_with("Stalled")),
        "{inbox:?}"
    );
    let log = svc.audit_read(Principal::User, Some(root)).unwrap();
    assert_eq!(
        log.iter()
            .filter(|e| e.summary.contains("without submitting an audit summary"))
            .count(),
        3
    );
    // No more spawns while stalled...
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        svc.agents_recent(Principal::User, Some(10)).unwrap().len(),
        3
    );
    // ...until new mail arrives.
    mail_from_user(&svc, root, "try again");
    wait_for("a fourth agent", || {
        (svc.agents_recent(Principal::User, Some(10)).unwrap().len() >= 4).then_some(())
    })
    .await;
    daemon.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_reaps_agents_left_live_and_delivers_mail_that_fell_due() {
    let (_dir, home) = home();
    let (root, ghost) = {
        let svc = home.open_service().unwrap();
        let root = svc.root_handler().unwrap().unwrap();
        let ghost = svc.agent_start(root).unwrap();
        let due = svc.now().plus_millis(-1000);
        svc.mail_send_deferred(
            Principal::agent(root, ghost),
            MailTarget::Handler(root),
            &text("reminder"),
            svc.now().plus_millis(50),
        )
        .unwrap();
        let _ = due;
        (root, ghost)
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    let daemon = Daemon::start(&home).await.unwrap();
    let svc = daemon.service().clone();
    assert!(svc.agents_live(Principal::User).unwrap().is_empty());
    let log = svc.audit_read(Principal::User, Some(root)).unwrap();
    assert!(
        log.iter()
            .any(|e| e.agent == Some(ghost) && e.summary.contains("reaped")),
        "{log:?}"
    );
    wait_for("the reminder", || {
        let h = svc.handler_view(Principal::User, root).unwrap();
        (h.inbox_depth == 1).then_some(())
    })
    .await;
    daemon.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_agent_is_stopped_as_stalled_and_its_group_emptied() {
    let (_dir, home) = home_with_extra("sleep 300 & sleep 300", "idle_timeout_ms = 400\n");
    let (daemon, svc, root) = start(&home).await;
    let started = Instant::now();
    mail_from_user(&svc, root, "go");
    let agent = wait_for("an agent", || {
        svc.agents_live(Principal::User)
            .unwrap()
            .first()
            .map(|a| a.id)
    })
    .await;
    wait_for("its processes", || {
        (processes_of(agent).len() >= 2).then_some(())
    })
    .await;
    let ended = wait_for("the idle stop", || {
        svc.agents_recent(Principal::User, Some(10))
            .unwrap()
            .into_iter()
            .find(|a| a.id == agent && a.ended_at.is_some())
    })
    .await;
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "stopped before the idle timeout"
    );
    assert!(
        ended
            .end_reason
            .as_deref()
            .unwrap_or("")
            .starts_with("stalled: no MCP call"),
        "{ended:?}"
    );
    wait_for("the group to be empty", || {
        processes_of(agent).is_empty().then_some(())
    })
    .await;
    daemon.stop().await.unwrap();
}

/// A home whose agents (shell scripts) copy the MCP configuration they
/// were given to `out/AGENT.json`, then wait; `toml(out)` is appended to its
/// agency.toml.
struct Recording {
    out: tempfile::TempDir,
    _dir: tempfile::TempDir,
    home: Home,
}

impl Recording {
    fn new(agents_extra: &str, toml: impl FnOnce(&std::path::Path) -> String) -> Recording {
        let out = tempfile::tempdir().unwrap();
        let script = format!(
            "cp \"$AGENCY_MCP_CONFIG\" {:?}/\"$AGENCY_AGENT\".json; exec sleep 300",
            out.path().display().to_string()
        );
        let (dir, home) = home_with_extra(&script, agents_extra);
        let mut cfg = std::fs::read_to_string(home.config_path()).unwrap();
        cfg.push_str(&toml(out.path()));
        std::fs::write(home.config_path(), cfg).unwrap();
        Recording {
            out,
            _dir: dir,
            home,
        }
    }

    /// The configuration a live agent other than `not` was given, once
    /// it has written it.
    async fn next_config(
        &self,
        svc: &agency_service::System,
        not: Option<AgentId>,
    ) -> (AgentId, serde_json::Value) {
        wait_for("an agent's MCP configuration", || {
            let a = svc
                .agents_live(Principal::User)
                .unwrap()
                .into_iter()
                .find(|a| Some(a.id) != not)?
                .id;
            let text = std::fs::read_to_string(self.out.path().join(format!("{a}.json"))).ok()?;
            Some((a, serde_json::from_str(&text).ok()?))
        })
        .await
    }
}

fn server_names(config: &serde_json::Value) -> Vec<String> {
    config["mcpServers"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect()
}

/// Issue 4: "a capability change restarts the agent with the new MCP
/// config". The agent (a shell script) keeps the MCP configuration it was
/// given and never exits by itself; granting its handler an extra MCP
/// server tells it to save state and exit (a message), stops it after the
/// grace period, and starts the next agent at once with the server in its
/// configuration — as a launcher entry, without the secret.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capability_change_restarts_the_agent_with_the_new_mcp_config() {
    let secret = format!("s3cr3t-{}", uuid::Uuid::new_v4().simple());
    let rec = Recording::new(
        "config_restart_grace_ms = 200\nagency_program = \"/opt/agency\"\n",
        |out| {
            std::fs::write(out.join("key"), &secret).unwrap();
            format!(
                "[secrets]\nk = {{ file = {:?} }}\n[mcp_servers.echo]\ncommand = \"echo-mcp\"\nenv = {{ ECHO_SECRET = \"${{secret:k}}\" }}\n",
                out.join("key").display().to_string()
            )
        },
    );
    let (daemon, svc, root) = start(&rec.home).await;
    mail_from_user(&svc, root, "go");
    let first = rec.next_config(&svc, None).await;
    assert_eq!(server_names(&first.1), ["agency"]);

    grant_mcp_server(&svc, root, "echo");
    let second = rec.next_config(&svc, Some(first.0)).await;
    let echo = &second.1["mcpServers"]["echo"];
    assert_eq!(echo["type"], "stdio");
    assert_eq!(echo["command"], "/opt/agency");
    assert_eq!(echo["args"], serde_json::json!(["mcp-launch", "echo"]));
    assert!(
        echo["env"]["AGENCY_MCP_URL"]
            .as_str()
            .unwrap()
            .ends_with("/mcp")
    );
    assert_eq!(server_names(&second.1), ["agency", "echo"]);
    assert!(!second.1.to_string().contains(&secret));

    // The first agent was told, then stopped; its group is empty.
    let subjects = svc.inbox_subjects(root, 20).unwrap();
    assert!(
        subjects
            .iter()
            .any(|s| s == "MCP servers changed: save state and exit"),
        "{subjects:?}"
    );
    let ended = svc
        .agents_recent(Principal::User, Some(10))
        .unwrap()
        .into_iter()
        .find(|a| a.id == first.0)
        .unwrap();
    assert_eq!(
        ended.end_reason.as_deref(),
        Some("restarted: its MCP servers changed")
    );
    assert!(processes_of(first.0).is_empty());
    daemon.stop().await.unwrap();
    assert!(processes_of(second.0).is_empty());
}

/// The other direction: losing an MCP-server capability (the user revokes
/// it) restarts the live agent without the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_mcp_server_restarts_the_agent_without_it() {
    let rec = Recording::new("config_restart_grace_ms = 200\n", |_| {
        "[mcp_servers.echo]\ncommand = \"echo-mcp\"\n".to_owned()
    });
    let (daemon, svc, root) = start(&rec.home).await;
    let cap = grant_mcp_server(&svc, root, "echo");
    mail_from_user(&svc, root, "go");
    let (first, config) = rec.next_config(&svc, None).await;
    assert_eq!(server_names(&config), ["agency", "echo"]);
    assert_eq!(svc.revoke(Principal::User, cap).unwrap(), vec![cap]);
    let (_, config) = rec.next_config(&svc, Some(first)).await;
    assert_eq!(server_names(&config), ["agency"]);
    // Revoked once; a second revocation finds no live capability, and an
    // agent may not revoke.
    assert!(svc.revoke(Principal::User, cap).is_err());
    assert!(svc.revoke(Principal::agent(root, first), cap).is_err());
    daemon.stop().await.unwrap();
}
