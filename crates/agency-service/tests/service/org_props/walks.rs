//! The model's rules for issue 9 items 1 and 13, kept apart from the rest
//! of `org_props.rs`: which outcomes a handler sees (and so what
//! `outcome_subtree` and `outcome_ancestors` may show it), and who may
//! reopen a finished outcome and who is responsible for it afterwards.
//!
//! Like `org_model.rs`, written from the seed ("a handler reads its area:
//! the subtrees below its root and its 'why?' chain") and the decisions in
//! ARCHITECTURE.md, calling none of agency-core's rules.

use std::collections::BTreeSet;

use agency_core::OutcomeId;
use proptest::prelude::*;

use super::{Op, Run};
use crate::org_model::{Model, St};

/// Most chains `outcome_ancestors` returns (a documented limit).
const MAX_CHAINS: usize = 64;

impl Model {
    pub(crate) fn ancestors_or_self(&self, o: usize) -> BTreeSet<usize> {
        let mut out = BTreeSet::from([o]);
        let mut stack = vec![o];
        while let Some(x) = stack.pop() {
            for &p in &self.outcomes[x].parents {
                if out.insert(p) {
                    stack.push(p);
                }
            }
        }
        out
    }

    /// Whether handler `h` may see outcome `o`: its area (everything below
    /// its root and the root's "why?" chain), what it is responsible for,
    /// and the roots of its active underlings.
    pub(crate) fn sees(&self, h: usize, o: usize) -> bool {
        let root = self.handlers[h].root;
        self.descendants_or_self(root).contains(&o)
            || self.ancestors_or_self(root).contains(&o)
            || self.outcomes[o].responsible == h
            || self
                .handler_of_root(o)
                .is_some_and(|u| self.handlers[u].active && self.handlers[u].boss == Some(h))
    }

    /// What `outcome_subtree(o)` shows `h`: the descendants it sees, and the
    /// edges among them.
    pub(crate) fn visible_subtree(
        &self,
        h: usize,
        o: usize,
    ) -> (BTreeSet<usize>, BTreeSet<(usize, usize)>) {
        let nodes: BTreeSet<usize> = self
            .descendants_or_self(o)
            .into_iter()
            .filter(|&x| self.sees(h, x))
            .collect();
        let edges = nodes
            .iter()
            .flat_map(|&c| {
                self.outcomes[c]
                    .parents
                    .iter()
                    .filter(|p| nodes.contains(p))
                    .map(move |&p| (p, c))
            })
            .collect();
        (nodes, edges)
    }

    /// Every chain from `o` up to a root made only of outcomes `h` sees. A
    /// chain that would pass through an outcome it does not see is not
    /// shown at all (not even cut short: that would tell it one exists).
    pub(crate) fn visible_chains(&self, h: usize, o: usize) -> BTreeSet<Vec<usize>> {
        let mut out = BTreeSet::new();
        let mut stack = vec![vec![o]];
        while let Some(path) = stack.pop() {
            let last = *path.last().expect("never empty");
            let parents = &self.outcomes[last].parents;
            if parents.is_empty() {
                out.insert(path);
                continue;
            }
            for &p in parents.iter().filter(|&&p| self.sees(h, p)) {
                let mut next = path.clone();
                next.push(p);
                stack.push(next);
            }
        }
        out
    }

    /// Issue 9 item 13: `h` may reopen `o` when it could have completed or
    /// closed it — the boss of the handler whose root it is (that handler
    /// has retired since), or the responsible handler for an outcome that
    /// is not its own root — and `o` is a finished outcome it sees.
    pub(crate) fn may_reopen(&self, h: usize, o: usize) -> bool {
        let boss_of_its_handler = self
            .handler_of_root(o)
            .is_some_and(|u| self.handlers[u].boss == Some(h));
        let own_work = self.outcomes[o].responsible == h && self.handlers[h].root != o;
        self.sees(h, o) && self.outcomes[o].status.finished() && (boss_of_its_handler || own_work)
    }

    /// Reopen `o`: open again; if its responsible handler has retired, the
    /// nearest active handler up the boss chain takes back everything the
    /// retired handlers below it held (no handler is reactivated, no
    /// capability revived). Returns the new responsible handler.
    pub(crate) fn reopen(&mut self, o: usize) -> usize {
        let was = self.outcomes[o].responsible;
        let mut owner = was;
        while !self.handlers[owner].active {
            owner = self.handlers[owner]
                .boss
                .expect("the root handler never retires");
        }
        if owner != was {
            let mut tree = BTreeSet::from([was]);
            loop {
                let before = tree.len();
                for (i, h) in self.handlers.iter().enumerate() {
                    if h.boss.is_some_and(|b| tree.contains(&b)) {
                        tree.insert(i);
                    }
                }
                if tree.len() == before {
                    break;
                }
            }
            tree.retain(|&h| !self.handlers[h].active);
            for x in self.outcomes.iter_mut() {
                if tree.contains(&x.responsible) {
                    x.responsible = owner;
                }
            }
        }
        self.outcomes[o].status = St::Open;
        owner
    }
}

impl Run {
    /// The index of a model outcome, or `None` for outcomes the model does
    /// not track (Process Inbox outcomes that mail delivery creates).
    fn index_of(&self, id: OutcomeId) -> Option<usize> {
        self.m.outcomes.iter().position(|o| o.id == id)
    }

    pub(super) fn step_subtree(
        &mut self,
        op: &Op,
        h: usize,
        o: usize,
    ) -> Result<(), TestCaseError> {
        let Some(h) = self.actor(h) else {
            return Ok(());
        };
        let o = o % self.m.outcomes.len();
        let allowed = self.m.sees(h, o);
        let who = self.env.agent(self.m.handlers[h].id);
        let r = self
            .env
            .svc
            .outcome_subtree(who, self.m.outcomes[o].id, None);
        self.check(op, allowed, &r)?;
        let Ok(sub) = r else { return Ok(()) };
        let nodes: BTreeSet<usize> = sub
            .outcomes
            .iter()
            .filter_map(|x| self.index_of(x.id))
            .collect();
        let edges: BTreeSet<(usize, usize)> = sub
            .edges
            .iter()
            .filter_map(|&(p, c)| Some((self.index_of(p)?, self.index_of(c)?)))
            .collect();
        let (want_nodes, want_edges) = self.m.visible_subtree(h, o);
        prop_assert_eq!(&nodes, &want_nodes, "{:?} as handler {}", op, h);
        prop_assert_eq!(&edges, &want_edges, "{:?} as handler {}", op, h);
        prop_assert!(!sub.truncated);
        Ok(())
    }

    pub(super) fn step_ancestors(
        &mut self,
        op: &Op,
        h: usize,
        o: usize,
    ) -> Result<(), TestCaseError> {
        let Some(h) = self.actor(h) else {
            return Ok(());
        };
        let o = o % self.m.outcomes.len();
        let allowed = self.m.sees(h, o);
        let who = self.env.agent(self.m.handlers[h].id);
        let r = self.env.svc.outcome_ancestors(who, self.m.outcomes[o].id);
        self.check(op, allowed, &r)?;
        let Ok(chains) = r else { return Ok(()) };
        let mut got = BTreeSet::new();
        for chain in &chains {
            let path: Option<Vec<usize>> = chain.iter().map(|x| self.index_of(x.id)).collect();
            let path = path.ok_or_else(|| {
                TestCaseError::fail(format!("{op:?}: a chain through an untracked outcome"))
            })?;
            got.insert(path);
        }
        let want = self.m.visible_chains(h, o);
        if want.len() <= MAX_CHAINS {
            prop_assert_eq!(&got, &want, "{:?} as handler {}", op, h);
        } else {
            prop_assert_eq!(chains.len(), MAX_CHAINS);
            prop_assert!(got.is_subset(&want), "{:?} as handler {}", op, h);
        }
        Ok(())
    }

    pub(super) fn step_reopen(&mut self, op: &Op, h: usize, o: usize) -> Result<(), TestCaseError> {
        let Some(h) = self.actor(h) else {
            return Ok(());
        };
        let o = o % self.m.outcomes.len();
        let allowed = self.m.may_reopen(h, o);
        let who = self.env.agent(self.m.handlers[h].id);
        let r = self
            .env
            .svc
            .outcome_reopen(who, self.m.outcomes[o].id, "not done after all");
        self.check(op, allowed, &r)?;
        if let Ok(rep) = r {
            let owner = self.m.reopen(o);
            prop_assert_eq!(rep.responsible, self.m.handlers[owner].id);
        }
        Ok(())
    }
}
