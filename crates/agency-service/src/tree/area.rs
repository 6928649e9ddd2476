//! Walks over many outcomes (a subtree, every "why?" chain) limited to what
//! the caller may see.
//!
//! `outcome_view` asks `agency_core::outcome_access` about one outcome; a
//! walk cannot afford that per row (each `in_callers_area` fact is a
//! recursive query, and a subtree may be the whole store). So the facts are
//! gathered once per walk — the caller's root and the edges above it, or
//! the edges above the walked outcome — and the decision is made in memory
//! for every row, with the same rule.
//!
//! What keeps this cheap is the shape of a handler's area: its root `R`,
//! every descendant of `R`, and every ancestor of `R`. An outcome a handler
//! is responsible for, or the root of one of its underlings, is always a
//! descendant of its root: outcomes are created under parents the creator is
//! responsible for, delegation and reclaim move responsibility only down the
//! handler tree, and re-parenting keeps a parent the caller is responsible
//! for. So the visible part of a subtree is found without a per-row check.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use agency_core::{OutcomeAccess, OutcomeFacts, OutcomeId, outcome_access};
use agency_store::{OutcomeRow, Tx};

use crate::Result;
use crate::service::Caller;

type Edge = (OutcomeId, OutcomeId);
type SubtreeRows = (Vec<OutcomeRow>, Vec<Edge>);

/// `id` and the descendants of it the caller may see, at most `n` rows, with
/// the edges among them. `id` itself must already be known to be visible.
///
/// For the user, or when `id` is inside the caller's own subtree (where every
/// descendant is in its area), this is the store's indexed subtree query.
/// When `id` is above the caller's root (its "why?" chain; the perpetual root
/// is in every chain), the visible part is the chain from `id` down to the
/// root (breadth-first, from the edges above the root) followed by the
/// caller's own subtree: siblings' work under the same ancestors stays out.
pub(crate) fn visible_subtree(
    tx: &mut dyn Tx,
    caller: &Caller,
    id: OutcomeId,
    n: usize,
) -> Result<SubtreeRows> {
    let Caller::Handler { row, .. } = caller else {
        return Ok(tx.subtree(id, n)?);
    };
    let root = row.id.root();
    if tx.is_descendant_or_self(id, root)? {
        return Ok(tx.subtree(id, n)?);
    }
    // `id` is an ancestor of the root. Walk down from it through the edges
    // on the paths from the root upwards: those are exactly the outcomes that
    // are both below `id` and above the root.
    let mut children_of: BTreeMap<OutcomeId, Vec<OutcomeId>> = BTreeMap::new();
    for (p, c) in tx.ancestor_edges(root)? {
        children_of.entry(p).or_default().push(c);
    }
    let mut chain = Vec::new();
    let mut seen = BTreeSet::from([id]);
    let mut queue = VecDeque::from([id]);
    let mut reaches_root = false;
    while let Some(node) = queue.pop_front() {
        if node == root {
            reaches_root = true;
            continue;
        }
        chain.push(node);
        for &c in children_of.get(&node).into_iter().flatten() {
            if seen.insert(c) {
                queue.push_back(c);
            }
        }
    }
    let mut rows: Vec<OutcomeRow> = Vec::new();
    for &node in chain.iter().take(n) {
        if let Some(o) = tx.outcome(node)? {
            rows.push(o);
        }
    }
    if !reaches_root {
        // Visible yet not above the root: by the invariant in the module
        // doc this does not happen; show the outcome alone rather than guess.
        rows.truncate(1);
        return Ok((rows, Vec::new()));
    }
    let mut edges: Vec<Edge> = Vec::new();
    if rows.len() < n {
        let (below, below_edges) = tx.subtree(root, n - rows.len())?;
        rows.extend(below);
        edges.extend(below_edges);
    }
    // Edges from the chain: to other chain outcomes, to the root, and to
    // outcomes in the root's subtree that have a second parent up the chain.
    let kept: BTreeSet<OutcomeId> = rows.iter().map(|o| o.id).collect();
    for &node in chain.iter().filter(|c| kept.contains(c)) {
        for c in tx.children(node)? {
            if kept.contains(&c) {
                edges.push((node, c));
            }
        }
    }
    edges.sort_unstable();
    edges.dedup();
    Ok((rows, edges))
}

/// Which of the outcomes on the paths from some outcome upwards (given by
/// their `edges`, as `Tx::ancestor_edges` returns them, and their `rows`) the
/// caller may see; `None` when it sees all of them (the user).
pub(crate) fn visible_ancestors(
    tx: &mut dyn Tx,
    caller: &Caller,
    edges: &[Edge],
    rows: &BTreeMap<OutcomeId, OutcomeRow>,
) -> Result<Option<BTreeSet<OutcomeId>>> {
    let Caller::Handler { row: h, .. } = caller else {
        return Ok(None);
    };
    let root = h.id.root();
    // Above the root: every ancestor of the root, and the root itself.
    let mut above: BTreeSet<OutcomeId> =
        tx.ancestor_edges(root)?.into_iter().map(|e| e.0).collect();
    above.insert(root);
    // Below the root: an ancestor of `id` that descends from the root lies on
    // a path root → … → id, whose every edge is among `edges`; so walking
    // down from the root through `edges` finds exactly those.
    let mut children_of: BTreeMap<OutcomeId, Vec<OutcomeId>> = BTreeMap::new();
    for &(p, c) in edges {
        children_of.entry(p).or_default().push(c);
    }
    let mut below = BTreeSet::from([root]);
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        for &c in children_of.get(&node).into_iter().flatten() {
            if below.insert(c) {
                stack.push(c);
            }
        }
    }
    let mut visible = BTreeSet::new();
    for (&node, o) in rows {
        let facts = OutcomeFacts {
            caller_is_user: false,
            is_callers_root: node == root,
            caller_responsible: o.responsible == h.id,
            // Being the boss of an outcome's handler only raises Read to
            // Write, and such a root is below the caller's root anyway.
            caller_is_boss_of_its_handler: false,
            in_callers_area: above.contains(&node) || below.contains(&node),
        };
        if outcome_access(facts) != OutcomeAccess::Invisible {
            visible.insert(node);
        }
    }
    Ok(Some(visible))
}
