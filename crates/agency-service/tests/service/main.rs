//! Integration tests of the service layer against the real SQLite store and
//! blob store, in temporary directories. One binary, so it links once.

// Tests state their expectations with unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod support;

mod approvals;
mod approvals_wake;
mod bounded;
mod budgets;
mod budgets_ledger;
mod calls;
mod concurrency;
mod crash;
mod dag_props;
mod egress;
mod escalation;
mod event_log;
mod faults_io;
mod grant_props;
mod group_commit;
mod handoffs;
mod handover;
mod invisibility;
mod kb;
mod leases;
mod lessons;
mod mail;
mod mail_caps;
mod mcp_pins;
mod memory;
mod org_messages;
mod org_model;
mod org_props;
mod org_tools;
mod orgs_mail;
mod orgs_up;
mod outcome_visibility;
mod outcomes;
mod pipeline_calls;
mod pipeline_library;
mod pipeline_scores;
mod pipeline_tasks;
mod pipelines;
mod problems;
mod quotas;
mod reopen;
mod repo_push;
mod retention;
mod run_logs;
mod runs;
mod shared_store;
mod spawn_prep;
mod story;
mod system;
mod tokens;
