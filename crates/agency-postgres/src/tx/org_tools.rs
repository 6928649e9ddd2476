//! [`OrgToolTx`] on PostgreSQL.
#![allow(unused_variables)]

use agency_store::org_tools::OrgToolRow;
use agency_store::tx::OrgToolTx;
use agency_store::tx::R;

use crate::PgTx;
use crate::convert::unported;

impl OrgToolTx for PgTx<'_> {
    fn org_tool(&mut self, name: &str) -> R<Option<OrgToolRow>> {
        Err(unported("org_tool"))
    }
    fn org_tools(&mut self, org: Option<&str>) -> R<Vec<OrgToolRow>> {
        Err(unported("org_tools"))
    }
    fn put_org_tool(&mut self, tool: &OrgToolRow) -> R<()> {
        Err(unported("put_org_tool"))
    }
    fn delete_org_tool(&mut self, name: &str) -> R<()> {
        Err(unported("delete_org_tool"))
    }
}
