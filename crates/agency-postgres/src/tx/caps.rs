//! [`CapabilityTx`] on PostgreSQL.
#![allow(unused_variables)]

use agency_core::{CapabilityId, HandlerId, Resource, ResourceKind, Timestamp};
use agency_store::model::{CapabilityRow, NewCapability, RevokeSelector};
use agency_store::tx::CapabilityTx;
use agency_store::tx::R;

use crate::PgTx;
use crate::convert::unported;

impl CapabilityTx for PgTx<'_> {
    fn insert_capability(&mut self, c: &NewCapability) -> R<CapabilityId> {
        Err(unported("insert_capability"))
    }
    fn capability(&mut self, id: CapabilityId) -> R<Option<CapabilityRow>> {
        Err(unported("capability"))
    }
    fn capabilities_on(&mut self, holder: HandlerId, resource: &Resource) -> R<Vec<CapabilityRow>> {
        Err(unported("capabilities_on"))
    }
    fn capabilities_held(&mut self, holder: HandlerId) -> R<Vec<CapabilityRow>> {
        Err(unported("capabilities_held"))
    }
    fn capabilities_of_kind(
        &mut self,
        holder: HandlerId,
        kind: ResourceKind,
    ) -> R<Vec<CapabilityRow>> {
        Err(unported("capabilities_of_kind"))
    }
    fn live_capabilities_on(&mut self, resource: &Resource) -> R<Vec<CapabilityRow>> {
        Err(unported("live_capabilities_on"))
    }
    fn revoke(&mut self, selector: &RevokeSelector, at: Timestamp) -> R<Vec<CapabilityRow>> {
        Err(unported("revoke"))
    }
}
