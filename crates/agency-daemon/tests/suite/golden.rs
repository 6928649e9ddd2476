//! Golden JSON tests: what the daemon answers today, pinned byte for byte
//! (apart from whitespace) so that moving code between crates cannot
//! change what the CLI and the agents read without anyone noticing.
//!
//! - `rest.rs` pins every `/v1` GET route the CLI uses, the POSTs that
//!   build the state, and a few error answers.
//! - `mcp.rs` pins `tools/list` (names, descriptions, input schemas and
//!   annotations: the agents' prompt) and the result of every Agency tool,
//!   called with valid arguments, plus error results.
//!
//! Both start from the same state (`world.rs`). Snapshots live in
//! `tests/suite/golden/snapshots/`; ids, times, hashes, tokens, ports and paths
//! are redacted by insta filters, known ids by name (`[root]`, `[plan]`).
//! Where the daemon orders a list by UUID (random on every run), the test
//! sorts it by its named text; every other order is pinned as served.
//! A renamed, added, removed or retyped field, or a moved one, fails the
//! test. To change an answer deliberately, change it, run
//! `cargo insta review` (or `INSTA_UPDATE=always cargo test -p
//! agency-daemon --test suite golden`), check the diff and say why in the
//! commit. In CI (`CI` set) a missing or different snapshot fails; nothing
//! is written.

#![allow(clippy::unwrap_used)]

mod json;
mod mcp;
mod rest;
mod world;
