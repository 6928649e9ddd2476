//! The repo cache tool: clone a repository the handler holds a capability
//! on into the agent's workspace, from the daemon's local mirror (fast, and
//! no repeated clones from the origin).

use std::path::{Component, Path, PathBuf};

use rmcp::handler::server::router::tool::ToolRoute;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::reply::{ToolError, ToolResult};
use crate::server::AgencyMcp;
use crate::tools::{Call, Effect, tool};

pub(super) fn routes() -> Vec<ToolRoute<AgencyMcp>> {
    vec![tool("repo_clone", REPO_CLONE, Effect::Write, repo_clone)]
}

const REPO_CLONE: &str = "Clone a repository from Agency's repo cache into your workspace, to work on it there (your workspace is deleted when you stop: push or write results to the Knowledge Base). \
`name` is the repo's name in Agency's configuration; `dest` is a new directory path relative to your workspace. \
Allowed only for repos your handler holds a capability on (ask your boss to grant read on repo NAME). \
Errors: permission_denied (no capability), invalid_path (dest outside the workspace or already there), invalid_input (unknown repo, no workspace), internal (git failed).";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RepoCloneArgs {
    /// The repository's name in Agency's configuration.
    name: String,
    /// A directory to create, relative to your workspace (e.g. "src/agency").
    dest: String,
}

fn repo_clone(call: &Call, a: RepoCloneArgs) -> ToolResult {
    let Some(workspace) = call.identity.workspace.as_deref() else {
        return Err(ToolError::invalid(
            "this agent has no workspace to clone into",
        ));
    };
    let dest = new_dir_in(workspace, &a.dest)?;
    call.svc.repo_check(call.who(), &a.name)?;
    let Some(repos) = call.repos.as_ref() else {
        return Err(ToolError::invalid(format!(
            "failed to clone repo {}: this Agency has no repo cache configured",
            a.name
        )));
    };
    let source = repos
        .clone_repo(&a.name, &dest)
        .map_err(|e| ToolError::internal(format!("failed to clone repo {}: {e}", a.name)))?;
    Ok(json!({ "repo": a.name, "dest": a.dest, "source": source }))
}

/// A directory that does not exist yet, inside the workspace: relative, no
/// `..`, no NUL, and its parent (after resolving symlinks) in the workspace.
fn new_dir_in(workspace: &Path, dest: &str) -> Result<PathBuf, ToolError> {
    let bad = |why: &str| ToolError {
        kind: "invalid_path",
        message: format!("failed to use destination {dest:?}: {why}"),
    };
    if dest.is_empty() || dest.contains('\0') {
        return Err(bad(
            "give a non-empty directory path relative to your workspace",
        ));
    }
    let rel = Path::new(dest);
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(bad("it must be relative to your workspace, without '..'"));
    }
    let full = workspace.join(rel);
    if full.symlink_metadata().is_ok() {
        return Err(bad("it already exists; pick a new directory"));
    }
    let parent = full.parent().unwrap_or(workspace);
    let (Ok(root), Ok(parent)) = (workspace.canonicalize(), parent.canonicalize()) else {
        return Err(bad("its parent directory does not exist in your workspace"));
    };
    if !parent.starts_with(&root) {
        return Err(bad("its parent leads outside your workspace (a symlink?)"));
    }
    Ok(full)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn destinations_are_confined() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::create_dir(ws.join("src")).unwrap();
        std::os::unix::fs::symlink("/tmp", ws.join("out")).unwrap();
        assert_eq!(new_dir_in(ws, "repo").unwrap(), ws.join("repo"));
        assert_eq!(new_dir_in(ws, "src/repo").unwrap(), ws.join("src/repo"));
        for bad in ["", "../x", "/tmp/x", "src", "out/x", "a\0b", "missing/x"] {
            assert!(new_dir_in(ws, bad).is_err(), "{bad:?}");
        }
    }
}
