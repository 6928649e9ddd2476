//! Property: random organisations under random grant / delegate / complete /
//! close / force-stop sequences never leave a live capability derived from a
//! revoked one, or scoped to a finished outcome, and no handler ever holds a
//! level its granter did not hold.

use std::collections::BTreeMap;

use agency_core::{FileId, HandlerId, Level, OutcomeId, Principal, Resource};
use agency_service::{CapOrigin, CapabilityRow, GrantRequest, HandlerStatus};
use agency_store::Tx;
use proptest::prelude::*;

use crate::support::Env;

#[derive(Debug, Clone)]
enum Op {
    /// Handler `h` creates an outcome under one it owns.
    Create { h: usize },
    /// Handler `h` creates a KB file.
    File { h: usize },
    /// Handler `h` delegates one of its outcomes, granting a file at a level.
    Delegate {
        h: usize,
        o: usize,
        f: usize,
        level: u8,
        delegatable: bool,
    },
    /// Handler `h` grants to one of its underlings.
    Grant {
        h: usize,
        u: usize,
        f: usize,
        level: u8,
        delegatable: bool,
    },
    /// The writer of outcome `o` completes (or closes) it.
    Finish { o: usize, close: bool },
    /// The user force-stops a handler.
    Stop { h: usize },
}

fn op() -> impl Strategy<Value = Op> {
    let i = 0usize..32;
    prop_oneof![
        2 => i.clone().prop_map(|h| Op::Create { h }),
        2 => i.clone().prop_map(|h| Op::File { h }),
        3 => (i.clone(), i.clone(), i.clone(), 0u8..3, any::<bool>())
            .prop_map(|(h, o, f, level, delegatable)| Op::Delegate { h, o, f, level, delegatable }),
        3 => (i.clone(), i.clone(), i.clone(), 0u8..3, any::<bool>())
            .prop_map(|(h, u, f, level, delegatable)| Op::Grant { h, u, f, level, delegatable }),
        2 => (i.clone(), any::<bool>()).prop_map(|(o, close)| Op::Finish { o, close }),
        1 => i.prop_map(|h| Op::Stop { h }),
    ]
}

fn level(l: u8) -> Level {
    Level::from_i64(i64::from(l)).unwrap()
}

/// Every capability row, live or revoked, read straight from the store.
fn all_caps(env: &Env) -> Vec<CapabilityRow> {
    agency_store::read(&**env.svc.store(), |tx: &mut dyn Tx| {
        let mut out = Vec::new();
        let mut id = 1;
        while let Some(c) = tx.capability(agency_core::CapabilityId(id))? {
            out.push(c);
            id += 1;
        }
        Ok::<_, agency_store::StoreError>(out)
    })
    .unwrap()
}

pub(crate) fn check_invariants(env: &Env) -> Result<(), TestCaseError> {
    let caps = all_caps(env);
    let by_id: BTreeMap<_, _> = caps.iter().map(|c| (c.id, c)).collect();
    for c in caps.iter().filter(|c| c.revoked_at.is_none()) {
        if let Some(p) = c.derived_from {
            let parent = by_id[&p];
            prop_assert!(
                parent.revoked_at.is_none(),
                "live {:?} derived from revoked {:?}",
                c,
                parent
            );
            prop_assert!(
                parent.level >= c.level,
                "{:?} exceeds its source {:?}",
                c,
                parent
            );
            prop_assert_eq!(
                Some(parent.holder),
                c.granted_by,
                "derived from a capability the granter did not hold"
            );
            prop_assert!(parent.delegatable);
        } else {
            prop_assert!(matches!(
                c.origin,
                CapOrigin::User
                    | CapOrigin::Creator
                    | CapOrigin::Mail
                    | CapOrigin::System
                    | CapOrigin::Handover
            ));
        }
        if let Some(scope) = c.scope {
            let o = env
                .svc
                .outcome_view(Principal::User, scope)
                .unwrap()
                .outcome;
            prop_assert!(
                !o.status.is_finished(),
                "live {:?} scoped to finished outcome",
                c
            );
        }
        let holder = env.svc.handler_view(Principal::User, c.holder).unwrap();
        prop_assert_eq!(
            holder.status,
            HandlerStatus::Active,
            "a deactivated handler holds {:?}",
            c
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: crate::support::proptest_cases(24), ..ProptestConfig::default() })]

    #[test]
    fn revocation_and_attenuation_hold(ops in proptest::collection::vec(op(), 1..50)) {
        let env = Env::new();
        let svc = &env.svc;
        let mut handlers: Vec<HandlerId> = vec![env.root];
        let mut outcomes: Vec<OutcomeId> = Vec::new();
        let mut files: Vec<FileId> = Vec::new();
        let active = |h: HandlerId| svc.handler_view(Principal::User, h).unwrap().status == HandlerStatus::Active;
        for op in ops {
            match op {
                Op::Create { h } => {
                    let h = handlers[h % handlers.len()];
                    if !active(h) { continue; }
                    let owned: Vec<OutcomeId> = svc.outcomes_of(Principal::User, h).unwrap().into_iter()
                        .filter(|o| !o.status.is_finished()).map(|o| o.id).collect();
                    if let Some(p) = owned.first() {
                        outcomes.push(env.outcome(h, "o", &[*p]));
                    }
                }
                Op::File { h } => {
                    let h = handlers[h % handlers.len()];
                    if !active(h) { continue; }
                    files.push(svc.kb_create(env.agent(h), "f", b"x").unwrap());
                }
                Op::Delegate { h, o, f, level: l, delegatable } => {
                    if outcomes.is_empty() { continue; }
                    let h = handlers[h % handlers.len()];
                    if !active(h) { continue; }
                    let o = outcomes[o % outcomes.len()];
                    let grants: Vec<GrantRequest> = files.get(f % files.len().max(1)).map(|f| GrantRequest {
                        resource: Resource::Kb(*f), level: level(l), delegatable,
                    }).into_iter().collect();
                    if let Ok(d) = svc.delegate(env.agent(h), o, &grants)
                        && !handlers.contains(&d.handler)
                    {
                        handlers.push(d.handler);
                    }
                }
                Op::Grant { h, u, f, level: l, delegatable } => {
                    if files.is_empty() { continue; }
                    let h = handlers[h % handlers.len()];
                    let u = handlers[u % handlers.len()];
                    if !active(h) { continue; }
                    let req = GrantRequest { resource: Resource::Kb(files[f % files.len()]), level: level(l), delegatable };
                    let _ = svc.grant(env.agent(h), u, &req);
                }
                Op::Finish { o, close } => {
                    if outcomes.is_empty() { continue; }
                    let o = outcomes[o % outcomes.len()];
                    // The writer of an outcome: the boss of the handler whose
                    // root it is, else its responsible handler.
                    let view = svc.outcome_view(Principal::User, o).unwrap();
                    let writer = match view.handler.map(|h| svc.handler_view(Principal::User, h).unwrap()) {
                        Some(hv) if hv.status == HandlerStatus::Active => hv.boss.unwrap(),
                        _ => view.outcome.responsible,
                    };
                    if !active(writer) { continue; }
                    let who = env.agent(writer);
                    let _ = if close { svc.outcome_close(who, o, "closed") } else { svc.outcome_complete(who, o, "done") };
                }
                Op::Stop { h } => {
                    let h = handlers[h % handlers.len()];
                    let _ = svc.force_stop(Principal::User, h);
                }
            }
            check_invariants(&env)?;
        }
    }
}

#[test]
fn revoke_selector_is_exercised() {
    // Guard against the property test passing vacuously: a scripted run
    // that is known to revoke derived capabilities at two levels.
    let env = Env::new();
    let svc = &env.svc;
    let r = env.agent(env.root);
    let f = svc.kb_create(r, "f", b"x").unwrap();
    let a = env.outcome(env.root, "a", &[env.root.root()]);
    let g = GrantRequest {
        resource: Resource::Kb(f),
        level: Level::Read,
        delegatable: true,
    };
    let u = svc
        .delegate(r, a, std::slice::from_ref(&g))
        .unwrap()
        .handler;
    let b = env.outcome(u, "b", &[a]);
    let u2 = svc
        .delegate(env.agent(u), b, std::slice::from_ref(&g))
        .unwrap()
        .handler;
    let report = svc.outcome_complete(r, a, "done").unwrap();
    let caps = all_caps(&env);
    let revoked_kb: Vec<_> = caps
        .iter()
        .filter(|c| c.resource == Resource::Kb(f) && c.revoked_at.is_some())
        .map(|c| c.holder)
        .collect();
    assert!(
        revoked_kb.contains(&u) && revoked_kb.contains(&u2),
        "{caps:?}"
    );
    assert!(report.revoked.len() >= 2);
}
