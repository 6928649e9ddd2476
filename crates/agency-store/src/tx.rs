//! [`Tx`]: the queries and changes one transaction can make, as one trait
//! per area of the store (one file each under `tx/`).
//!
//! A backend implements every area trait on its transaction type; [`Tx`]
//! is their sum and comes for free (a blanket impl), so the service keeps
//! handing `&mut dyn Tx` around. On a `dyn Tx` every area's methods resolve
//! without importing anything (a trait object's supertrait methods are its
//! own); code generic over `T: Tx`, or on a backend's own transaction type,
//! brings the area traits into scope with `use agency_store::prelude::*;`.
//!
//! What every area method promises, whatever the backend:
//! - Row-level and rule-free: the store answers and applies, the service
//!   decides. "Live" capabilities are those not revoked.
//! - A transaction reads its own writes, and nothing committed after its
//!   snapshot (a read) or by a writer after it (writes are serialised, see
//!   [`crate::Store`]).
//! - Lists are ordered deterministically, as each method says; ties are
//!   broken by id or by insertion order, so two calls on the same data
//!   return the same order.
//! - Counts and pages are bounded: a count "up to `limit`" costs at most
//!   that many index entries, never a scan; a page's cursor is the row's
//!   own key (a sequence number the store assigned, a message id, a version
//!   number) compared as a row value in the list's order, so equal
//!   timestamps page correctly.
//! - `StoreError::Unique` means "already exists": an `insert_*` of a key
//!   (id, hash, name) that is there, or a uniqueness rule the method
//!   names (one live agent per handler, one pending approval per binding);
//!   a missing row that a change names, a failing database or a
//!   violated reference is `StoreError::Backend`; an undecodable value
//!   `StoreError::Corrupt`.

mod agents;
mod approvals;
mod audit_log;
mod budgets;
mod calls;
mod caps;
mod events;
mod handler_settings;
mod handlers;
mod kb;
mod leases;
mod lessons;
mod mail;
mod maintenance;
mod mcp_pins;
mod memory;
mod org_messages;
mod org_tools;
mod orgs;
mod outcomes;
mod pipelines;
mod problems;
mod runs;
mod usage;

pub use agents::AgentTx;
pub use approvals::ApprovalTx;
pub use audit_log::AuditLogTx;
pub use budgets::BudgetTx;
pub use calls::CallTx;
pub use caps::CapabilityTx;
pub use events::EventTx;
pub use handler_settings::HandlerSettingsTx;
pub use handlers::{HandlerTx, chain_order};
pub use kb::KbTx;
pub use leases::LeaseTx;
pub use lessons::LessonTx;
pub use mail::MailTx;
pub use maintenance::MaintenanceTx;
pub use mcp_pins::McpPinTx;
pub use memory::MemoryTx;
pub use org_messages::OrgMessageTx;
pub use org_tools::OrgToolTx;
pub use orgs::OrgTx;
pub use outcomes::{OutcomeTx, SubtreeRows};
pub use pipelines::PipelineTx;
pub use problems::ProblemTx;
pub use runs::RunTx;
pub use usage::UsageTx;

use crate::error::StoreError;

pub type R<T> = Result<T, StoreError>;

/// Everything one transaction can do: the sum of the area traits.
/// Implemented for every type that implements them all.
pub trait Tx:
    KbTx
    + OutcomeTx
    + HandlerTx
    + HandlerSettingsTx
    + AgentTx
    + AuditLogTx
    + RunTx
    + CapabilityTx
    + MailTx
    + UsageTx
    + BudgetTx
    + ApprovalTx
    + McpPinTx
    + OrgTx
    + OrgToolTx
    + OrgMessageTx
    + MemoryTx
    + MaintenanceTx
    + EventTx
    + ProblemTx
    + PipelineTx
    + LessonTx
    + CallTx
    + LeaseTx
{
}

impl<T> Tx for T where
    T: KbTx
        + OutcomeTx
        + HandlerTx
        + HandlerSettingsTx
        + AgentTx
        + AuditLogTx
        + RunTx
        + CapabilityTx
        + MailTx
        + UsageTx
        + BudgetTx
        + ApprovalTx
        + McpPinTx
        + OrgTx
        + OrgToolTx
        + OrgMessageTx
        + MemoryTx
        + MaintenanceTx
        + EventTx
        + ProblemTx
        + PipelineTx
        + LessonTx
        + CallTx
        + LeaseTx
        + ?Sized
{
}

/// `use agency_store::prelude::*;` brings [`Tx`] and every area trait
/// into scope, so that methods can be called on a `&mut dyn Tx`.
pub mod prelude {
    pub use super::{
        AgentTx, ApprovalTx, AuditLogTx, BudgetTx, CallTx, CapabilityTx, EventTx,
        HandlerSettingsTx, HandlerTx, KbTx, LeaseTx, LessonTx, MailTx, MaintenanceTx, McpPinTx,
        MemoryTx, OrgMessageTx, OrgToolTx, OrgTx, OutcomeTx, PipelineTx, ProblemTx, RunTx, Tx,
        UsageTx,
    };
}
