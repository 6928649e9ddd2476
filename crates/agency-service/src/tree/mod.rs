//! The tree of handlers and outcomes: handlers (bootstrap, delegation,
//! force-stop, retirement), outcomes (create, update, finish, the walks of
//! `area`), reopening, the hop count of hand-offs, and the Process Inbox
//! outcome that arriving mail opens. These call each other by nature —
//! finishing a root outcome retires its handler's subtree, retiring closes
//! outcomes — so they share one folder; mail and everything above use them,
//! and they send mail only through the outbox (`service/outbox.rs`).

pub(crate) mod area;
pub(crate) mod handlers;
pub(crate) mod handoffs;
pub(crate) mod inbox;
pub(crate) mod outcomes;
pub(crate) mod reopen;
