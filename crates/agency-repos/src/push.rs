//! `repo_push`: the daemon pushes the commit of an agent's branch to the
//! repo's origin as `agency/<handler>/<branch>`, with its own credentials.
//!
//! The agent's clone is hostile: its `.git/config` may set
//! `core.fsmonitor`, `core.sshCommand`, `core.pager`, hooks… that any git
//! command run *inside* it would execute as the daemon, outside every
//! sandbox. So no git runs in the agent's repository. From the daemon's
//! mirror, `git fetch` reads the agent's branch into a temporary ref
//! (`refs/agency-push/<uuid>`); on the agent's side only `git-upload-pack`
//! runs, the one git command designed to serve untrusted repositories (it
//! runs no hooks, ignores `uploadpack.packObjectsHook` in repository
//! config, and is told not to lazy-fetch), and the objects it sends are
//! checked (`transfer.fsckObjects`). Then `git push <origin> +<commit>:
//! refs/heads/agency/<handler>/<branch>` from the mirror (force within the
//! handler's prefix; the destination is built here, never taken from the
//! agent), and the temporary ref is deleted. Both run with the repo
//! cache's deadline and process group, the mirror's hooks off.
//!
//! What the upload-pack may read is the agent's to decide only within what
//! the agent itself may read: a clone whose `objects/info/alternates`
//! points at another agent's clone or the mirror, a `.git` that is a file
//! or symlink to elsewhere, or an `objects` directory that is a symlink
//! would let it push objects it cannot read. Those are refused here, but a
//! check before the fetch can be raced by an agent that swaps files in
//! between; the wall is that the upload-pack runs *as the agent*: the
//! coordinator registers each sandboxed agent's command prefix (`agency
//! sandbox-exec --policy <the agent's policy> --`) in [`UploadPacks`], and
//! the upload-pack is then `<prefix> git-upload-pack`, confined like the
//! agent. An agent without a registered prefix gets a plain
//! `git-upload-pack` (it is not sandboxed either).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use agency_core::AgentId;
use agency_core::git_ref::{check_branch, push_branch};
use agency_mcp::{PushError, PushRequest, Pushed};

use crate::cache::{GitRepoCache, path_str};

/// The upload-pack program, after any prefix.
const UPLOAD_PACK: &str = "git-upload-pack";

/// Per agent, the command prefix its clone's upload-pack runs under (the
/// sandbox's launcher); agents without one get a plain `git-upload-pack`.
#[derive(Debug, Default)]
pub struct UploadPacks(Mutex<HashMap<AgentId, Vec<String>>>);

// The supervisor calls `set` when it spawns a sandboxed agent and
// `forget_agent` when it ends.
impl UploadPacks {
    /// Read `agent`'s clones with `prefix… git-upload-pack <git dir>`.
    pub fn set(&self, agent: AgentId, prefix: Vec<String>) {
        self.lock().insert(agent, prefix);
    }

    pub fn forget_agent(&self, agent: AgentId) {
        self.lock().remove(&agent);
    }
}

impl UploadPacks {
    /// The `--upload-pack` command for `agent`: git runs it through the
    /// shell with the repository path appended, so every word is quoted.
    fn command(&self, agent: AgentId) -> String {
        let guard = self.lock();
        let prefix = guard.get(&agent).map(Vec::as_slice).unwrap_or_default();
        prefix
            .iter()
            .map(String::as_str)
            .chain([UPLOAD_PACK])
            .map(shell_quote)
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<AgentId, Vec<String>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// `word` as one POSIX shell word.
fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

pub(crate) fn push(
    cache: &GitRepoCache,
    req: &PushRequest<'_>,
    admit: &mut dyn FnMut(&Pushed) -> Result<(), String>,
    record: &mut dyn FnMut(&Pushed) -> Result<(), String>,
) -> Result<Pushed, PushError> {
    let invalid = |e: agency_core::InvalidInput| PushError::Invalid(e.0);
    // Checked by the tool already; the prefix rule is too important to
    // rest on one caller.
    check_branch("branch", req.branch).map_err(invalid)?;
    check_branch("remote_branch", req.remote_branch).map_err(invalid)?;
    let Some(repo) = cache.repo(req.repo) else {
        return Err(PushError::Invalid(format!(
            "no repo named {} is configured in [repos]",
            req.repo
        )));
    };
    let git_dir = agent_git_dir(req.workspace, req.clone)?;
    let remote_ref = format!("refs/heads/{}", push_branch(req.handler, req.remote_branch));
    let failed = PushError::Failed;

    // The repo's lock for the whole push: a mirror refresh (`--prune`)
    // would delete the temporary ref under us.
    let mut fetched = repo.fetched.lock().unwrap_or_else(|p| p.into_inner());
    let mirror = cache
        .mirror_locked(req.repo, repo, &mut fetched, false)
        .map_err(failed)?;
    let mirror = path_str(&mirror).map_err(failed)?;
    let temp = TempRef {
        cache,
        mirror: &mirror,
        name: format!("refs/agency-push/{}", uuid::Uuid::new_v4()),
    };
    let what = format!("read branch {} of your clone", req.branch);
    let upload_pack = format!("--upload-pack={}", cache.upload_packs.command(req.agent));
    let git_dir = path_str(&git_dir).map_err(failed)?;
    let branch_ref = format!("refs/heads/{}", req.branch);
    // First only the clone's ref advertisement: which commit the branch
    // names. The push is admitted for that commit before a single object
    // of the agent's is read (a denial or a pending approval stops it
    // here), and what is fetched next must be that commit.
    let advertised = advertised_commit(cache, &upload_pack, &git_dir, &branch_ref, &what)?;
    admit(&Pushed {
        remote_ref: remote_ref.clone(),
        commit: advertised.clone(),
    })
    .map_err(PushError::Refused)?;
    cache
        .git(
            &[
                "--git-dir",
                &mirror,
                "-c",
                "protocol.file.allow=always",
                "-c",
                "core.hooksPath=/dev/null",
                "-c",
                "transfer.fsckObjects=true",
                "fetch",
                "--quiet",
                "--no-tags",
                "--no-write-fetch-head",
                "--no-recurse-submodules",
                "--no-auto-gc",
                "--no-auto-maintenance",
                &upload_pack,
                "--end-of-options",
                &git_dir,
                &format!("{branch_ref}:{}", temp.name),
            ],
            None,
            &what,
        )
        .map_err(|e| {
            if e.contains("couldn't find remote ref") {
                PushError::Invalid(format!(
                    "your clone has no branch {}; commit on it first (git switch -c {} && git commit)",
                    req.branch, req.branch
                ))
            } else {
                PushError::Failed(e)
            }
        })?;
    let commit = cache
        .git_out(
            &[
                "--git-dir",
                &mirror,
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("{}^{{commit}}", temp.name),
            ],
            None,
            &what,
        )
        .map_err(|_| {
            PushError::Invalid(format!(
                "branch {} of your clone does not name a commit",
                req.branch
            ))
        })?;
    if commit != advertised {
        return Err(PushError::Invalid(format!(
            "branch {} of your clone moved while it was being read (commit {advertised}, then {commit}); push again once it stays put",
            req.branch
        )));
    }
    let pushed = Pushed { remote_ref, commit };
    record(&pushed).map_err(PushError::Refused)?;
    cache
        .git(
            &[
                "--git-dir",
                &mirror,
                "-c",
                "core.hooksPath=/dev/null",
                "-c",
                "push.recurseSubmodules=no",
                "-c",
                "push.followTags=false",
                "-c",
                "push.gpgSign=false",
                "push",
                "--quiet",
                "--no-verify",
                "--end-of-options",
                &repo.source,
                &format!("+{}:{}", pushed.commit, pushed.remote_ref),
            ],
            None,
            &format!("push to the origin of repo {}", req.repo),
        )
        .map_err(failed)?;
    tracing::info!(
        repo = req.repo,
        remote_ref = pushed.remote_ref,
        commit = pushed.commit,
        "pushed"
    );
    Ok(pushed)
}

/// The commit `branch_ref` names in the agent's clone, from its ref
/// advertisement alone (`git ls-remote` through the same upload-pack as
/// the fetch): no object of the clone is read.
fn advertised_commit(
    cache: &GitRepoCache,
    upload_pack: &str,
    git_dir: &str,
    branch_ref: &str,
    what: &str,
) -> Result<String, PushError> {
    let out = cache
        .git_out(
            &[
                "-c",
                "protocol.file.allow=always",
                "ls-remote",
                "--quiet",
                upload_pack,
                "--end-of-options",
                git_dir,
                branch_ref,
            ],
            None,
            what,
        )
        .map_err(PushError::Failed)?;
    let branch = branch_ref.trim_start_matches("refs/heads/");
    let missing = || {
        PushError::Invalid(format!(
            "your clone has no branch {branch}; commit on it first (git switch -c {branch} && git commit)"
        ))
    };
    let line = out
        .lines()
        .find(|l| l.split('\t').nth(1) == Some(branch_ref))
        .ok_or_else(missing)?;
    let commit = line.split('\t').next().unwrap_or_default();
    let is_id = matches!(commit.len(), 40 | 64) && commit.bytes().all(|b| b.is_ascii_hexdigit());
    if !is_id {
        return Err(PushError::Failed(format!(
            "failed to {what}: the clone advertised {commit:?} for {branch_ref}, not an object id"
        )));
    }
    Ok(commit.to_ascii_lowercase())
}

/// The git directory of the agent's clone at `clone`, if it is one we read:
/// a real `.git` directory inside the workspace whose objects are its own.
fn agent_git_dir(workspace: &Path, clone: &Path) -> Result<PathBuf, PushError> {
    let invalid = |why: String| Err(PushError::Invalid(why));
    if !clone.starts_with(workspace) {
        return invalid(format!("{} is outside your workspace", clone.display()));
    }
    let git_dir = clone.join(".git");
    match git_dir.symlink_metadata() {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return invalid(format!(
                "{} is not a directory (a .git file or symlink pointing elsewhere); push from a clone made with repo_clone",
                git_dir.display()
            ));
        }
        Err(_) => {
            return invalid(format!(
                "{} is not a git clone (no .git directory); clone it with repo_clone",
                clone.display()
            ));
        }
    }
    let objects = git_dir.join("objects");
    if !objects.symlink_metadata().is_ok_and(|m| m.is_dir()) {
        return invalid(format!(
            "{} is not a directory of its own (missing or a symlink)",
            objects.display()
        ));
    }
    for borrowed in ["objects/info/alternates", "commondir"] {
        if git_dir.join(borrowed).symlink_metadata().is_ok() {
            return invalid(format!(
                "your clone borrows objects from another repository (.git/{borrowed}); push from a clone made with repo_clone, which has all its objects"
            ));
        }
    }
    Ok(git_dir)
}

/// The temporary ref in the mirror, deleted however the push ends.
struct TempRef<'a> {
    cache: &'a GitRepoCache,
    mirror: &'a str,
    name: String,
}

impl Drop for TempRef<'_> {
    fn drop(&mut self) {
        let deleted = self.cache.git(
            &["--git-dir", self.mirror, "update-ref", "-d", &self.name],
            None,
            "delete a temporary ref",
        );
        if let Err(e) = deleted {
            tracing::warn!(error = %e, "failed to delete a push's temporary ref");
        }
    }
}

#[cfg(test)]
#[path = "push_tests.rs"]
mod tests;
