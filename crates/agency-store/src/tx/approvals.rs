//! [`ApprovalTx`]: approvals: requests bound to a tool call, their
//! decisions, and capabilities that need one for each use.

use agency_core::{CapabilityId, HandlerId};

use super::R;
use crate::model::{ApprovalRow, ApprovalStatus};

/// Approvals: requests bound to a tool call, their decisions, and
/// capabilities that need one for each use.
pub trait ApprovalTx {
    /// Insert an approval request (its `id` is ignored); returns its id.
    /// Fails with `StoreError::Unique` if a request bound to the same
    /// (handler, tool, args hash) is still pending.
    fn insert_approval(&mut self, a: &ApprovalRow) -> R<agency_core::policy::ApprovalId>;
    fn approval(&mut self, id: agency_core::policy::ApprovalId) -> R<Option<ApprovalRow>>;
    /// Pending, approved and denied requests bound to (handler, tool, args hash),
    /// oldest first.
    fn approvals_bound(
        &mut self,
        handler: HandlerId,
        tool: &str,
        args_hash: &str,
    ) -> R<Vec<ApprovalRow>>;
    /// Overwrite a request's status and decision columns if its status is
    /// still `from`; returns whether it was.
    fn update_approval(&mut self, a: &ApprovalRow, from: ApprovalStatus) -> R<bool>;
    /// Requests newest first (pending only unless `all`; of one handler if
    /// given), at most `limit`.
    fn approvals_list(
        &mut self,
        all: bool,
        handler: Option<HandlerId>,
        limit: usize,
    ) -> R<Vec<ApprovalRow>>;
    /// Mark a capability as needing approval for each use (`each_use`).
    fn set_capability_approval(&mut self, cap: CapabilityId, mode: &str) -> R<()>;
    fn capability_approval(&mut self, cap: CapabilityId) -> R<Option<String>>;
}
