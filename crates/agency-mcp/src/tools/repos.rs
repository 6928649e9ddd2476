//! The repo cache tools: clone a repository the handler holds a capability
//! on into the agent's workspace, from the daemon's local mirror (fast, and
//! no repeated clones from the origin); push a branch of such a clone back
//! to the repo's origin under the handler's own prefix, with the daemon's
//! credentials (the agent never holds them).

use std::path::{Component, Path, PathBuf};

use agency_api::{RepoCloned, RepoPushed};
use agency_core::git_ref::check_branch;
use agency_service::{RepoPush, ServiceError};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::reply::{ToolError, ToolResult, json};
use crate::tools::{Call, Effect, tool};
use crate::workspace::resolve_dir_in_workspace;
use crate::{CloneError, PushError, PushRequest, Pushed};

pub(super) fn routes() -> Vec<super::Declared> {
    vec![
        tool("repo_clone", REPO_CLONE, Effect::Write, repo_clone),
        tool("repo_push", REPO_PUSH, Effect::Write, repo_push),
    ]
}

const REPO_CLONE: &str = "Clone a repository from Agency's repo cache into your workspace, to work on it there (your workspace is deleted when you stop: push or write results to the Knowledge Base). \
`name` is the repo's name in Agency's configuration; `dest` is a new directory path relative to your workspace. \
Allowed only for repos your handler holds a capability on (ask your boss to grant read on repo NAME). \
Errors: permission_denied (no capability), invalid_path (dest outside the workspace or already there), invalid_input (unknown repo, no workspace), internal (git failed).";

const REPO_PUSH: &str = "Push a branch of a clone in your workspace (made with repo_clone) to the repo's origin, where it becomes branch agency/<your handler id>/<remote_branch>: a prefix your handler owns (pushing again there replaces it, even without a fast-forward; nothing outside it can be written). Agency pushes with its own credentials; commit your work first. \
`repo` is the repo's name in Agency's configuration; `path` the clone's directory relative to your workspace; `branch` the local branch to push; `remote_branch` the name under your prefix (default: `branch`). Branch names are plain names like \"fix/parser\" (no '..', no leading '-', no 'refs/'). Returns the ref written and the commit. \
Allowed only for repos your handler holds write on (ask your boss to grant write on repo NAME). \
Errors: permission_denied (no write capability), invalid_path (path outside the workspace or not a directory), invalid_input (bad branch name, unknown repo, not a git clone, branch missing, a clone borrowing objects from elsewhere), internal (git failed).";

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
    // Checked here for a clear answer; the cache places the clone again
    // without trusting this check (the agent may change its workspace
    // meanwhile).
    new_dir_in(workspace, &a.dest)?;
    call.svc.repo_check(call.who(), &a.name)?;
    let Some(repos) = call.repos.as_ref() else {
        return Err(ToolError::invalid(format!(
            "failed to clone repo {}: this Agency has no repo cache configured",
            a.name
        )));
    };
    let source = repos
        .clone_repo(&a.name, workspace, Path::new(&a.dest))
        .map_err(|e| match e {
            CloneError::Invalid(why) => ToolError {
                kind: "invalid_path",
                message: format!("failed to clone repo {} to {:?}: {why}", a.name, a.dest),
            },
            CloneError::Failed(why) => {
                ToolError::internal(format!("failed to clone repo {}: {why}", a.name))
            }
        })?;
    json(&RepoCloned {
        repo: a.name,
        dest: a.dest,
        source,
    })
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RepoPushArgs {
    /// The repository's name in Agency's configuration.
    repo: String,
    /// The clone's directory, relative to your workspace (e.g. "src/agency").
    path: String,
    /// The local branch whose commit is pushed.
    branch: String,
    /// The branch name under your prefix on the origin (default: `branch`).
    #[serde(default)]
    remote_branch: Option<String>,
}

fn repo_push(call: &Call, a: RepoPushArgs) -> ToolResult {
    let Some(workspace) = call.identity.workspace.as_deref() else {
        return Err(ToolError::invalid(
            "this agent has no workspace to push from",
        ));
    };
    let remote_branch = a.remote_branch.as_deref().unwrap_or(&a.branch);
    check_branch("branch", &a.branch).map_err(|e| ToolError::invalid(e.0))?;
    check_branch("remote_branch", remote_branch).map_err(|e| ToolError::invalid(e.0))?;
    let clone = resolve_dir_in_workspace(workspace, &a.path)?;
    let workspace = workspace.canonicalize().map_err(|e| {
        ToolError::internal(format!(
            "failed to use your workspace {}: {e}",
            workspace.display()
        ))
    })?;
    // Before the daemon reads anything of the clone.
    call.svc.repo_push_check(call.who(), &a.repo)?;
    let Some(repos) = call.repos.as_ref() else {
        return Err(ToolError::invalid(format!(
            "failed to push to repo {}: this Agency has no repo cache configured",
            a.repo
        )));
    };
    let req = PushRequest {
        repo: &a.repo,
        handler: call.identity.handler,
        agent: call.identity.agent,
        workspace: &workspace,
        clone: &clone,
        branch: &a.branch,
        remote_branch,
    };
    // The service's second check and the audit record, once the commit is
    // known; a refusal is kept to be returned with its own kind.
    let mut refusal: Option<ServiceError> = None;
    let mut recorded: Option<(String, String)> = None;
    let mut admit_refusal: Option<ServiceError> = None;
    let mut admit = |p: &Pushed| {
        let push = RepoPush {
            repo: &a.repo,
            branch: &a.branch,
            remote_ref: &p.remote_ref,
            commit: &p.commit,
        };
        call.svc.repo_push_admit(call.who(), &push).map_err(|e| {
            let text = e.to_string();
            admit_refusal = Some(e);
            text
        })
    };
    let result = repos.push_repo(&req, &mut admit, &mut |p: &Pushed| {
        let record = RepoPush {
            repo: &a.repo,
            branch: &a.branch,
            remote_ref: &p.remote_ref,
            commit: &p.commit,
        };
        match call.svc.repo_push_record(call.who(), &record) {
            Ok(()) => {
                recorded = Some((p.remote_ref.clone(), p.commit.clone()));
                Ok(())
            }
            Err(e) => {
                let text = e.to_string();
                refusal = Some(e);
                Err(text)
            }
        }
    });
    let pushed = match result {
        Ok(p) => p,
        Err(e) => {
            if let Some(refused) = refusal.or(admit_refusal) {
                return Err(refused.into());
            }
            let message = format!("failed to push to repo {}: {e}", a.repo);
            if let Some((remote_ref, commit)) = &recorded {
                let record = RepoPush {
                    repo: &a.repo,
                    branch: &a.branch,
                    remote_ref,
                    commit,
                };
                // The audit log already says the push was made: say it failed.
                if let Err(le) = call
                    .svc
                    .repo_push_failed(call.who(), &record, &e.to_string())
                {
                    tracing::warn!(error = %le, "failed to record a failed push");
                }
            }
            return Err(match e {
                PushError::Invalid(_) => ToolError::invalid(message),
                PushError::Refused(_) | PushError::Failed(_) => ToolError::internal(message),
            });
        }
    };
    let remote_branch = pushed
        .remote_ref
        .strip_prefix("refs/heads/")
        .unwrap_or(&pushed.remote_ref)
        .to_owned();
    json(&RepoPushed {
        repo: a.repo,
        branch: a.branch,
        remote_branch,
        remote_ref: pushed.remote_ref,
        commit: pushed.commit,
    })
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
