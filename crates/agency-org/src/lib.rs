//! Declarative organisations (issue 12; seeds 002 and 004): a folder of
//! `.agency`, `.agent` and `.tool` files (or seed 004's `agents.json`)
//! compiled into the checked, deterministic [`AgencyModel`] that `agency up`
//! stands up as handlers.
//!
//! This crate does no terminal I/O and no network I/O: it reads a source
//! folder and returns a model or diagnostics. Only this crate knows the
//! source formats.

pub mod model;

pub use model::*;
