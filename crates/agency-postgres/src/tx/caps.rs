//! [`CapabilityTx`] on PostgreSQL: capability rows and revocation.
//!
//! Revocation is one statement: a recursive CTE collects the selected live
//! capabilities and, through the `derived_from` index, every live capability
//! derived from them at any depth; the UPDATE marks them all and RETURNING
//! hands back exactly the rows it changed.

use agency_core::{CapabilityId, HandlerId, Resource, ResourceKind, Timestamp};
use agency_store::model::{CapabilityRow, NewCapability, RevokeSelector};
use agency_store::tx::CapabilityTx;
use agency_store::tx::R;
use tokio_postgres::types::ToSql;

use crate::PgTx;
use crate::convert::*;

/// The revoking statement around a selection of live capability ids; $1 is
/// the selector's argument, $2 the revocation time.
macro_rules! revoke_where {
    ($selection:literal) => {
        concat!(
            "WITH RECURSIVE
               rev(id) AS (
                 SELECT id FROM capabilities WHERE revoked_at IS NULL AND ",
            $selection,
            "
                 UNION
                 SELECT c.id FROM rev JOIN capabilities c ON c.derived_from = rev.id WHERE c.revoked_at IS NULL
               )
             UPDATE capabilities SET revoked_at = $2
              WHERE revoked_at IS NULL AND id IN (SELECT id FROM rev)
             RETURNING ",
            capability_cols!()
        )
    };
}

impl CapabilityTx for PgTx<'_> {
    fn insert_capability(&mut self, n: &NewCapability) -> R<CapabilityId> {
        query_value::<i64>(
            self.conn,
            "INSERT INTO capabilities (holder, resource_kind, resource_key, level, delegatable, scope, derived_from,
                                       granted_by, origin, created_at, revoked_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, NULL)
             RETURNING id",
            &[
                &n.holder.to_string(),
                &n.resource.kind().as_str(),
                &n.resource.key(),
                &n.level.as_i64(),
                &flag(n.delegatable),
                &opt_text(n.scope),
                &n.derived_from.map(|d| d.0),
                &opt_text(n.granted_by),
                &n.origin.as_str(),
                &n.created_at.0,
            ],
            || format!("insert a capability on {} for handler {}", n.resource, n.holder),
        )
        .map(CapabilityId)
    }

    fn capability(&mut self, id: CapabilityId) -> R<Option<CapabilityRow>> {
        query_opt(
            self.conn,
            concat!(
                "SELECT ",
                capability_cols!(),
                " FROM capabilities WHERE id = $1"
            ),
            &[&id.0],
            || format!("read capability {id}"),
            capability_row,
        )
    }

    fn capabilities_on(&mut self, holder: HandlerId, resource: &Resource) -> R<Vec<CapabilityRow>> {
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                capability_cols!(),
                " FROM capabilities
                  WHERE holder = $1 AND resource_kind = $2 AND resource_key = $3 AND revoked_at IS NULL
                  ORDER BY id"
            ),
            &[
                &holder.to_string(),
                &resource.kind().as_str(),
                &resource.key(),
            ],
            || format!("list the capabilities of handler {holder} on {resource}"),
            capability_row,
        )
    }

    fn capabilities_held(&mut self, holder: HandlerId) -> R<Vec<CapabilityRow>> {
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                capability_cols!(),
                " FROM capabilities WHERE holder = $1 AND revoked_at IS NULL ORDER BY id"
            ),
            &[&holder.to_string()],
            || format!("list the capabilities of handler {holder}"),
            capability_row,
        )
    }

    fn capabilities_of_kind(
        &mut self,
        holder: HandlerId,
        kind: ResourceKind,
    ) -> R<Vec<CapabilityRow>> {
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                capability_cols!(),
                " FROM capabilities
                  WHERE holder = $1 AND resource_kind = $2 AND revoked_at IS NULL
                  ORDER BY id"
            ),
            &[&holder.to_string(), &kind.as_str()],
            || {
                format!(
                    "list the {} capabilities of handler {holder}",
                    kind.as_str()
                )
            },
            capability_row,
        )
    }

    fn live_capabilities_on(&mut self, resource: &Resource) -> R<Vec<CapabilityRow>> {
        query_rows(
            self.conn,
            concat!(
                "SELECT ",
                capability_cols!(),
                " FROM capabilities
                  WHERE resource_kind = $1 AND resource_key = $2 AND revoked_at IS NULL
                  ORDER BY id"
            ),
            &[&resource.kind().as_str(), &resource.key()],
            || format!("list the live capabilities on {resource}"),
            capability_row,
        )
    }

    fn revoke(&mut self, selector: &RevokeSelector, at: Timestamp) -> R<Vec<CapabilityRow>> {
        let (sql, arg, what): (&str, Box<dyn ToSql + Sync>, String) = match selector {
            RevokeSelector::ScopedTo(o) => (
                revoke_where!("scope = $1"),
                Box::new(o.to_string()),
                format!("scoped to outcome {o}"),
            ),
            RevokeSelector::HeldBy(hs) => (
                revoke_where!("holder = ANY($1)"),
                Box::new(text_list(hs)),
                format!("held by {}", list_text(hs)),
            ),
            RevokeSelector::MailTo(hs) => (
                revoke_where!("resource_kind = 'mail' AND resource_key = ANY($1)"),
                Box::new(text_list(hs)),
                format!("for mail to {}", list_text(hs)),
            ),
            RevokeSelector::Ids(ids) => (
                revoke_where!("id = ANY($1)"),
                Box::new(ids.iter().map(|i| i.0).collect::<Vec<i64>>()),
                list_text(ids),
            ),
        };
        let mut rows = query_rows(
            self.conn,
            sql,
            &[&*arg, &at.0],
            || format!("revoke capabilities {what}"),
            capability_row,
        )?;
        // RETURNING yields rows in no promised order.
        rows.sort_by_key(|r| r.id);
        Ok(rows)
    }
}
