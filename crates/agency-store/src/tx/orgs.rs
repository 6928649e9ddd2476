//! [`OrgTx`]: applied organisations: rows, the agents stood up for them and
//! the capabilities they granted.

use agency_core::HandlerId;

use super::R;
use crate::orgs::{OrgAgentRow, OrgGrantRow, OrgRow};

/// Applied organisations: rows, the agents stood up for them and the
/// capabilities they granted.
pub trait OrgTx {
    fn org(&mut self, name: &str) -> R<Option<OrgRow>>;
    /// Every organisation ever applied (up or down), ordered by name.
    fn orgs(&mut self) -> R<Vec<OrgRow>>;
    /// Insert or replace an organisation.
    fn put_org(&mut self, org: &OrgRow) -> R<()>;
    /// Every agent ever stood up for `org` (any status), ordered by name.
    fn org_agents(&mut self, org: &str) -> R<Vec<OrgAgentRow>>;
    fn org_agent_by_handler(&mut self, handler: HandlerId) -> R<Option<OrgAgentRow>>;
    /// Insert or replace the row of (org, agent).
    fn put_org_agent(&mut self, agent: &OrgAgentRow) -> R<()>;
    /// The capabilities `org` granted, ordered by (holder, key).
    fn org_grants(&mut self, org: &str) -> R<Vec<OrgGrantRow>>;
    /// Insert or replace the grant of (org, holder, key).
    fn put_org_grant(&mut self, grant: &OrgGrantRow) -> R<()>;
    fn delete_org_grant(&mut self, org: &str, holder: &str, key: &str) -> R<()>;
}
