//! Issue 14 item 1: the end of an agent the supervisor did not spawn (an
//! attached client whose token the user revokes) triggers the spawn
//! decision for its handler, which still has work; and revoking the token
//! of an agent the supervisor did spawn stops its process.

#![allow(clippy::unwrap_used)]

use crate::fixture;

use std::time::Duration;

use agency_core::Principal;
use fixture::{command_agents, home_with_config, mail_from_user, pids_of, start, wait_for};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue14_item1_revoking_an_attached_agent_starts_one_for_the_handler_with_work() {
    let (_dir, home) = home_with_config(&command_agents("", "exec sleep 300"));
    let (daemon, svc, root) = start(&home).await;
    // An MCP client attaches as the root's agent; mail arrives while it is
    // there, so the supervisor starts nothing.
    let external = svc.token_mint(Principal::User, root, None).unwrap();
    mail_from_user(&svc, root, "go");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let live = svc.agents_live(Principal::User).unwrap();
    assert_eq!(live.len(), 1);
    assert_eq!(live[0].id, external.agent);

    // The user revokes the client's token: work remains, so an agent of
    // the runtime is started without waiting for new mail.
    assert!(svc.token_revoke(Principal::User, external.agent).unwrap());
    let spawned = wait_for("an agent started by the supervisor", || {
        svc.agents_live(Principal::User)
            .unwrap()
            .into_iter()
            .find(|a| a.id != external.agent)
    })
    .await;
    assert_eq!(spawned.handler, root);
    wait_for("its process", || has_process(spawned.id).then_some(())).await;

    // Revoking the spawned agent's token stops its process; the handler
    // still has work, so the next one starts.
    assert!(svc.token_revoke(Principal::User, spawned.id).unwrap());
    wait_for("the spawned agent's process to end", || {
        (!has_process(spawned.id)).then_some(())
    })
    .await;
    let next = wait_for("the next agent", || {
        svc.agents_live(Principal::User)
            .unwrap()
            .into_iter()
            .find(|a| a.id != external.agent && a.id != spawned.id)
    })
    .await;
    assert_eq!(next.handler, root);
    let ended = svc
        .agents_recent(Principal::User, Some(10))
        .unwrap()
        .into_iter()
        .find(|a| a.id == spawned.id)
        .unwrap();
    assert_eq!(ended.end_reason.as_deref(), Some("token_revoked"));
    daemon.stop().await.unwrap();
}

/// Whether a process carries this agent's mark in its environment.
fn has_process(agent: agency_core::AgentId) -> bool {
    !pids_of(agent).is_empty()
}
