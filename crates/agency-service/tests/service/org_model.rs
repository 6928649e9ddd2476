//! The independent model of seed 000's rules that `org_props.rs` checks
//! the service against: handlers (a tree), outcomes (a DAG with owners and
//! statuses), KB capabilities (with derivation and scope) and the
//! predicates saying who may do what. Written from the seed and the
//! decisions in ARCHITECTURE.md; it calls none of agency-core's rules.
//! Issue 9 items 2-4 (mail-derived Read, retirement handover, outcome-scoped
//! grants) are the functions at the end, after `finish`.

use std::collections::BTreeSet;

use agency_core::{CapabilityId, FileId, HandlerId, Level, OutcomeId};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum St {
    Open,
    Blocked,
    Awaiting,
    Completed,
    Closed,
}

impl St {
    pub(crate) fn finished(self) -> bool {
        matches!(self, St::Completed | St::Closed)
    }
}

#[derive(Debug, Clone)]
pub(crate) struct MHandler {
    pub(crate) id: HandlerId,
    pub(crate) boss: Option<usize>,
    pub(crate) active: bool,
    /// Index of its root outcome.
    pub(crate) root: usize,
}

#[derive(Debug, Clone)]
pub(crate) struct MOutcome {
    pub(crate) id: OutcomeId,
    pub(crate) parents: Vec<usize>,
    pub(crate) responsible: usize,
    pub(crate) status: St,
    pub(crate) perpetual: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct MCap {
    pub(crate) id: CapabilityId,
    pub(crate) holder: usize,
    pub(crate) file: usize,
    pub(crate) level: Level,
    pub(crate) delegatable: bool,
    /// The outcome whose finishing revokes it.
    pub(crate) scope: usize,
    pub(crate) derived_from: Option<CapabilityId>,
    pub(crate) live: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct MFile {
    pub(crate) id: FileId,
    /// The handler that created it.
    pub(crate) creator: usize,
    pub(crate) version: i64,
    pub(crate) content: Vec<u8>,
}

/// The rules, as state and predicates.
#[derive(Debug, Default)]
pub(crate) struct Model {
    pub(crate) handlers: Vec<MHandler>,
    pub(crate) outcomes: Vec<MOutcome>,
    pub(crate) caps: Vec<MCap>,
    pub(crate) files: Vec<MFile>,
}

impl Model {
    pub(crate) fn handler_of_root(&self, o: usize) -> Option<usize> {
        self.handlers.iter().position(|h| h.root == o)
    }

    pub(crate) fn descendants_or_self(&self, o: usize) -> BTreeSet<usize> {
        let mut out = BTreeSet::from([o]);
        loop {
            let before = out.len();
            for (i, x) in self.outcomes.iter().enumerate() {
                if x.parents.iter().any(|p| out.contains(p)) {
                    out.insert(i);
                }
            }
            if out.len() == before {
                return out;
            }
        }
    }

    /// Seed, "Delegation": Write on what you are responsible for except your
    /// own root; a boss keeps Write on the root of an active underling.
    pub(crate) fn may_write_outcome(&self, h: usize, o: usize) -> bool {
        if let Some(u) = self.handler_of_root(o)
            && self.handlers[u].active
            && self.handlers[u].boss == Some(h)
        {
            return true;
        }
        self.outcomes[o].responsible == h && self.handlers[h].root != o
    }

    /// A handler's level on a document: the best live capability it holds;
    /// `None` when it holds none (the file does not exist for it).
    pub(crate) fn level(&self, h: usize, f: usize) -> Option<Level> {
        self.caps
            .iter()
            .filter(|c| c.live && c.holder == h && c.file == f)
            .map(|c| c.level)
            .max()
    }

    /// The capabilities a grant of `level` on `f` by `h` may derive from.
    pub(crate) fn grant_sources(&self, h: usize, f: usize, level: Level) -> Vec<CapabilityId> {
        self.caps
            .iter()
            .filter(|c| c.live && c.holder == h && c.file == f && c.delegatable && c.level >= level)
            .map(|c| c.id)
            .collect()
    }

    /// Seed, "Messaging Capabilities": your boss, your direct underlings
    /// (while active) and yourself.
    pub(crate) fn may_mail(&self, h: usize, t: usize) -> bool {
        t == h
            || (self.handlers[t].active
                && (self.handlers[h].boss == Some(t) || self.handlers[t].boss == Some(h)))
    }

    /// Revoke `first` and, transitively, everything derived from them.
    pub(crate) fn revoke(&mut self, first: impl Fn(&MCap) -> bool) {
        let mut gone: BTreeSet<CapabilityId> = BTreeSet::new();
        for c in self.caps.iter_mut().filter(|c| c.live && first(c)) {
            c.live = false;
            gone.insert(c.id);
        }
        loop {
            let mut more = false;
            for c in self.caps.iter_mut() {
                if c.live && c.derived_from.is_some_and(|d| gone.contains(&d)) {
                    c.live = false;
                    gone.insert(c.id);
                    more = true;
                }
            }
            if !more {
                return;
            }
        }
    }

    /// Deactivate `top` and every active handler below it; their
    /// capabilities go with them. Returns the handlers deactivated.
    pub(crate) fn retire(&mut self, top: usize) -> Vec<usize> {
        let mut tree = BTreeSet::from([top]);
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
        let retired: Vec<usize> = tree
            .into_iter()
            .filter(|&h| self.handlers[h].active)
            .collect();
        for &h in &retired {
            self.handlers[h].active = false;
        }
        self.revoke(|c| retired.contains(&c.holder));
        retired
    }

    pub(crate) fn finish(&mut self, o: usize, close: bool) {
        self.outcomes[o].status = if close { St::Closed } else { St::Completed };
        self.revoke(|c| c.scope == o);
        if let Some(u) = self.handler_of_root(o)
            && self.handlers[u].active
        {
            self.retire(u);
        }
    }
}

// ---- Issue 9 items 2-4 ----------------------------------------------------

impl Model {
    /// Item 2: attaching `f` to mail from `h` to `t`. The sender must read
    /// it; unless the recipient can read it already, the sender must hold a
    /// delegatable capability of at least Read to derive the recipient's
    /// Read from. Returns the eligible sources (empty when none is needed).
    pub(crate) fn attach(&self, h: usize, t: usize, f: usize) -> Option<Vec<CapabilityId>> {
        let reads = |x: usize| self.level(x, f).is_some_and(|l| l >= Level::Read);
        if !reads(h) {
            return None;
        }
        if reads(t) {
            return Some(Vec::new());
        }
        let sources = self.grant_sources(h, f, Level::Read);
        (!sources.is_empty()).then_some(sources)
    }

    /// Item 4: a grant to `u` may be for its root or an unfinished outcome
    /// below it.
    pub(crate) fn may_scope_grant(&self, u: usize, o: usize) -> bool {
        self.descendants_or_self(self.handlers[u].root).contains(&o)
            && !self.outcomes[o].status.finished()
    }

    /// Every handler below `top` by boss links, whatever its status.
    pub(crate) fn handler_tree(&self, top: usize) -> BTreeSet<usize> {
        let mut tree = BTreeSet::from([top]);
        loop {
            let before = tree.len();
            for (i, h) in self.handlers.iter().enumerate() {
                if h.boss.is_some_and(|b| tree.contains(&b)) {
                    tree.insert(i);
                }
            }
            if tree.len() == before {
                return tree;
            }
        }
    }

    /// Item 3: the files `top`'s boss must be handed when `top`'s subtree
    /// retires (after its capabilities were revoked): every document a
    /// handler of the subtree (retiring now or earlier) created, at Write,
    /// unless the boss holds Write on it already. Returns (boss, files).
    pub(crate) fn handover(&self, top: usize) -> Option<(usize, Vec<usize>)> {
        let boss = self.handlers[top].boss?;
        let tree = self.handler_tree(top);
        let files = (0..self.files.len())
            .filter(|&f| tree.contains(&self.files[f].creator))
            .filter(|&f| self.level(boss, f) != Some(Level::Write))
            .collect();
        Some((boss, files))
    }
}
