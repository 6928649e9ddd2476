//! Property: random sequences of outcome creations and re-parentings through
//! the real service never produce a cycle, and the service refuses exactly
//! the edits an independent model says would close one.

use agency_core::OutcomeId;
use agency_core::dag::DagModel;
use agency_service::{OutcomeUpdate, ServiceError};
use proptest::prelude::*;

use crate::support::Env;

#[derive(Debug, Clone)]
enum Op {
    Create { parents: Vec<usize> },
    Reparent { node: usize, parents: Vec<usize> },
}

fn op() -> impl Strategy<Value = Op> {
    let parents = proptest::collection::vec(0usize..64, 1..4);
    prop_oneof![
        parents.clone().prop_map(|parents| Op::Create { parents }),
        (0usize..64, parents).prop_map(|(node, parents)| Op::Reparent { node, parents }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: crate::support::proptest_cases(24), ..ProptestConfig::default() })]

    #[test]
    fn dag_edits_never_make_a_cycle(ops in proptest::collection::vec(op(), 1..40)) {
        let env = Env::new();
        let svc = &env.svc;
        let r = env.agent(env.root);
        let root = env.root.root();
        let mut nodes: Vec<OutcomeId> = vec![root];
        let mut model = DagModel::new();
        for op in ops {
            match op {
                Op::Create { parents } => {
                    let ps: Vec<OutcomeId> = parents.iter().map(|i| nodes[i % nodes.len()]).collect();
                    let id = env.outcome(env.root, &format!("n{}", nodes.len()), &ps);
                    for p in &ps {
                        prop_assert!(model.add_edge(*p, id));
                    }
                    nodes.push(id);
                }
                Op::Reparent { node, parents } => {
                    if nodes.len() < 2 { continue; }
                    let n = nodes[1 + node % (nodes.len() - 1)];
                    let mut ps: Vec<OutcomeId> = parents.iter().map(|i| nodes[i % nodes.len()]).collect();
                    ps.sort();
                    ps.dedup();
                    let mut trial = model.clone();
                    let old: Vec<(OutcomeId, OutcomeId)> = trial.edges().filter(|(_, c)| *c == n).collect();
                    for (p, c) in &old { trial.remove_edge(*p, *c); }
                    let would_cycle = ps.iter().any(|p| trial.would_cycle(*p, n));
                    let res = svc.outcome_update(r, n, &OutcomeUpdate { parents: Some(ps.clone()), ..Default::default() });
                    match res {
                        Ok(_) => {
                            prop_assert!(!would_cycle, "the service accepted a cycle");
                            for p in &ps { prop_assert!(trial.add_edge(*p, n)); }
                            model = trial;
                        }
                        Err(ServiceError::InvalidInput(e)) => {
                            prop_assert!(would_cycle, "refused a legal edit: {}", e);
                            prop_assert!(e.0.contains("cycle"));
                        }
                        Err(e) => prop_assert!(false, "unexpected error {}", e),
                    }
                }
            }
            // The store's edges equal the model's and have no cycle.
            let sub = svc.outcome_subtree(r, root, Some(10_000)).unwrap();
            let mut got = sub.edges.clone();
            got.sort();
            let mut want: Vec<_> = model.edges().collect();
            want.sort();
            prop_assert_eq!(&got, &want);
            prop_assert!(!DagModel::has_cycle(&got));
        }
    }
}
