//! Declarative organisations (seeds 002 and 004): a folder of
//! `.agency`, `.agent` and `.tool` files (or seed 004's `agents.json`)
//! compiled into the checked, deterministic [`AgencyModel`] that `agency up`
//! stands up as handlers.
//!
//! This crate does no terminal I/O and no network I/O: it reads a source
//! folder and returns a model or diagnostics. Only this crate knows the
//! source formats. `docs/org-format.md` is the format's reference.

pub mod agency;
pub mod agent;
pub mod agents_json;
pub mod assist;
pub mod claude;
pub mod compile;
pub mod diag;
pub mod fields;
pub mod inherit;
pub mod json;
pub mod markdown;
pub mod model;
pub mod node;
pub mod pipeline;
pub mod raw;
pub mod resolve;
pub mod schema;
pub mod tool;
pub mod tool_access;
pub mod verbs;
pub mod walk;
pub mod yaml;

pub use assist::{Assist, AssistError, AssistRequest, EntityKind};
pub use claude::export_claude;
pub use compile::{CompileError, Compiled, compile, compile_with, to_json};
pub use diag::{Diagnostic, Severity};
pub use inherit::{Explanation, FieldOrigin};
pub use model::*;
pub use schema::{model_schema, sources_schema};
