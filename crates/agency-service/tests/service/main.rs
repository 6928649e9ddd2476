//! Integration tests of the service layer against the real SQLite store and
//! blob store, in temporary directories. One binary, so it links once.

// Tests state their expectations with unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod support;

mod concurrency;
mod crash;
mod dag_props;
mod faults_io;
mod grant_props;
mod invisibility;
mod kb;
mod mail;
mod org_model;
mod org_props;
mod outcomes;
mod runs;
mod story;
mod tokens;
