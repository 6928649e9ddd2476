//! [`OrgToolTx`]: tools of applied organisations.

use super::R;
use crate::org_tools::OrgToolRow;

/// Tools of applied organisations.
pub trait OrgToolTx {
    fn org_tool(&mut self, name: &str) -> R<Option<OrgToolRow>>;
    /// The tools of one organisation (or of all), ordered by name.
    fn org_tools(&mut self, org: Option<&str>) -> R<Vec<OrgToolRow>>;
    /// Insert or replace the tool named `tool.name`.
    fn put_org_tool(&mut self, tool: &OrgToolRow) -> R<()>;
    fn delete_org_tool(&mut self, name: &str) -> R<()>;
}
