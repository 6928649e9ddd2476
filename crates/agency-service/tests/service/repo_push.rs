//! Issue 10 item 5: pushing to a repo's origin needs Write on `repo:NAME`
//! (Read only lets a handler clone); each push is recorded in the
//! handler's audit log, in the same transaction as the second check.

use agency_core::{Level, Principal, Resource};
use agency_service::{GrantRequest, RepoPush};

use crate::support::{Env, assert_kind};

fn on_repo(level: Level) -> GrantRequest {
    GrantRequest {
        resource: Resource::Repo("demo".into()),
        level,
        delegatable: false,
    }
}

const PUSH: RepoPush<'static> = RepoPush {
    repo: "demo",
    branch: "work",
    remote_ref: "refs/heads/agency/h/work",
    commit: "0123456789abcdef0123456789abcdef01234567",
};

fn pushes(env: &Env) -> Vec<String> {
    env.svc
        .audit_read(Principal::User, Some(env.root))
        .unwrap()
        .into_iter()
        .map(|e| e.summary)
        .filter(|s| s.starts_with("repo push"))
        .collect()
}

#[test]
fn issue10_item5_read_is_not_enough_write_pushes_revoked_refuses() {
    let env = Env::new();
    let svc = &env.svc;
    // The capability rules alone: pushes allowed by the policy (the
    // approval of each push, the default, is tested in `approvals.rs`).
    svc.set_policy(
        agency_core::policy::Policy::from_toml(
            "[[rule]]\ntool = \"repo_push\"\nverdict = \"allow\"\n",
        )
        .unwrap(),
    );
    let me = env.agent(env.root);

    // Nothing held.
    let e = assert_kind(svc.repo_push_check(me, "demo"), "permission_denied");
    assert!(e.to_string().contains("grant write on repo demo"), "{e}");

    // Read lets it clone, not push.
    let read = svc
        .grant(Principal::User, env.root, &on_repo(Level::Read))
        .unwrap();
    svc.repo_check(me, "demo").unwrap();
    let e = assert_kind(svc.repo_push_check(me, "demo"), "permission_denied");
    assert!(e.to_string().contains("read only lets you clone"), "{e}");
    assert_kind(svc.repo_push_record(me, &PUSH), "permission_denied");
    assert!(pushes(&env).is_empty(), "a refused push is not recorded");

    // Write pushes, and the push is in the audit log under the agent.
    let write = svc
        .grant(Principal::User, env.root, &on_repo(Level::Write))
        .unwrap();
    svc.repo_push_check(me, "demo").unwrap();
    svc.repo_push_record(me, &PUSH).unwrap();
    let log = svc.audit_read(Principal::User, Some(env.root)).unwrap();
    let entry = log
        .iter()
        .find(|e| e.summary.starts_with("repo push"))
        .unwrap();
    assert_eq!(
        entry.summary,
        "repo push: branch work of repo demo (commit 0123456789abcdef0123456789abcdef01234567) to refs/heads/agency/h/work on the repo's origin"
    );
    let Principal::Agent { agent, .. } = me else {
        panic!("an agent principal")
    };
    assert_eq!(entry.agent, Some(agent));
    // Another repo is another resource.
    assert_kind(svc.repo_push_check(me, "other"), "permission_denied");

    // A failure is recorded too.
    svc.repo_push_failed(me, &PUSH, &"x".repeat(1000)).unwrap();
    let all = pushes(&env);
    assert_eq!(all.len(), 2);
    assert!(
        all[1].starts_with("repo push failed: branch work"),
        "{}",
        all[1]
    );
    assert!(all[1].len() < 500, "the reason is cut");

    // Revoked: refused again (the Read left does not push).
    svc.revoke(Principal::User, write).unwrap();
    assert_kind(svc.repo_push_check(me, "demo"), "permission_denied");
    assert_kind(svc.repo_push_record(me, &PUSH), "permission_denied");
    svc.revoke(Principal::User, read).unwrap();
    assert_kind(svc.repo_push_check(me, "demo"), "permission_denied");
    assert_eq!(pushes(&env).len(), 2);
}

#[test]
fn issue10_item5_only_an_agent_pushes_and_names_are_checked() {
    let env = Env::new();
    let svc = &env.svc;
    // The user has no handler prefix to push under.
    assert_kind(
        svc.repo_push_check(Principal::User, "demo"),
        "invalid_input",
    );
    assert_kind(
        svc.repo_push_record(Principal::User, &PUSH),
        "invalid_input",
    );
    let me = env.agent(env.root);
    for bad in ["../x", "", "a b"] {
        assert_kind(svc.repo_push_check(me, bad), "invalid_input");
    }
}
