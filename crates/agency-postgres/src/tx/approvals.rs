//! [`ApprovalTx`] on PostgreSQL.
#![allow(unused_variables)]

use agency_core::{CapabilityId, HandlerId};
use agency_store::model::{ApprovalRow, ApprovalStatus};
use agency_store::tx::ApprovalTx;
use agency_store::tx::R;

use crate::PgTx;
use crate::convert::unported;

impl ApprovalTx for PgTx<'_> {
    fn insert_approval(&mut self, a: &ApprovalRow) -> R<agency_core::policy::ApprovalId> {
        Err(unported("insert_approval"))
    }
    fn approval(&mut self, id: agency_core::policy::ApprovalId) -> R<Option<ApprovalRow>> {
        Err(unported("approval"))
    }
    fn approvals_bound(
        &mut self,
        handler: HandlerId,
        tool: &str,
        args_hash: &str,
    ) -> R<Vec<ApprovalRow>> {
        Err(unported("approvals_bound"))
    }
    fn update_approval(&mut self, a: &ApprovalRow, from: ApprovalStatus) -> R<bool> {
        Err(unported("update_approval"))
    }
    fn approvals_list(
        &mut self,
        all: bool,
        handler: Option<HandlerId>,
        limit: usize,
    ) -> R<Vec<ApprovalRow>> {
        Err(unported("approvals_list"))
    }
    fn set_capability_approval(&mut self, cap: CapabilityId, mode: &str) -> R<()> {
        Err(unported("set_capability_approval"))
    }
    fn capability_approval(&mut self, cap: CapabilityId) -> R<Option<String>> {
        Err(unported("capability_approval"))
    }
}
