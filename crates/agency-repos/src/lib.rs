//! The repo cache behind `repo_clone` and `repo_push`: a bare mirror per
//! `[repos]` entry under the home's `repos/`, refreshed with a deadline,
//! cloned from through git's transport into a staging directory and moved
//! into the agent's workspace beneath it (`place.rs`); a push reads the
//! agent's clone only through a `git-upload-pack` run as the agent and
//! lands under `agency/<handler>/…` on the origin (`push.rs`).
//!
//! [`GitRepoCache`] is the agent-facing `agency_mcp::RepoCache`: it is
//! given the mirrors' directory, the configured sources and the cache's
//! settings, and shares [`UploadPacks`] with the supervisor, which
//! registers each sandboxed agent's command prefix. It decides no
//! permission: the service admits and records every clone and push.

mod cache;
mod place;
mod push;

pub use cache::GitRepoCache;
pub use push::UploadPacks;
