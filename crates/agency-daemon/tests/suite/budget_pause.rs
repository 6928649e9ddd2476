//! Issue 11 items 3 and 7 with the daemon's scheduler: a handler whose
//! budget is reached is not started (the refused start pauses its subtree
//! and mails the user, and the scheduler leaves it alone), `resume`
//! schedules its pending work again, and raising the limit lets its agent
//! start.

#![allow(clippy::unwrap_used)]

use crate::fixture;

use agency_core::Principal;
use agency_service::{BudgetLimits, System};
use fixture::{command_agents, home_with_config, mail_from_user, start, wait_for};

fn spawns(n: i64) -> BudgetLimits {
    BudgetLimits {
        spawns: Some(n),
        ..BudgetLimits::default()
    }
}

fn pause_mails(svc: &System) -> usize {
    svc.mail_inbox(Principal::User, None)
        .unwrap()
        .iter()
        .filter(|m| m.subject.starts_with("Budget reached"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_handler_is_not_started_until_resumed_or_raised() {
    let (_dir, home) = home_with_config(&command_agents(
        "max_concurrent = 4\nrespawn_backoff_ms = 20\n",
        "sleep 300",
    ));
    let (daemon, svc, root) = start(&home).await;
    svc.budget_set(Principal::User, root, spawns(0)).unwrap();
    mail_from_user(&svc, root, "go");
    // The start is refused: the subtree pauses and the user is told once.
    wait_for("the pause", || svc.budget_paused(root).unwrap()).await;
    wait_for("the pause mail", || (pause_mails(&svc) == 1).then_some(())).await;
    assert!(svc.agents_live(Principal::User).unwrap().is_empty());
    // More work for the paused handler starts nothing and tells no one again.
    mail_from_user(&svc, root, "and this");
    assert!(svc.agents_recent(Principal::User, None).unwrap().is_empty());

    // Resumed as it is: the pending work is scheduled again, the start is
    // refused again, and the subtree pauses again.
    let r = svc.budget_resume(Principal::User, root).unwrap();
    assert_eq!(r.resumed, vec![root]);
    wait_for("the second pause mail", || {
        (pause_mails(&svc) == 2).then_some(())
    })
    .await;
    assert!(svc.budget_paused(root).unwrap().is_some());

    // Raised: the agent starts.
    svc.budget_set(Principal::User, root, spawns(1)).unwrap();
    let agent = wait_for("the root's agent", || {
        svc.agents_live(Principal::User)
            .unwrap()
            .into_iter()
            .find(|a| a.handler == root)
    })
    .await;
    assert_eq!(
        svc.budget_show(Principal::User, None).unwrap().spent.spawns,
        1,
        "{agent:?}"
    );
    daemon.stop().await.unwrap();
}
