//! A pure model of the outcome DAG, used as the independent oracle in
//! property tests and for checks that need no store.

use std::collections::{BTreeMap, BTreeSet};

use crate::ids::OutcomeId;

/// Children lists keyed by parent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DagModel {
    children: BTreeMap<OutcomeId, BTreeSet<OutcomeId>>,
}

impl DagModel {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether adding the edge `parent -> child` would close a cycle, i.e.
    /// `parent` is reachable from `child` (or they are the same outcome).
    pub fn would_cycle(&self, parent: OutcomeId, child: OutcomeId) -> bool {
        self.reachable(child, parent)
    }

    /// Add the edge unless it would make a cycle; returns whether it was added.
    pub fn add_edge(&mut self, parent: OutcomeId, child: OutcomeId) -> bool {
        if self.would_cycle(parent, child) {
            return false;
        }
        self.children.entry(parent).or_default().insert(child);
        true
    }

    pub fn remove_edge(&mut self, parent: OutcomeId, child: OutcomeId) {
        if let Some(c) = self.children.get_mut(&parent) {
            c.remove(&child);
        }
    }

    pub fn edges(&self) -> impl Iterator<Item = (OutcomeId, OutcomeId)> + '_ {
        self.children
            .iter()
            .flat_map(|(p, cs)| cs.iter().map(move |c| (*p, *c)))
    }

    /// Whether `to` can be reached from `from` along parent -> child edges.
    pub fn reachable(&self, from: OutcomeId, to: OutcomeId) -> bool {
        let mut stack = vec![from];
        let mut seen = BTreeSet::new();
        while let Some(n) = stack.pop() {
            if n == to {
                return true;
            }
            if seen.insert(n) {
                stack.extend(self.children.get(&n).into_iter().flatten().copied());
            }
        }
        false
    }

    /// Whether the graph has a cycle (Kahn's algorithm).
    pub fn has_cycle(edges: &[(OutcomeId, OutcomeId)]) -> bool {
        let mut indeg: BTreeMap<OutcomeId, usize> = BTreeMap::new();
        let mut out: BTreeMap<OutcomeId, Vec<OutcomeId>> = BTreeMap::new();
        for &(p, c) in edges {
            indeg.entry(p).or_default();
            *indeg.entry(c).or_default() += 1;
            out.entry(p).or_default().push(c);
        }
        let mut ready: Vec<OutcomeId> = indeg
            .iter()
            .filter(|(_, d)| **d == 0)
            .map(|(n, _)| *n)
            .collect();
        let mut done = 0;
        while let Some(n) = ready.pop() {
            done += 1;
            for c in out.get(&n).into_iter().flatten() {
                let d = indeg.get_mut(c).expect("every target has an in-degree");
                *d -= 1;
                if *d == 0 {
                    ready.push(*c);
                }
            }
        }
        done != indeg.len()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn model_never_cycles(ops in proptest::collection::vec((0usize..8, 0usize..8, any::<bool>()), 0..60)) {
            let ids: Vec<OutcomeId> = (0..8u128).map(|i| OutcomeId(uuid::Uuid::from_u128(i + 1))).collect();
            let mut dag = DagModel::new();
            for (a, b, add) in ops {
                if add {
                    let cyc = dag.would_cycle(ids[a], ids[b]);
                    prop_assert_eq!(dag.add_edge(ids[a], ids[b]), !cyc);
                } else {
                    dag.remove_edge(ids[a], ids[b]);
                }
                let edges: Vec<_> = dag.edges().collect();
                prop_assert!(!DagModel::has_cycle(&edges));
            }
        }
    }

    #[test]
    fn self_edge_is_a_cycle() {
        let a = OutcomeId::new_random();
        assert!(DagModel::new().would_cycle(a, a));
        assert!(DagModel::has_cycle(&[(a, a)]));
    }
}
