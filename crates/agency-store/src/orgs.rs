//! Rows of applied organisations (migration 16). What an
//! organisation means — which handlers, capabilities and instructions an
//! Agency Model becomes — is the service's (`agency-service`'s
//! `org_apply.rs`); these are plain rows.

pub use agency_core::status::OrgAgentStatus;
use agency_core::{CapabilityId, HandlerId, Level, Timestamp};

/// One applied organisation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrgRow {
    pub name: String,
    /// The Agency Model last applied, as JSON.
    pub model_json: String,
    /// BLAKE3 hex of `model_json`.
    pub model_hash: String,
    /// The top agency's executive agent's handler.
    pub executive: HandlerId,
    pub applied_at: Timestamp,
    /// Set while the organisation is down.
    pub retired_at: Option<Timestamp>,
}

/// One agent of an organisation and the handler it stands as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrgAgentRow {
    pub org: String,
    pub agent: String,
    /// The name of the agency it belongs to.
    pub agency: String,
    pub handler: HandlerId,
    /// BLAKE3 hex of its effective definition.
    pub def_hash: String,
    /// The runtime it asks for (`None`: the daemon's).
    pub runtime: Option<String>,
    pub status: OrgAgentStatus,
    pub updated_at: Timestamp,
}

/// One capability an organisation granted. `holder` is an agent name, or
/// empty for the root handler; `key` names the resource with agents by
/// name (`mail:@Name`, `mail:@root`, `tool:NAME`, `egress:HOST`, …).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrgGrantRow {
    pub org: String,
    pub holder: String,
    pub key: String,
    pub level: Level,
    pub capability: CapabilityId,
}
