//! Access decisions for KB files and outcomes.
//!
//! The service layer gathers facts about the caller and the object from the
//! store (inside the same transaction as the operation) and asks these
//! functions; they are the only place that encodes who may see or change
//! what. Outcome access is *structural*: it follows from responsibility and
//! the handler tree, so it can never drift from them.

use serde::{Deserialize, Serialize};

use crate::level::Level;

/// What a KB file is for; decides which structural rules apply to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileKind {
    /// An ordinary document an agent or the user wrote.
    Document,
    /// The Markdown rendering of an outcome (written only by Agency).
    Outcome,
    /// A mail body.
    Message,
    /// A handler's state document.
    State,
    /// A handler's audit log (written only by Agency).
    AuditLog,
}

impl FileKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FileKind::Document => "document",
            FileKind::Outcome => "outcome",
            FileKind::Message => "message",
            FileKind::State => "state",
            FileKind::AuditLog => "audit_log",
        }
    }

    pub fn parse(s: &str) -> Option<FileKind> {
        [
            FileKind::Document,
            FileKind::Outcome,
            FileKind::Message,
            FileKind::State,
            FileKind::AuditLog,
        ]
        .into_iter()
        .find(|k| k.as_str() == s)
    }

    /// Files whose versions only Agency writes, never a caller's `kb_write`.
    pub fn system_written(self) -> bool {
        matches!(self, FileKind::Outcome | FileKind::AuditLog)
    }

    /// Files nobody writes through `kb_write`: those Agency writes, and
    /// message bodies, which never change once sent (a
    /// delivered message cannot be rewritten under its reader).
    pub fn immutable(self) -> bool {
        self.system_written() || self == FileKind::Message
    }
}

/// How the caller relates to the handler that owns a state document or audit
/// log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwnerRelation {
    Owner,
    BossOfOwner,
    Other,
}

/// Facts about one (caller, KB file) pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KbFacts {
    pub caller_is_user: bool,
    pub kind: FileKind,
    /// For state documents and audit logs.
    pub owner: OwnerRelation,
    /// The highest live capability row the caller holds on the file.
    pub cap: Option<Level>,
    /// For outcome files: whether the caller may read that outcome.
    pub outcome_readable: bool,
}

/// The caller's level on a KB file, or `None` when the file does not exist
/// for the caller (it must then be indistinguishable from a missing file).
pub fn kb_access(f: KbFacts) -> Option<Level> {
    if f.caller_is_user {
        // The user owns the installation: everything is visible, and every
        // file a caller may write is writable, but outcome files and audit
        // logs are rendered by Agency and never written directly.
        return Some(if f.kind.immutable() {
            Level::Read
        } else {
            Level::Write
        });
    }
    let structural = match f.kind {
        FileKind::Outcome => f.outcome_readable.then_some(Level::Read),
        FileKind::State => match f.owner {
            OwnerRelation::Owner => Some(Level::Write),
            OwnerRelation::BossOfOwner => Some(Level::Read),
            OwnerRelation::Other => None,
        },
        FileKind::AuditLog => match f.owner {
            OwnerRelation::Owner | OwnerRelation::BossOfOwner => Some(Level::Read),
            OwnerRelation::Other => None,
        },
        FileKind::Document | FileKind::Message => None,
    };
    let mut level = structural.max(f.cap);
    if f.kind.immutable() {
        level = level.map(|l| l.min(Level::Read));
    }
    level
}

/// The caller's access to an outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeAccess {
    /// Does not exist for the caller.
    Invisible,
    Read,
    Write,
}

/// Facts about one (caller, outcome) pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct OutcomeFacts {
    pub caller_is_user: bool,
    /// The outcome is the caller's own root (the outcome delegated to it).
    pub is_callers_root: bool,
    /// The caller is the outcome's responsible handler.
    pub caller_responsible: bool,
    /// The outcome is the root of an active handler whose boss is the caller
    /// (for the user: the root handler's outcome).
    pub caller_is_boss_of_its_handler: bool,
    /// The outcome is a descendant of the caller's root, or an ancestor of it.
    pub in_callers_area: bool,
}

/// Seed 000, "Delegation": a handler has Write on the outcomes it is
/// responsible for except its own root (Read), keeps Write on the root of a
/// handler it delegated to (to complete or close it), and Read on everything
/// in its area (the delegated subtrees below it and its "why?" chain above).
pub fn outcome_access(f: OutcomeFacts) -> OutcomeAccess {
    if f.caller_is_boss_of_its_handler {
        return OutcomeAccess::Write;
    }
    if f.caller_is_user {
        return OutcomeAccess::Read;
    }
    if f.caller_responsible && !f.is_callers_root {
        return OutcomeAccess::Write;
    }
    if f.caller_responsible || f.is_callers_root || f.in_callers_area {
        return OutcomeAccess::Read;
    }
    OutcomeAccess::Invisible
}

/// Whether the caller may add a child (a "how") under an outcome: only the
/// responsible handler may, including under its own root; never the user and
/// never a boss inside a delegated subtree.
pub fn may_add_child(f: OutcomeFacts) -> bool {
    !f.caller_is_user && f.caller_responsible
}

/// Facts about a caller and a finished outcome it asks to reopen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ReopenFacts {
    pub caller_is_user: bool,
    /// The outcome is the caller's own root.
    pub is_callers_root: bool,
    /// The caller is the outcome's responsible handler.
    pub caller_responsible: bool,
    /// The outcome is the root of a handler whose boss is the caller. Unlike
    /// [`OutcomeFacts::caller_is_boss_of_its_handler`] the handler need not
    /// be active: finishing its root retired it.
    pub caller_is_boss_of_its_handler: bool,
}

/// Issue 9 item 13: whoever was allowed to complete or close an outcome may
/// reopen it — the boss of the handler whose root it is, the responsible
/// handler for its other outcomes (never its own root: its boss decides
/// that) — and the user, who is the boss above every chain and the only
/// one left when a whole line of handlers has retired.
pub fn may_reopen(f: ReopenFacts) -> bool {
    f.caller_is_user
        || f.caller_is_boss_of_its_handler
        || (f.caller_responsible && !f.is_callers_root)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn kb_access_table() {
        use FileKind::*;
        use OwnerRelation::*;
        let h = |kind, owner, cap, outcome_readable| KbFacts {
            caller_is_user: false,
            kind,
            owner,
            cap,
            outcome_readable,
        };
        let cases = [
            (h(Document, Other, None, false), None),
            (
                h(Document, Other, Some(Level::None), false),
                Some(Level::None),
            ),
            (
                h(Document, Other, Some(Level::Read), false),
                Some(Level::Read),
            ),
            // Message bodies are immutable: Write held on one reads as Read.
            (
                h(Message, Other, Some(Level::Write), false),
                Some(Level::Read),
            ),
            (h(Outcome, Other, None, true), Some(Level::Read)),
            (h(Outcome, Other, None, false), None),
            (
                h(Outcome, Other, Some(Level::Write), true),
                Some(Level::Read),
            ),
            (h(State, Owner, None, false), Some(Level::Write)),
            (h(State, BossOfOwner, None, false), Some(Level::Read)),
            (h(State, Other, None, false), None),
            (h(AuditLog, Owner, None, false), Some(Level::Read)),
            (h(AuditLog, BossOfOwner, None, false), Some(Level::Read)),
            (
                h(AuditLog, Other, Some(Level::Write), false),
                Some(Level::Read),
            ),
            (h(AuditLog, Other, None, false), None),
        ];
        for (facts, want) in cases {
            assert_eq!(kb_access(facts), want, "{facts:?}");
        }
        let user = KbFacts {
            caller_is_user: true,
            ..h(Document, Other, None, false)
        };
        assert_eq!(kb_access(user), Some(Level::Write));
        assert_eq!(
            kb_access(KbFacts {
                kind: Message,
                ..user
            }),
            Some(Level::Read)
        );
        assert_eq!(
            kb_access(KbFacts {
                kind: Outcome,
                ..user
            }),
            Some(Level::Read)
        );
    }

    #[test]
    fn reopen_table() {
        let f = ReopenFacts::default();
        let yes = [
            ReopenFacts {
                caller_is_user: true,
                ..f
            },
            ReopenFacts {
                caller_is_boss_of_its_handler: true,
                ..f
            },
            ReopenFacts {
                caller_responsible: true,
                ..f
            },
        ];
        for facts in yes {
            assert!(may_reopen(facts), "{facts:?}");
        }
        let no = [
            f,
            // Its own root, though responsible: only its boss reopens that.
            ReopenFacts {
                caller_responsible: true,
                is_callers_root: true,
                ..f
            },
            ReopenFacts {
                is_callers_root: true,
                ..f
            },
        ];
        for facts in no {
            assert!(!may_reopen(facts), "{facts:?}");
        }
    }

    #[test]
    fn outcome_access_table() {
        let f = OutcomeFacts::default();
        let cases = [
            (f, OutcomeAccess::Invisible),
            (
                OutcomeFacts {
                    caller_responsible: true,
                    in_callers_area: true,
                    ..f
                },
                OutcomeAccess::Write,
            ),
            // Its own root: read only, even though responsible.
            (
                OutcomeFacts {
                    caller_responsible: true,
                    is_callers_root: true,
                    in_callers_area: true,
                    ..f
                },
                OutcomeAccess::Read,
            ),
            // Boss of the handler whose root this is: write (complete/close).
            (
                OutcomeFacts {
                    caller_is_boss_of_its_handler: true,
                    in_callers_area: true,
                    ..f
                },
                OutcomeAccess::Write,
            ),
            // Inside a delegated subtree, or up the why-chain: read.
            (
                OutcomeFacts {
                    in_callers_area: true,
                    ..f
                },
                OutcomeAccess::Read,
            ),
            (
                OutcomeFacts {
                    caller_is_user: true,
                    ..f
                },
                OutcomeAccess::Read,
            ),
            (
                OutcomeFacts {
                    caller_is_user: true,
                    caller_is_boss_of_its_handler: true,
                    ..f
                },
                OutcomeAccess::Write,
            ),
        ];
        for (facts, want) in cases {
            assert_eq!(outcome_access(facts), want, "{facts:?}");
        }
        assert!(may_add_child(OutcomeFacts {
            caller_responsible: true,
            is_callers_root: true,
            ..f
        }));
        assert!(!may_add_child(OutcomeFacts {
            caller_is_boss_of_its_handler: true,
            ..f
        }));
        assert!(!may_add_child(OutcomeFacts {
            caller_is_user: true,
            caller_responsible: true,
            ..f
        }));
    }
}
