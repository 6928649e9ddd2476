//! The area traits of `agency_store::Tx` on [`crate::PgTx`], one file each,
//! named as the SQLite store's.

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
