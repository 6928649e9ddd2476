//! [`OrgTx`] on PostgreSQL.
#![allow(unused_variables)]

use agency_core::HandlerId;
use agency_store::orgs::{OrgAgentRow, OrgGrantRow, OrgRow};
use agency_store::tx::OrgTx;
use agency_store::tx::R;

use crate::PgTx;
use crate::convert::unported;

impl OrgTx for PgTx<'_> {
    fn org(&mut self, name: &str) -> R<Option<OrgRow>> {
        Err(unported("org"))
    }
    fn orgs(&mut self) -> R<Vec<OrgRow>> {
        Err(unported("orgs"))
    }
    fn put_org(&mut self, org: &OrgRow) -> R<()> {
        Err(unported("put_org"))
    }
    fn org_agents(&mut self, org: &str) -> R<Vec<OrgAgentRow>> {
        Err(unported("org_agents"))
    }
    fn org_agent_by_handler(&mut self, handler: HandlerId) -> R<Option<OrgAgentRow>> {
        Err(unported("org_agent_by_handler"))
    }
    fn put_org_agent(&mut self, agent: &OrgAgentRow) -> R<()> {
        Err(unported("put_org_agent"))
    }
    fn org_grants(&mut self, org: &str) -> R<Vec<OrgGrantRow>> {
        Err(unported("org_grants"))
    }
    fn put_org_grant(&mut self, grant: &OrgGrantRow) -> R<()> {
        Err(unported("put_org_grant"))
    }
    fn delete_org_grant(&mut self, org: &str, holder: &str, key: &str) -> R<()> {
        Err(unported("delete_org_grant"))
    }
}
