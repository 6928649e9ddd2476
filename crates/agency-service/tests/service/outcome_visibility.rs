//! Issue 9 item 1: walks over outcomes (`outcome_subtree`,
//! `outcome_ancestors`) show a handler only the outcomes `outcome_view`
//! lets it see, and a handler cannot touch the parent edges of its own root.

use std::collections::BTreeSet;

use agency_core::{HandlerId, OutcomeId, Principal};
use agency_service::{OutcomeUpdate, Service};

use crate::support::{Env, assert_kind};

/// Every outcome in the store (the user sees them all).
fn all_outcomes(svc: &Service, root: OutcomeId) -> Vec<OutcomeId> {
    svc.outcome_subtree(Principal::User, root, None)
        .unwrap()
        .outcomes
        .iter()
        .map(|o| o.id)
        .collect()
}

fn ids_of_subtree(svc: &Service, who: Principal, id: OutcomeId) -> BTreeSet<OutcomeId> {
    svc.outcome_subtree(who, id, None)
        .unwrap()
        .outcomes
        .iter()
        .map(|o| o.id)
        .collect()
}

/// A small organisation: the root handler delegated A and B; A's handler
/// delegated A1; each has work of its own.
struct Org {
    env: Env,
    a: OutcomeId,
    b: OutcomeId,
    ua: HandlerId,
    ub: HandlerId,
    ua1: HandlerId,
    a_work: OutcomeId,
    b_work: OutcomeId,
    a1_work: OutcomeId,
}

fn org() -> Org {
    let env = Env::new();
    let svc = env.svc.clone();
    let r = env.agent(env.root);
    let a = env.outcome(env.root, "A: ship the app", &[env.root.root()]);
    let b = env.outcome(env.root, "B: secret acquisition", &[env.root.root()]);
    let ua = svc.delegate(r, a, &[]).unwrap().handler;
    let ub = svc.delegate(r, b, &[]).unwrap().handler;
    let a_work = env.outcome(ua, "A's own work", &[a]);
    let a1 = env.outcome(ua, "A1: the backend", &[a]);
    let ua1 = svc.delegate(env.agent(ua), a1, &[]).unwrap().handler;
    let a1_work = env.outcome(ua1, "A1's work", &[a1]);
    let b_work = env.outcome(ub, "B's hidden work", &[b]);
    Org {
        env,
        a,
        b,
        ua,
        ub,
        ua1,
        a_work,
        b_work,
        a1_work,
    }
}

#[test]
fn issue9_item1_subtree_of_the_perpetual_root_hides_siblings_work() {
    let o = org();
    let svc = &o.env.svc;
    let root = o.env.root.root();
    let leaf = o.env.agent(o.ua1);
    let sub = svc.outcome_subtree(leaf, root, None).unwrap();
    let ids: Vec<OutcomeId> = sub.outcomes.iter().map(|x| x.id).collect();
    // The why-chain down to its root, then its own subtree; nothing of B's
    // or of A's other work.
    assert_eq!(ids, vec![root, o.a, o.ua1.root(), o.a1_work]);
    for hidden in [o.b, o.b_work, o.a_work] {
        assert!(!ids.contains(&hidden), "{hidden} leaked");
    }
    assert!(!sub.truncated);
    let mut edges = sub.edges.clone();
    edges.sort();
    let mut want = vec![(root, o.a), (o.a, o.ua1.root()), (o.ua1.root(), o.a1_work)];
    want.sort();
    assert_eq!(edges, want);
    // No title of an invisible outcome anywhere in the answer.
    let text = format!("{sub:?}");
    assert!(!text.contains("secret acquisition"), "{text}");
    // A limit counts only what is shown and says when more exists.
    let two = svc.outcome_subtree(leaf, root, Some(2)).unwrap();
    assert_eq!(
        two.outcomes.iter().map(|x| x.id).collect::<Vec<_>>(),
        vec![root, o.a]
    );
    assert!(two.truncated);
    assert_eq!(two.edges, vec![(root, o.a)]);
}

#[test]
fn issue9_item1_every_walk_agrees_with_outcome_view() {
    let o = org();
    let svc = &o.env.svc;
    let root = o.env.root.root();
    let everything = all_outcomes(svc, root);
    for h in [o.env.root, o.ua, o.ub, o.ua1] {
        let who = o.env.agent(h);
        let visible: BTreeSet<OutcomeId> = everything
            .iter()
            .copied()
            .filter(|x| svc.outcome_view(who, *x).is_ok())
            .collect();
        for &start in &visible {
            let below: BTreeSet<OutcomeId> = ids_of_subtree(svc, Principal::User, start);
            let want: BTreeSet<OutcomeId> = below.intersection(&visible).copied().collect();
            assert_eq!(
                ids_of_subtree(svc, who, start),
                want,
                "subtree of {start} as {h}"
            );
            for chain in svc.outcome_ancestors(who, start).unwrap() {
                for x in chain {
                    assert!(visible.contains(&x.id), "ancestor {} shown to {h}", x.id);
                }
            }
        }
    }
}

#[test]
fn issue9_item1_ancestors_never_pass_through_an_invisible_second_parent() {
    let env = Env::new();
    let svc = &env.svc;
    let root = env.root.root();
    let r = env.agent(env.root);
    let o1 = env.outcome(env.root, "O1", &[root]);
    let o2 = env.outcome(env.root, "O2: the boss's private plan", &[root]);
    let n = env.outcome(env.root, "N", &[o1, o2]);
    // Delegating O1 moves N (the boss's, below O1) to the new handler; N
    // keeps its second parent O2, which the new handler may not see.
    let u = svc.delegate(r, o1, &[]).unwrap().handler;
    let p = env.agent(u);
    assert_eq!(svc.outcome_view(p, n).unwrap().outcome.responsible, u);
    assert_kind(svc.outcome_view(p, o2), "not_found");
    let chains: Vec<Vec<OutcomeId>> = svc
        .outcome_ancestors(p, n)
        .unwrap()
        .iter()
        .map(|c| c.iter().map(|x| x.id).collect())
        .collect();
    assert_eq!(chains, vec![vec![n, o1, root]]);
    assert!(!format!("{:?}", svc.outcome_ancestors(p, n).unwrap()).contains("private plan"));
    // The boss still sees both chains, and so does the user.
    for who in [r, Principal::User] {
        assert_eq!(svc.outcome_ancestors(who, n).unwrap().len(), 2);
    }
    // Nor does the subtree of the perpetual root show O2.
    let ids = ids_of_subtree(svc, p, root);
    assert_eq!(ids, BTreeSet::from([root, o1, n]));
}

#[test]
fn issue9_item1_an_underling_cannot_change_the_parent_edges_of_its_root() {
    let env = Env::new();
    let svc = &env.svc;
    let root = env.root.root();
    let r = env.agent(env.root);
    let p1 = env.outcome(env.root, "P1", &[root]);
    let p2 = env.outcome(env.root, "P2", &[root]);
    let a = env.outcome(env.root, "A", &[p1, p2]);
    let u = svc.delegate(r, a, &[]).unwrap().handler;
    let p = env.agent(u);
    let mine = env.outcome(u, "mine", &[a]);
    let set_parents = |id: OutcomeId, ps: Vec<OutcomeId>, status| {
        svc.outcome_update(
            p,
            id,
            &OutcomeUpdate {
                parents: Some(ps),
                status,
                reason: status.map(|_| "waiting".to_owned()),
                ..Default::default()
            },
        )
    };
    // A prompt-injected agent tries to drop one of the edges its boss made,
    // to move its root elsewhere, or to sneak it in with a status change.
    for ps in [vec![p1], vec![p2], vec![root], vec![p1, p2, root]] {
        let e = assert_kind(set_parents(a, ps.clone(), None), "permission_denied");
        assert!(e.to_string().starts_with("failed to update outcome"), "{e}");
        assert_kind(
            set_parents(a, ps, Some(agency_core::OutcomeStatus::Blocked)),
            "permission_denied",
        );
    }
    // Re-parenting its own outcome cannot reach the root's edges either:
    // the boss's outcomes are not its to add children under.
    assert_kind(set_parents(mine, vec![p1], None), "permission_denied");
    let view = svc.outcome_view(r, a).unwrap();
    let parents: BTreeSet<OutcomeId> = view.parents.iter().map(|x| x.id).collect();
    assert_eq!(parents, BTreeSet::from([p1, p2]));
    assert_eq!(view.outcome.status, agency_core::OutcomeStatus::Open);
    // The boss may.
    svc.outcome_update(
        r,
        a,
        &OutcomeUpdate {
            parents: Some(vec![p1]),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(svc.outcome_view(r, a).unwrap().parents.len(), 1);
}
