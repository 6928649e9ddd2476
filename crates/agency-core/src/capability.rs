//! The capability algebra: what a capability names, and which held
//! capability a grant may be derived from.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::egress::EgressPattern;
use crate::ids::{CapabilityId, FileId, HandlerId, OutcomeId};
use crate::level::Level;
use crate::validate::{InvalidInput, check_name};

/// Who a mail capability lets its holder write to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", content = "id", rename_all = "snake_case")]
pub enum MailTarget {
    User,
    Handler(HandlerId),
}

/// The thing a capability is about.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", content = "id", rename_all = "snake_case")]
pub enum Resource {
    /// A Knowledge Base file (levels none, read, write).
    Kb(FileId),
    /// An extra MCP server declared in the configuration (read = may use).
    McpServer(String),
    /// A repository in the repo cache (read = may clone).
    Repo(String),
    /// Permission to send mail to a target (created by the system only).
    Mail(MailTarget),
    /// Network destinations reachable through the daemon's egress proxy:
    /// an [`EgressPattern`] in canonical form (read = may connect).
    Egress(String),
    /// A tool of an applied organisation (a `.tool` file),
    /// by its name (read = may call).
    Tool(String),
}

/// The resource kinds as stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceKind {
    Kb,
    McpServer,
    Repo,
    Mail,
    Egress,
    Tool,
}

impl ResourceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceKind::Kb => "kb",
            ResourceKind::McpServer => "mcp_server",
            ResourceKind::Repo => "repo",
            ResourceKind::Mail => "mail",
            ResourceKind::Egress => "egress",
            ResourceKind::Tool => "tool",
        }
    }
}

impl Resource {
    pub fn kind(&self) -> ResourceKind {
        match self {
            Resource::Kb(_) => ResourceKind::Kb,
            Resource::McpServer(_) => ResourceKind::McpServer,
            Resource::Repo(_) => ResourceKind::Repo,
            Resource::Mail(_) => ResourceKind::Mail,
            Resource::Egress(_) => ResourceKind::Egress,
            Resource::Tool(_) => ResourceKind::Tool,
        }
    }

    /// The resource's key within its kind, as stored.
    pub fn key(&self) -> String {
        match self {
            Resource::Kb(f) => f.to_string(),
            Resource::McpServer(n)
            | Resource::Repo(n)
            | Resource::Egress(n)
            | Resource::Tool(n) => n.clone(),
            Resource::Mail(MailTarget::User) => "user".to_owned(),
            Resource::Mail(MailTarget::Handler(h)) => h.to_string(),
        }
    }

    /// Rebuild a resource from its stored kind and key.
    pub fn from_parts(kind: &str, key: &str) -> Result<Resource, InvalidInput> {
        let bad_id = |_| {
            InvalidInput(format!(
                "failed to parse {kind} resource id {key:?}: not a UUID"
            ))
        };
        match kind {
            "kb" => Ok(Resource::Kb(key.parse().map_err(bad_id)?)),
            "mcp_server" => {
                check_name("MCP server", key)?;
                Ok(Resource::McpServer(key.to_owned()))
            }
            "repo" => {
                check_name("repo", key)?;
                Ok(Resource::Repo(key.to_owned()))
            }
            "mail" if key == "user" => Ok(Resource::Mail(MailTarget::User)),
            "mail" => Ok(Resource::Mail(MailTarget::Handler(
                key.parse().map_err(bad_id)?,
            ))),
            // Normalised here, so that `API.example.com.` and
            // `api.example.com` are one resource.
            "egress" => Ok(Resource::Egress(EgressPattern::parse(key)?.to_string())),
            "tool" => {
                check_name("tool", key)?;
                Ok(Resource::Tool(key.to_owned()))
            }
            other => Err(InvalidInput(format!(
                "unknown resource kind {other:?}: expected kb, mcp_server, repo, egress or tool"
            ))),
        }
    }

    /// Whether a handler may pass this resource on with `grant`. Mail
    /// capabilities follow the handler tree and are made by the system only.
    pub fn grantable(&self) -> bool {
        !matches!(self, Resource::Mail(_))
    }
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind().as_str(), self.key())
    }
}

/// A live capability the granter holds on the resource being granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeldCap {
    pub id: CapabilityId,
    pub level: Level,
    pub delegatable: bool,
    pub scope: Option<OutcomeId>,
}

/// Why a grant was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GrantRefusal {
    #[error("the granter holds no capability on {0}")]
    NotHeld(Resource),
    #[error("the granter holds only {held} on {resource}, less than the {wanted} requested")]
    InsufficientLevel {
        resource: Resource,
        held: Level,
        wanted: Level,
    },
    #[error("the granter's capability on {0} is not delegatable")]
    NotDelegatable(Resource),
    #[error("{0} capabilities are created by Agency itself and cannot be granted")]
    NotGrantable(Resource),
    #[error(
        "outcome {0} is not the grantee's root outcome or below it; a grant is for an outcome in the grantee's area"
    )]
    ScopeOutsideArea(OutcomeId),
    #[error("outcome {0} is already finished, so a grant for it would end at once")]
    ScopeFinished(OutcomeId),
}

/// Pick the held capability a grant of `wanted` on `resource` derives from.
///
/// The source must be delegatable and at least `wanted`; a restriction to a
/// lower level is allowed. Among candidates the highest level wins, then the
/// oldest row, so that the choice is deterministic.
pub fn choose_grant_source(
    resource: &Resource,
    held: &[HeldCap],
    wanted: Level,
) -> Result<HeldCap, GrantRefusal> {
    if !resource.grantable() {
        return Err(GrantRefusal::NotGrantable(resource.clone()));
    }
    let best_any = held.iter().max_by_key(|c| c.level);
    let Some(best_any) = best_any else {
        return Err(GrantRefusal::NotHeld(resource.clone()));
    };
    let candidate = held
        .iter()
        .filter(|c| c.delegatable && c.level >= wanted)
        .min_by_key(|c| (std::cmp::Reverse(c.level), c.id));
    match candidate {
        Some(c) => Ok(*c),
        None if best_any.level < wanted => Err(GrantRefusal::InsufficientLevel {
            resource: resource.clone(),
            held: best_any.level,
            wanted,
        }),
        None => Err(GrantRefusal::NotDelegatable(resource.clone())),
    }
}

/// The outcome a grant is for, as asked and as found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GrantScopeFacts {
    /// The grantee's root outcome (the default).
    pub grantee_root: OutcomeId,
    /// The outcome the granter named, if any.
    pub requested: Option<OutcomeId>,
    /// Whether `requested` is the grantee's root or a descendant of it.
    pub in_grantee_subtree: bool,
    /// Whether `requested` is completed or closed.
    pub finished: bool,
}

/// Seed 000, "The capability flows back down the chain, outcome-scoped at
/// each level": a grant is scoped to the outcome it is for, the grantee's
/// root by default or an unfinished outcome at or below it. Finishing that
/// outcome revokes the grant and everything derived from it, so a boss
/// that escalates for an underling's outcome names that outcome and the
/// capability it obtains to pass down ends with it too.
pub fn grant_scope(f: GrantScopeFacts) -> Result<OutcomeId, GrantRefusal> {
    let Some(o) = f.requested else {
        return Ok(f.grantee_root);
    };
    if !f.in_grantee_subtree {
        return Err(GrantRefusal::ScopeOutsideArea(o));
    }
    if f.finished {
        return Err(GrantRefusal::ScopeFinished(o));
    }
    Ok(o)
}

/// What delivering an attached file gives its recipient.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttachAccess {
    /// The recipient can read the file already: nothing is granted.
    AlreadyReadable,
    /// The recipient gets Read derived from this capability of the sender.
    Derive(HeldCap),
}

/// Issue 9 item 2: Read gained through mail follows the grant rule. The
/// sender must hold a delegatable capability of at least Read on the file
/// (the recipient gets Read, never more), and the recipient's capability is
/// derived from it, so revoking or finishing the source revokes it too.
pub fn attach_access(
    resource: &Resource,
    recipient_reads: bool,
    sender_held: &[HeldCap],
) -> Result<AttachAccess, GrantRefusal> {
    if recipient_reads {
        return Ok(AttachAccess::AlreadyReadable);
    }
    choose_grant_source(resource, sender_held, Level::Read).map(AttachAccess::Derive)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn cap(id: i64, level: Level, delegatable: bool) -> HeldCap {
        HeldCap {
            id: CapabilityId(id),
            level,
            delegatable,
            scope: None,
        }
    }

    #[test]
    fn grant_source_table() {
        let r = Resource::Repo("agency".into());
        let cases: Vec<(Vec<HeldCap>, Level, Result<i64, &str>)> = vec![
            (vec![], Level::Read, Err("NotHeld")),
            (vec![cap(1, Level::Read, true)], Level::Read, Ok(1)),
            (
                vec![cap(1, Level::Read, true)],
                Level::Write,
                Err("InsufficientLevel"),
            ),
            (
                vec![cap(1, Level::Write, false)],
                Level::Read,
                Err("NotDelegatable"),
            ),
            (vec![cap(1, Level::Write, true)], Level::None, Ok(1)),
            (
                vec![cap(1, Level::Read, true), cap(2, Level::Write, true)],
                Level::Read,
                Ok(2),
            ),
            (
                vec![cap(3, Level::Write, true), cap(2, Level::Write, true)],
                Level::Write,
                Ok(2),
            ),
            (
                vec![cap(1, Level::Write, false), cap(2, Level::Read, true)],
                Level::Read,
                Ok(2),
            ),
            (
                vec![cap(1, Level::Write, false), cap(2, Level::Read, true)],
                Level::Write,
                Err("NotDelegatable"),
            ),
        ];
        for (held, wanted, want) in cases {
            let got = choose_grant_source(&r, &held, wanted);
            match (got, want) {
                (Ok(c), Ok(id)) => assert_eq!(c.id.0, id),
                (Err(e), Err(name)) => {
                    assert!(format!("{e:?}").starts_with(name), "{e:?} vs {name}")
                }
                (got, want) => panic!("held {held:?} wanted {wanted}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn grant_scope_table() {
        let root = OutcomeId::new_random();
        let other = OutcomeId::new_random();
        let f = GrantScopeFacts {
            grantee_root: root,
            requested: None,
            in_grantee_subtree: false,
            finished: false,
        };
        assert_eq!(grant_scope(f), Ok(root));
        let asked = |in_grantee_subtree, finished| GrantScopeFacts {
            requested: Some(other),
            in_grantee_subtree,
            finished,
            ..f
        };
        assert_eq!(grant_scope(asked(true, false)), Ok(other));
        assert_eq!(
            grant_scope(asked(false, false)),
            Err(GrantRefusal::ScopeOutsideArea(other))
        );
        assert_eq!(
            grant_scope(asked(true, true)),
            Err(GrantRefusal::ScopeFinished(other))
        );
    }

    #[test]
    fn attach_needs_a_delegatable_source_unless_already_readable() {
        let r = Resource::Kb(FileId::new_random());
        assert_eq!(
            attach_access(&r, true, &[]),
            Ok(AttachAccess::AlreadyReadable)
        );
        assert!(matches!(
            attach_access(&r, false, &[cap(1, Level::Write, false)]),
            Err(GrantRefusal::NotDelegatable(_))
        ));
        assert!(matches!(
            attach_access(&r, false, &[cap(1, Level::None, true)]),
            Err(GrantRefusal::InsufficientLevel { .. })
        ));
        assert_eq!(
            attach_access(
                &r,
                false,
                &[cap(1, Level::Write, false), cap(2, Level::Read, true)]
            ),
            Ok(AttachAccess::Derive(cap(2, Level::Read, true)))
        );
    }

    #[test]
    fn mail_is_not_grantable() {
        let r = Resource::Mail(MailTarget::User);
        let held = [cap(1, Level::Write, true)];
        assert!(matches!(
            choose_grant_source(&r, &held, Level::Write),
            Err(GrantRefusal::NotGrantable(_))
        ));
    }

    #[test]
    fn resource_round_trip() {
        let h = HandlerId::new_random();
        for r in [
            Resource::Kb(FileId::new_random()),
            Resource::McpServer("gmail".into()),
            Resource::Repo("agency".into()),
            Resource::Mail(MailTarget::User),
            Resource::Mail(MailTarget::Handler(h)),
            Resource::Egress("*.github.com:22".into()),
        ] {
            assert_eq!(
                Resource::from_parts(r.kind().as_str(), &r.key()).unwrap(),
                r
            );
        }
        assert!(Resource::from_parts("kb", "nope").is_err());
        assert!(Resource::from_parts("disk", "x").is_err());
        assert_eq!(
            Resource::from_parts("egress", "API.Example.com.").unwrap(),
            Resource::Egress("api.example.com".into())
        );
        assert!(Resource::from_parts("egress", "https://example.com").is_err());
    }
}
