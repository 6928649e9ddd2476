//! Issue 9 item 4: escalated capabilities are outcome-scoped at every level.
//! A boss that lacks what its underling needs asks its own boss, which
//! grants it *for the underling's outcome*; finishing that outcome revokes
//! the grant at every level, the middle boss's included.

use agency_core::{FileId, HandlerId, Level, OutcomeId, Principal, Resource};
use agency_service::GrantRequest;

use crate::support::{Env, assert_kind};

fn kb(file: FileId, level: Level, delegatable: bool) -> GrantRequest {
    GrantRequest {
        resource: Resource::Kb(file),
        level,
        delegatable,
    }
}

/// root (holds `f`) -> b -> c, where c works on outcome `oc` below b's root.
fn chain(env: &Env) -> (FileId, HandlerId, HandlerId, OutcomeId) {
    let svc = &env.svc;
    let root = env.root;
    let f = svc
        .kb_create(env.agent(root), "credentials how-to", b"secret steps")
        .unwrap();
    let ob = env.outcome(root, "B", &[root.root()]);
    let b = svc.delegate(env.agent(root), ob, &[]).unwrap().handler;
    let oc = env.outcome(b, "C", &[ob]);
    let c = svc.delegate(env.agent(b), oc, &[]).unwrap().handler;
    (f, b, c, oc)
}

#[test]
fn issue9_item4_an_escalated_grant_ends_at_every_level_with_its_outcome() {
    let env = Env::new();
    let svc = &env.svc;
    let (f, b, c, oc) = chain(&env);
    let (pb, pc) = (env.agent(b), env.agent(c));
    // c asks b, b lacks it and asks the root, which grants it to b for c's
    // outcome; b passes it down (scoped to c's root by default).
    let up = svc
        .grant_for(env.agent(env.root), b, &kb(f, Level::Read, true), Some(oc))
        .unwrap();
    let down = svc.grant(pb, c, &kb(f, Level::Read, false)).unwrap();
    let scope_of = |who, id| {
        svc.permissions_list(who, None)
            .unwrap()
            .into_iter()
            .find(|x| x.id == id)
            .unwrap()
            .scope
    };
    assert_eq!(scope_of(pb, up), Some(oc));
    assert_eq!(scope_of(pc, down), Some(oc));
    svc.kb_read(pc, f).unwrap();
    svc.kb_read(pb, f).unwrap();
    // b keeps working on its own root after c's outcome is done.
    let report = svc.outcome_complete(pb, oc, "c delivered").unwrap();
    assert!(
        report.revoked.contains(&up) && report.revoked.contains(&down),
        "{report:?}"
    );
    assert_kind(svc.kb_read(pb, f), "not_found");
    assert!(
        svc.permissions_list(pb, None)
            .unwrap()
            .iter()
            .all(|x| x.resource != Resource::Kb(f))
    );
}

#[test]
fn issue9_item4_a_grant_for_an_outcome_below_the_grantee_ends_with_it() {
    // b passes it on for a child outcome of c's root: c loses it when that
    // child is done, though c's own root goes on.
    let env = Env::new();
    let svc = &env.svc;
    let (f, b, c, oc) = chain(&env);
    svc.grant(env.agent(env.root), b, &kb(f, Level::Read, true))
        .unwrap();
    let pc = env.agent(c);
    let step = env.outcome(c, "step", &[oc]);
    let cap = svc
        .grant_for(env.agent(b), c, &kb(f, Level::Read, false), Some(step))
        .unwrap();
    svc.kb_read(pc, f).unwrap();
    let report = svc.outcome_complete(pc, step, "done").unwrap();
    assert_eq!(report.revoked, vec![cap]);
    assert_kind(svc.kb_read(pc, f), "not_found");
    svc.kb_read(env.agent(b), f).unwrap();
}

#[test]
fn issue9_item4_a_grant_may_only_name_an_open_outcome_in_the_grantees_area() {
    let env = Env::new();
    let svc = &env.svc;
    let (f, b, c, oc) = chain(&env);
    let root = env.root;
    let pr = env.agent(root);
    let other = env.outcome(root, "elsewhere", &[root.root()]);
    // Outside b's area (a sibling, the why-chain above b): refused, so a
    // grant can never outlive the grantee's own work.
    for o in [other, root.root()] {
        let e = assert_kind(
            svc.grant_for(pr, b, &kb(f, Level::Read, false), Some(o)),
            "invalid_input",
        );
        assert!(e.to_string().contains("grantee's area"), "{e}");
    }
    // A finished outcome: refused.
    let done = env.outcome(c, "done already", &[oc]);
    svc.outcome_complete(env.agent(c), done, "ok").unwrap();
    assert_kind(
        svc.grant_for(pr, b, &kb(f, Level::Read, false), Some(done)),
        "invalid_input",
    );
    // An outcome the granter cannot see does not exist for it: b names
    // the root's sibling outcome when granting to c.
    svc.grant(pr, b, &kb(f, Level::Read, true)).unwrap();
    assert_kind(
        svc.grant_for(env.agent(b), c, &kb(f, Level::Read, false), Some(other)),
        "not_found",
    );
    // Nor a missing one; and the user is held to the same scope rule.
    assert_kind(
        svc.grant_for(
            pr,
            b,
            &kb(f, Level::Read, false),
            Some(OutcomeId::new_random()),
        ),
        "not_found",
    );
    assert_kind(
        svc.grant_for(Principal::User, c, &kb(f, Level::Read, false), Some(other)),
        "invalid_input",
    );
}
