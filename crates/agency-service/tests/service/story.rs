//! The seed's rules walked end to end: delegation with a restricted KB
//! capability, the delegation boundary, completion with revocation at every
//! level, and force-stop with reclaim of a whole subtree.

use agency_core::{Level, MailTarget, OutcomeStatus, Principal, Resource};
use agency_service::{GrantRequest, HandlerStatus, MailBody, OutcomeUpdate};

use crate::support::{Env, assert_kind};

fn text(t: &str) -> MailBody {
    MailBody::Text {
        subject: None,
        text: t.into(),
    }
}

#[test]
fn delegation_restricted_read_boundary_and_completion_revokes_at_every_level() {
    let env = Env::new();
    let svc = &env.svc;
    let root = env.root;
    let r = env.agent(root);

    // The user asks; the root handler gets a Process Inbox outcome and work.
    svc.mail_send(
        Principal::User,
        MailTarget::Handler(root),
        &text("Plan the garden"),
    )
    .unwrap();
    assert!(svc.has_work(root).unwrap());
    let inbox = svc.mail_inbox(r, None).unwrap();
    assert_eq!(inbox.len(), 1);
    assert_eq!(inbox[0].body.as_deref(), Some("Plan the garden"));

    // The root decomposes and writes a design document.
    let garden = env.outcome(root, "Garden planned", &[root.root()]);
    let design = svc.kb_create(r, "Garden design notes", b"beds: 4").unwrap();
    svc.mail_ack(r, &[inbox[0].id]).unwrap();

    // Delegate with the design restricted to Read, delegatable further.
    let grant = GrantRequest {
        resource: Resource::Kb(design),
        level: Level::Read,
        delegatable: true,
    };
    let d = svc
        .delegate(r, garden, std::slice::from_ref(&grant))
        .unwrap();
    let u = d.handler;
    assert_eq!(u.root(), garden);
    let ua = env.agent(u);

    // The underling reads but cannot write.
    let content = svc.kb_read(ua, design).unwrap();
    assert_eq!(content.content, b"beds: 4");
    let e = assert_kind(
        svc.kb_write(
            ua,
            design,
            b"beds: 5",
            content.version,
            content.hash.as_str(),
        ),
        "permission_denied",
    );
    assert!(e.to_string().contains("read access"), "{e}");
    // It may not escalate its own level by granting to itself or upwards.
    assert_kind(
        svc.grant(
            ua,
            root,
            &GrantRequest {
                resource: Resource::Kb(design),
                level: Level::Write,
                delegatable: false,
            },
        ),
        "permission_denied",
    );

    // The underling owns its subtree: creates and delegates further.
    let beds = env.outcome(u, "Beds laid out", &[garden]);
    let d2 = svc
        .delegate(ua, beds, std::slice::from_ref(&grant))
        .unwrap();
    let u2 = d2.handler;
    let u2a = env.agent(u2);
    assert_eq!(svc.kb_read(u2a, design).unwrap().content, b"beds: 4");
    let soil = env.outcome(u2, "Soil bought", &[beds]);

    // The underling's root is read-only to it.
    assert_kind(
        svc.outcome_update(
            ua,
            garden,
            &OutcomeUpdate {
                priority: Some(5),
                ..Default::default()
            },
        ),
        "permission_denied",
    );
    // The boss can no longer write below the delegated outcome...
    assert_kind(
        svc.outcome_create(
            r,
            &agency_service::NewOutcome {
                title: "meddle".into(),
                parents: vec![garden],
                ..Default::default()
            },
        ),
        "permission_denied",
    );
    assert_kind(
        svc.outcome_update(
            r,
            beds,
            &OutcomeUpdate {
                priority: Some(1),
                ..Default::default()
            },
        ),
        "permission_denied",
    );
    assert_kind(
        svc.outcome_close(r, soil, "not needed"),
        "permission_denied",
    );
    // ...and cannot reach the underling's underling (no skip-level).
    assert_kind(
        svc.mail_send(r, MailTarget::Handler(u2), &text("hurry")),
        "permission_denied",
    );
    assert_kind(svc.force_stop(r, u2), "not_found");
    // ...but can still read the whole delegated subtree.
    assert_eq!(
        svc.outcome_view(r, soil).unwrap().outcome.title,
        "Soil bought"
    );
    let sub = svc.outcome_subtree(r, garden, None).unwrap();
    assert_eq!(sub.outcomes.len(), 3);
    // The underlings see the why-chain up to the root.
    let chains = svc.outcome_ancestors(u2a, soil).unwrap();
    assert_eq!(chains.len(), 1);
    let ids: Vec<_> = chains[0].iter().map(|o| o.id).collect();
    assert_eq!(ids, vec![soil, beds, garden, root.root()]);

    // Completion is requested, the boss verifies and completes.
    svc.outcome_request_completion(ua, "the garden is planned; see kb design")
        .unwrap();
    let g = svc.outcome_view(r, garden).unwrap();
    assert_eq!(g.outcome.status, OutcomeStatus::AwaitingVerification);
    let boss_inbox = svc.mail_inbox(r, None).unwrap();
    assert!(
        boss_inbox
            .iter()
            .any(|m| m.subject.starts_with("Completion requested")),
        "{boss_inbox:?}"
    );
    let report = svc.outcome_complete(r, garden, "verified").unwrap();

    // Revoked at both levels, handlers retired, processes to kill listed.
    let u_caps = svc.permissions_list(Principal::User, Some(u)).unwrap();
    let u2_caps = svc.permissions_list(Principal::User, Some(u2)).unwrap();
    assert!(u_caps.is_empty(), "{u_caps:?}");
    assert!(u2_caps.is_empty(), "{u2_caps:?}");
    assert_eq!(report.retired_handlers.len(), 2);
    assert!(report.agents_to_kill.contains(&ua.agent_id().unwrap()));
    assert!(report.agents_to_kill.contains(&u2a.agent_id().unwrap()));
    assert_kind(svc.kb_read(ua, design), "permission_denied");
    assert_eq!(
        svc.handler_view(Principal::User, u).unwrap().status,
        HandlerStatus::Deactivated
    );
    // The boss still holds its own Write on the design.
    let latest = svc.kb_read(r, design).unwrap();
    svc.kb_write(r, design, b"beds: 6", latest.version, latest.hash.as_str())
        .unwrap();
    assert_eq!(
        svc.outcome_view(r, garden).unwrap().outcome.status,
        OutcomeStatus::Completed
    );
}

#[test]
fn force_stop_reclaims_the_whole_subtree() {
    let env = Env::new();
    let svc = &env.svc;
    let root = env.root;
    let r = env.agent(root);
    let house = env.outcome(root, "House built", &[root.root()]);
    let v = svc.delegate(r, house, &[]).unwrap().handler;
    let va = env.agent(v);
    let walls = env.outcome(v, "Walls up", &[house]);
    let roof = env.outcome(v, "Roof on", &[house]);
    let v2 = svc.delegate(va, walls, &[]).unwrap().handler;
    let v2a = env.agent(v2);
    let bricks = env.outcome(v2, "Bricks ordered", &[walls]);
    let note = svc.kb_create(v2a, "brick supplier", b"acme").unwrap();

    // A boss may stop only its direct underling.
    assert_kind(svc.force_stop(va, root), "permission_denied");
    let report = svc.force_stop(r, v).unwrap();
    assert_eq!(report.new_owner, root);
    let mut stopped = report.handlers.clone();
    stopped.sort();
    let mut want = vec![v, v2];
    want.sort();
    assert_eq!(stopped, want);
    let mut killed = report.agents_to_kill.clone();
    killed.sort();
    let mut want_killed = vec![va.agent_id().unwrap(), v2a.agent_id().unwrap()];
    want_killed.sort();
    assert_eq!(killed, want_killed);
    assert_eq!(report.outcomes_reclaimed, 4);

    // Every outcome of the subtree is the boss's again, with Write.
    for o in [house, walls, roof, bricks] {
        let view = svc.outcome_view(r, o).unwrap();
        assert_eq!(view.outcome.responsible, root, "{o}");
        assert_eq!(view.access, agency_core::OutcomeAccess::Write, "{o}");
    }
    svc.outcome_update(
        r,
        bricks,
        &OutcomeUpdate {
            priority: Some(3),
            ..Default::default()
        },
    )
    .unwrap();
    // The stopped agents can no longer act; their handlers' state is kept.
    assert_kind(svc.kb_read(v2a, note), "permission_denied");
    assert!(
        svc.permissions_list(Principal::User, Some(v2))
            .unwrap()
            .is_empty()
    );
    let log = svc.audit_read(Principal::User, Some(v2)).unwrap();
    assert!(
        log.last().unwrap().summary.contains("force-stopped"),
        "{log:?}"
    );
    assert!(svc.state_read(Principal::User, Some(v)).is_ok());
    assert!(!svc.handlers_with_work(None, 100).unwrap().contains(&v));

    // Re-delegating brings the handler back with its documents.
    let again = svc.delegate(r, house, &[]).unwrap();
    assert!(again.reactivated);
    assert_eq!(again.handler, v);
    assert_eq!(
        svc.handler_view(Principal::User, v).unwrap().status,
        HandlerStatus::Active
    );
    assert_eq!(svc.outcome_view(r, bricks).unwrap().outcome.responsible, v);
}

#[test]
fn the_user_may_stop_any_handler_but_not_the_root() {
    let env = Env::new();
    let svc = &env.svc;
    let r = env.agent(env.root);
    let a = env.outcome(env.root, "A", &[env.root.root()]);
    let ha = svc.delegate(r, a, &[]).unwrap().handler;
    let b = env.outcome(ha, "B", &[a]);
    let hb = svc.delegate(env.agent(ha), b, &[]).unwrap().handler;
    assert_kind(svc.force_stop(Principal::User, env.root), "invalid_input");
    // A deep handler: its boss re-owns its outcomes.
    let report = svc.force_stop(Principal::User, hb).unwrap();
    assert_eq!(report.new_owner, ha);
    assert_eq!(report.handlers, vec![hb]);
    assert_eq!(
        svc.outcome_view(Principal::User, b)
            .unwrap()
            .outcome
            .responsible,
        ha
    );
    assert_kind(svc.force_stop(Principal::User, hb), "invalid_input");
}
