//! Outcome behaviour: creation, updates, cycles, views, the Markdown file,
//! the work query and the events the daemon reacts to.

use agency_core::{OutcomeId, OutcomeStatus, Principal};
use agency_service::{Event, NewOutcome, OutcomeUpdate};

use crate::support::{Env, assert_kind};

#[test]
fn diamond_ancestors_subtree_and_markdown_links() {
    let env = Env::new();
    let svc = &env.svc;
    let root = env.root.root();
    let r = env.agent(env.root);
    let left = env.outcome(env.root, "Left", &[root]);
    let right = env.outcome(env.root, "Right", &[root]);
    let bottom = env.outcome(env.root, "Bottom", &[left, right]);
    let chains = svc.outcome_ancestors(r, bottom).unwrap();
    let mut ids: Vec<Vec<OutcomeId>> = chains
        .iter()
        .map(|c| c.iter().map(|o| o.id).collect())
        .collect();
    ids.sort();
    let mut want = vec![vec![bottom, left, root], vec![bottom, right, root]];
    want.sort();
    assert_eq!(ids, want);
    let sub = svc.outcome_subtree(r, left, None).unwrap();
    assert_eq!(
        sub.outcomes.iter().map(|o| o.id).collect::<Vec<_>>(),
        vec![left, bottom]
    );
    assert_eq!(sub.edges, vec![(left, bottom)]);
    let view = svc.outcome_view(r, bottom).unwrap();
    assert_eq!(view.parents.len(), 2);
    assert_eq!(view.outcome.responsible, env.root);
    assert_eq!(view.history[0].action, "created");
    // The Markdown file links both ways, a new version per change.
    let md = svc.kb_read(r, left.file()).unwrap();
    assert!(
        md.text().contains(&format!("kb://{bottom}")),
        "{}",
        md.text()
    );
    assert!(md.text().contains(&format!("kb://{root}")));
    let bottom_md = svc.kb_read(r, bottom.file()).unwrap();
    svc.outcome_update(
        r,
        bottom,
        &OutcomeUpdate {
            title: Some("Bottom line".into()),
            ..Default::default()
        },
    )
    .unwrap();
    let after = svc.kb_read(r, bottom.file()).unwrap();
    assert_eq!(after.version, bottom_md.version + 1);
    assert!(after.text().starts_with("# Outcome: Bottom line"));
}

#[test]
fn cycles_and_orphans_are_refused() {
    let env = Env::new();
    let svc = &env.svc;
    let root = env.root.root();
    let r = env.agent(env.root);
    let a = env.outcome(env.root, "A", &[root]);
    let b = env.outcome(env.root, "B", &[a]);
    let c = env.outcome(env.root, "C", &[b]);
    let reparent = |o, ps: Vec<OutcomeId>| {
        svc.outcome_update(
            r,
            o,
            &OutcomeUpdate {
                parents: Some(ps),
                ..Default::default()
            },
        )
    };
    let e = assert_kind(reparent(a, vec![c]), "invalid_input");
    assert!(e.to_string().contains("cycle"), "{e}");
    assert_kind(reparent(a, vec![a]), "invalid_input");
    assert_kind(reparent(a, vec![]), "invalid_input");
    assert_kind(reparent(root, vec![a]), "permission_denied");
    // A legal re-parent moves the edge and re-renders both parents.
    reparent(c, vec![a]).unwrap();
    assert_eq!(svc.outcome_view(r, c).unwrap().parents[0].id, a);
    assert!(svc.outcome_view(r, b).unwrap().children.is_empty());
}

#[test]
fn statuses_and_the_work_query() {
    let env = Env::new();
    let svc = &env.svc;
    let r = env.agent(env.root);
    // The perpetual root alone is not work.
    assert!(svc.handlers_with_work(None, 10).unwrap().is_empty());
    let a = env.outcome(env.root, "A", &[env.root.root()]);
    assert_eq!(svc.handlers_with_work(None, 10).unwrap(), vec![env.root]);
    let blocked = svc
        .outcome_update(
            r,
            a,
            &OutcomeUpdate {
                status: Some(OutcomeStatus::Blocked),
                reason: Some("waiting".into()),
                ..Default::default()
            },
        )
        .unwrap();
    assert_eq!(blocked.status_reason.as_deref(), Some("waiting"));
    assert!(!svc.has_work(env.root).unwrap());
    assert_kind(
        svc.outcome_update(
            r,
            a,
            &OutcomeUpdate {
                status: Some(OutcomeStatus::Blocked),
                ..Default::default()
            },
        ),
        "invalid_input",
    );
    assert_kind(
        svc.outcome_update(
            r,
            a,
            &OutcomeUpdate {
                status: Some(OutcomeStatus::Completed),
                ..Default::default()
            },
        ),
        "invalid_input",
    );
    svc.outcome_update(
        r,
        a,
        &OutcomeUpdate {
            status: Some(OutcomeStatus::Open),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(svc.has_work(env.root).unwrap());
    svc.outcome_close(r, a, "disproven: the market does not exist")
        .unwrap();
    let md = svc.kb_read(r, a.file()).unwrap().text();
    assert!(
        md.contains("Closing rationale") && md.contains("the market does not exist"),
        "{md}"
    );
    assert_kind(svc.outcome_complete(r, a, "again"), "invalid_input");
    assert_kind(
        svc.outcome_close(r, env.root.root(), "enough"),
        "permission_denied",
    );
    assert_kind(
        svc.outcome_complete(Principal::User, env.root.root(), "enough"),
        "invalid_input",
    );
    assert_kind(svc.outcome_complete(r, a, " "), "invalid_input");
    assert!(!svc.has_work(env.root).unwrap());
}

#[test]
fn awaiting_verification_stops_work_until_the_boss_decides() {
    let env = Env::new();
    let svc = &env.svc;
    let r = env.agent(env.root);
    let a = env.outcome(env.root, "A", &[env.root.root()]);
    let h = svc.delegate(r, a, &[]).unwrap().handler;
    let p = env.agent(h);
    assert!(svc.has_work(h).unwrap());
    svc.outcome_request_completion(p, "done, I think").unwrap();
    assert!(!svc.has_work(h).unwrap());
    assert_kind(svc.outcome_request_completion(p, "really"), "invalid_input");
    assert_kind(
        svc.outcome_request_completion(r, "root is perpetual"),
        "invalid_input",
    );
    // The boss rejects: back to open, and the underling is told.
    svc.outcome_update(
        r,
        a,
        &OutcomeUpdate {
            status: Some(OutcomeStatus::Open),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(svc.has_work(h).unwrap());
    let inbox = svc.mail_inbox(p, None).unwrap();
    assert!(
        inbox
            .iter()
            .any(|m| m.subject.starts_with("Your outcome changed")),
        "{inbox:?}"
    );
}

#[test]
fn events_follow_commits() {
    let env = Env::new();
    let svc = &env.svc;
    let r = env.agent(env.root);
    let mut rx = svc.subscribe();
    let a = env.outcome(env.root, "A", &[env.root.root()]);
    let d = svc.delegate(r, a, &[]).unwrap();
    let failed = svc.outcome_create(
        r,
        &NewOutcome {
            title: "".into(),
            parents: vec![a],
            ..Default::default()
        },
    );
    assert!(failed.is_err());
    let report = svc.force_stop(r, d.handler).unwrap();
    let mut got = Vec::new();
    while let Ok(e) = rx.try_recv() {
        got.push(e);
    }
    assert!(got.contains(&Event::OutcomeStatusChanged {
        outcome: a,
        responsible: env.root,
        status: OutcomeStatus::Open
    }));
    assert!(got.contains(&Event::HandlerCreated {
        handler: d.handler,
        boss: Some(env.root)
    }));
    assert!(got.contains(&Event::HandlerStopped {
        handler: d.handler,
        agents: report.agents_to_kill.clone()
    }));
    assert!(
        got.iter()
            .any(|e| matches!(e, Event::CapabilityRevoked { holder, .. } if *holder == d.handler))
    );
}

#[test]
fn the_user_reads_everything_but_decomposes_through_mail() {
    let env = Env::new();
    let svc = &env.svc;
    let a = env.outcome(env.root, "A", &[env.root.root()]);
    assert!(svc.outcome_view(Principal::User, a).is_ok());
    assert_kind(
        svc.outcome_create(
            Principal::User,
            &NewOutcome {
                title: "x".into(),
                parents: vec![a],
                ..Default::default()
            },
        ),
        "invalid_input",
    );
    assert_kind(
        svc.outcome_view(Principal::User, OutcomeId::new_random()),
        "not_found",
    );
    // An agent that is not live cannot act.
    let ghost = Principal::agent(env.root, agency_core::AgentId::new_random());
    assert_kind(svc.outcome_view(ghost, a), "permission_denied");
}

#[test]
fn a_handler_may_block_its_own_root_while_it_waits_but_change_nothing_else() {
    let env = Env::new();
    let svc = &env.svc;
    let r = env.agent(env.root);
    let a = env.outcome(env.root, "A", &[env.root.root()]);
    let h = svc.delegate(r, a, &[]).unwrap().handler;
    let p = env.agent(h);
    let block = OutcomeUpdate {
        status: Some(OutcomeStatus::Blocked),
        reason: Some("waiting for my underling".into()),
        ..Default::default()
    };
    svc.outcome_update(p, a, &block).unwrap();
    assert!(!svc.has_work(h).unwrap(), "a waiting handler has no work");
    assert_kind(
        svc.outcome_update(
            p,
            a,
            &OutcomeUpdate {
                status: Some(OutcomeStatus::Open),
                title: Some("Mine now".into()),
                ..Default::default()
            },
        ),
        "permission_denied",
    );
    svc.outcome_update(
        p,
        a,
        &OutcomeUpdate {
            status: Some(OutcomeStatus::Open),
            ..Default::default()
        },
    )
    .unwrap();
    assert!(svc.has_work(h).unwrap());
    svc.outcome_request_completion(p, "done").unwrap();
    assert_kind(
        svc.outcome_update(
            p,
            a,
            &OutcomeUpdate {
                status: Some(OutcomeStatus::Open),
                ..Default::default()
            },
        ),
        "invalid_input",
    );
}
