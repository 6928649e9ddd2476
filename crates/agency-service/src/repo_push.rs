//! `repo_push`: who may have the daemon push a branch to a repo's origin
//! (an agent whose handler holds Write on `repo:NAME`), and the audit
//! record of each push in the handler's audit log.
//!
//! The daemon does the git work; the service is asked twice. First
//! [`Service::repo_push_check`], before the daemon reads anything from the
//! agent's clone. Then, once the commit to push is known and before it
//! leaves for the origin, [`Service::repo_push_record`] checks again and
//! writes the audit record in the same transaction: a push the record does
//! not allow never happens, and no push happens without its record (a
//! capability revoked meanwhile stops it; an agent stopped meanwhile too,
//! since only a live agent authenticates). A push that then fails gets a
//! second record saying so ([`Service::repo_push_failed`]).

use agency_core::{Level, Principal, Resource};

use crate::Result;
use crate::error::ServiceError;
use crate::render::log;
use crate::render::{Author, render_audit_log_file};
use crate::service::{Caller, Op, Service, authenticate};

/// One push, as the audit log records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoPush<'a> {
    /// The repo's name in `[repos]`.
    pub repo: &'a str,
    /// The agent's local branch.
    pub branch: &'a str,
    /// The ref written on the origin (`refs/heads/agency/<handler>/…`).
    pub remote_ref: &'a str,
    /// The commit pushed (hex object id).
    pub commit: &'a str,
}

/// How every push's audit-log line starts (a failed push's too), so that a
/// run's view can list them.
pub(crate) const PUSH_PREFIX: &str = "repo push";

/// How long a failure reason may be in the audit log.
const MAX_FAILURE_CHARS: usize = 300;

impl Service {
    /// Whether the caller may push to repo `name`'s origin: an agent whose
    /// handler holds a live capability of level Write on `repo:NAME`.
    pub fn repo_push_check(&self, who: Principal, name: &str) -> Result<()> {
        agency_core::validate::check_name("repo", name)?;
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            may_push(tx, &caller, name)
        })
    }

    /// Before anything of the agent's clone is fetched, once the commit
    /// its branch names is known (from the clone's ref advertisement):
    /// whether the push may go on. A denial, or an "ask" without an
    /// approval of this exact push (the request is then made, and waits
    /// for the user), refuses it here (the fetch came before the
    /// approval check). An approval found is left for
    /// [`Service::repo_push_record`] to consume with the push's record.
    pub fn repo_push_admit(&self, who: Principal, push: &RepoPush<'_>) -> Result<()> {
        agency_core::validate::check_name("repo", push.repo)?;
        let admitted = self.admit_peek(
            &push_call(push),
            |op, caller| may_push(op.tx, caller, push.repo),
            who,
        )?;
        allowed(push, admitted)
    }

    /// Check again and record a push about to be made, in one transaction:
    /// an audit record in the caller's handler's audit log (repo, branch,
    /// ref, commit), under the calling agent.
    ///
    /// The push is a tool call admitted by the policy (`repo_push`, "ask"
    /// by default): the approval it needs is consumed in this same
    /// transaction; without one the push is refused with "pending approval
    /// N" and the request waits for the user, bound to the repo, branch,
    /// remote ref and commit.
    pub fn repo_push_record(&self, who: Principal, push: &RepoPush<'_>) -> Result<()> {
        agency_core::validate::check_name("repo", push.repo)?;
        let call = push_call(push);
        let admitted = self.admit_with(&call, None, |op, caller| {
            may_push(op.tx, caller, push.repo)
        }, |op, caller| {
            audit(
                op,
                caller,
                format!(
                    "{PUSH_PREFIX}: branch {} of repo {} (commit {}) to {} on the repo's origin",
                    push.branch, push.repo, push.commit, push.remote_ref
                ),
            )
        }, who)?;
        allowed(push, admitted)
    }

    /// Record that a push recorded by [`Service::repo_push_record`] failed,
    /// with why (cut to a few hundred characters).
    pub fn repo_push_failed(&self, who: Principal, push: &RepoPush<'_>, why: &str) -> Result<()> {
        let why: String = why.chars().take(MAX_FAILURE_CHARS).collect();
        self.write(|op| {
            let caller = authenticate(op.tx, who)?;
            audit(
                op,
                &caller,
                format!(
                    "{PUSH_PREFIX} failed: branch {} of repo {} (commit {}) to {}: {why}",
                    push.branch, push.repo, push.commit, push.remote_ref
                ),
            )
        })
    }
}

/// A push's admission as the push's answer: refused unless allowed.
fn allowed(push: &RepoPush<'_>, admitted: crate::approvals::Admission) -> Result<()> {
    match admitted {
        crate::approvals::Admission::Allow { .. } => Ok(()),
        other => Err(ServiceError::denied(format!(
            "failed to push branch {} of repo {}: {}",
            push.branch,
            push.repo,
            other.message()
        ))),
    }
}

/// The tool call a push is admitted as: bound to the repo, branch, remote
/// ref and commit.
fn push_call(push: &RepoPush<'_>) -> crate::approvals::ToolCallRequest {
    crate::approvals::ToolCallRequest {
        tool: "repo_push".into(),
        args: serde_json::json!({
            "repo": push.repo,
            "branch": push.branch,
            "remote_ref": push.remote_ref,
            "commit": push.commit,
        }),
        read_only: Some(false),
    }
}

/// Write `summary` in the caller's handler's audit log, under the calling
/// agent, and render the log's file again.
fn audit(op: &mut Op<'_>, caller: &Caller, summary: String) -> Result<()> {
    let h = caller.require_handler("push to a repo")?.id;
    log(op, h, caller.agent(), summary)?;
    render_audit_log_file(
        op,
        h,
        Author {
            handler: Some(h),
            agent: caller.agent(),
        },
    )
}

fn may_push(tx: &mut dyn agency_store::Tx, caller: &Caller, name: &str) -> Result<()> {
    let row = caller.require_handler("push to a repo")?;
    let held = tx.capabilities_on(row.id, &Resource::Repo(name.to_owned()))?;
    if held.iter().any(|c| c.level >= Level::Write) {
        return Ok(());
    }
    Err(ServiceError::denied(format!(
        "failed to push to repo {name}: pushing needs write on repo {name} (read only lets you clone); ask your boss to grant write on repo {name}"
    )))
}
