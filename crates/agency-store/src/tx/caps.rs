//! [`CapabilityTx`]: capabilities: grants, lookups by holder, resource and
//! kind, revocation.

use agency_core::{CapabilityId, HandlerId, Resource, ResourceKind, Timestamp};

use super::R;
use crate::model::{CapabilityRow, NewCapability, RevokeSelector};

/// Capabilities: grants, lookups by holder, resource and kind, revocation.
pub trait CapabilityTx {
    fn insert_capability(&mut self, c: &NewCapability) -> R<CapabilityId>;
    fn capability(&mut self, id: CapabilityId) -> R<Option<CapabilityRow>>;
    /// Live capabilities `holder` has on `resource`, ordered by id.
    fn capabilities_on(&mut self, holder: HandlerId, resource: &Resource) -> R<Vec<CapabilityRow>>;
    /// Live capabilities `holder` has, ordered by id.
    fn capabilities_held(&mut self, holder: HandlerId) -> R<Vec<CapabilityRow>>;
    /// Live capabilities `holder` has on resources of `kind`, ordered by
    /// id (an egress check reads these, not every KB capability held).
    fn capabilities_of_kind(
        &mut self,
        holder: HandlerId,
        kind: ResourceKind,
    ) -> R<Vec<CapabilityRow>>;
    /// Live capabilities anyone holds on `resource`, ordered by id.
    fn live_capabilities_on(&mut self, resource: &Resource) -> R<Vec<CapabilityRow>>;
    /// Revoke the selected live capabilities and, transitively, every live
    /// capability derived from them; returns the rows revoked (with
    /// `revoked_at` set), ordered by id.
    fn revoke(&mut self, selector: &RevokeSelector, at: Timestamp) -> R<Vec<CapabilityRow>>;
}
