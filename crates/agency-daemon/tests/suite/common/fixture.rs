//! Fixtures shared by the daemon's integration tests: a fresh home (with
//! a given agency.toml), a daemon started on it, a `command`-runtime agent
//! configuration (a shell script as the agent), mail from the user, a
//! delegated outcome, an MCP-server grant, the processes carrying an
//! agent's mark, and waiting for a condition. Each test file includes it
//! with `#[path = "common/fixture.rs"] mod fixture;`.

// Each test binary compiles this file on its own and uses only part of it.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agency_core::{AgentId, CapabilityId, HandlerId, Level, MailTarget, Principal, Resource};
use agency_daemon::{Daemon, Home};
use agency_service::{GrantRequest, MailBody, NewOutcome, System};

/// A fresh, initialised home in a temporary directory (kept alive by the
/// returned `TempDir`).
pub fn home() -> (tempfile::TempDir, Home) {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path().join("home"));
    home.init().unwrap();
    (dir, home)
}

/// A fresh home whose agency.toml is `toml`.
pub fn home_with_config(toml: &str) -> (tempfile::TempDir, Home) {
    let (dir, home) = home();
    std::fs::write(home.config_path(), toml).unwrap();
    (dir, home)
}

/// An agency.toml whose agents are `sh -c SCRIPT` (the `command` runtime),
/// stopped after a 300 ms grace; `agents` adds keys to `[agents]`.
///
/// Unconfined (`sandbox = "off"`): confining runs `agency sandbox-exec`,
/// and an in-process daemon's executable is this test binary, not
/// `agency`. The sandbox is tested end to end with the real binary in
/// `agency-cli`'s tests (`sandbox_agents.rs`).
pub fn command_agents(agents: &str, script: &str) -> String {
    format!(
        "[agents]\nruntime = \"command\"\nkill_grace_ms = 300\nsandbox = \"off\"\n{agents}[agents.command]\nprogram = \"sh\"\nargs = [\"-c\", {script:?}]\n"
    )
}

/// The daemon started on `home`, its service and the root handler.
pub async fn start(home: &Home) -> (Daemon, Arc<System>, HandlerId) {
    let daemon = Daemon::start(home).await.unwrap();
    let svc = daemon.service().clone();
    let root = svc.root_handler().unwrap().unwrap();
    (daemon, svc, root)
}

pub fn text(t: &str) -> MailBody {
    MailBody::Text {
        subject: None,
        text: t.into(),
    }
}

/// The user mails `t` to handler `h`.
pub fn mail_from_user(svc: &System, h: HandlerId, t: &str) {
    svc.mail_send(Principal::User, MailTarget::Handler(h), &text(t))
        .unwrap();
}

/// `by` creates an outcome titled `title` under the root outcome of
/// `parent` and delegates it: the new handler.
pub fn delegate_new(svc: &System, by: Principal, parent: HandlerId, title: &str) -> HandlerId {
    let o = svc
        .outcome_create(
            by,
            &NewOutcome {
                title: title.into(),
                parents: vec![parent.root()],
                ..Default::default()
            },
        )
        .unwrap();
    svc.delegate(by, o, &[]).unwrap().handler
}

/// A read grant on the MCP server `name`.
pub fn mcp_server_read(name: &str) -> GrantRequest {
    GrantRequest {
        resource: Resource::McpServer(name.into()),
        level: Level::Read,
        delegatable: false,
    }
}

/// The user grants `h` read on the MCP server `name`.
pub fn grant_mcp_server(svc: &System, h: HandlerId, name: &str) -> CapabilityId {
    svc.grant(Principal::User, h, &mcp_server_read(name))
        .unwrap()
}

/// Polls `f` every 20 ms until it yields, failing after 20 s.
pub async fn wait_for<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Pids of the processes whose environment carries this agent's mark.
pub fn pids_of(agent: AgentId) -> Vec<u32> {
    let needle = format!("AGENCY_AGENT={agent}");
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(env) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if env.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()) {
            out.push(pid);
        }
    }
    out
}

/// Process ids whose environment names this agent, and their groups.
pub fn processes_of(agent: AgentId) -> Vec<(u32, u32)> {
    pids_of(agent)
        .into_iter()
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // Fields after the ")" of the command name: state ppid pgrp …
            let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
            let pgrp = rest
                .split_whitespace()
                .nth(2)
                .and_then(|p| p.parse().ok())
                .unwrap_or(0);
            Some((pid, pgrp))
        })
        .collect()
}
