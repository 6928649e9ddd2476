//! Issue 11 item 4: approval gates. A call the policy says to ask about
//! becomes one durable request per (handler, tool, argument hash), mailed
//! to the user; an approval lets exactly one identical call through (every
//! one with `always`), consumed in the transaction that admits it; only the
//! user decides; an approval never serves another handler or other
//! arguments; `each_use` capabilities make every use ask.

use std::sync::{Arc, Barrier};

use agency_core::policy::{ApprovalId, Policy};
use agency_core::{HandlerId, Level, MailTarget, Principal, Resource};
use agency_service::{Admission, ApprovalStatus, GrantRequest, RepoPush, ToolCallRequest};
use serde_json::json;

use crate::support::{Env, assert_kind};

fn call(tool: &str, args: serde_json::Value) -> ToolCallRequest {
    ToolCallRequest {
        tool: tool.into(),
        args,
        read_only: None,
    }
}

/// A destructive command the default policy asks about.
fn risky() -> ToolCallRequest {
    call(
        "bash",
        json!({"command": "rm -rf /tmp/agency-approval-test"}),
    )
}

fn pending(a: Admission) -> ApprovalId {
    match a {
        Admission::Pending { approval, reason } => {
            assert!(!reason.is_empty());
            approval
        }
        other => panic!("expected pending, got {other:?}"),
    }
}

fn underling(env: &Env) -> HandlerId {
    let o = env.outcome(env.root, "work", &[env.root.root()]);
    env.svc
        .delegate(env.agent(env.root), o, &[])
        .unwrap()
        .handler
}

#[test]
fn harmless_runs_denied_never_asks() {
    let env = Env::new();
    let me = env.agent(env.root);
    assert_eq!(
        env.svc
            .tool_call_admit(me, call("bash", json!({"command": "cargo test"})))
            .unwrap(),
        Admission::Allow { approval: None }
    );
    let a = env
        .svc
        .tool_call_admit(me, call("bash", json!({"command": "cat ~/.ssh/id_rsa"})))
        .unwrap();
    assert!(
        matches!(a, Admission::Denied { ref reason } if reason.contains("SSH")),
        "{a:?}"
    );
    assert!(a.message().contains("denies"));
    assert!(
        env.svc
            .approvals_list(Principal::User, true)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn issue11_item4_ask_creates_one_request_in_the_users_inbox() {
    let env = Env::new();
    let me = env.agent(env.root);
    let id = pending(env.svc.tool_call_admit(me, risky()).unwrap());
    // The same call again: the same request, not a second one.
    assert_eq!(pending(env.svc.tool_call_admit(me, risky()).unwrap()), id);
    let list = env.svc.approvals_list(Principal::User, false).unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].id, id);
    assert_eq!(list[0].status, ApprovalStatus::Pending);
    assert_eq!(list[0].tool, "bash");
    assert_eq!(
        list[0].args,
        r#"{"command":"rm -rf /tmp/agency-approval-test"}"#
    );
    // The message the agent reads.
    let msg = env.svc.tool_call_admit(me, risky()).unwrap().message();
    assert!(
        msg.starts_with(&format!("pending approval {id}: ")),
        "{msg}"
    );
    assert!(msg.contains("go on with other work"), "{msg}");

    // The user's inbox: who, which tool, the exact arguments, why, how.
    let inbox = env.svc.mail_inbox(Principal::User, None).unwrap();
    let m = inbox
        .iter()
        .find(|m| m.subject.contains("Approval needed"))
        .expect("a request mail");
    assert_eq!(m.from, MailTarget::Handler(env.root));
    let body = m.body.clone().unwrap();
    for needle in [
        "wants to call tool `bash`",
        "rm -rf /tmp/agency-approval-test",
        "outside the workspace",
        &format!("agency approve {id}"),
        &format!("agency deny {id}"),
    ] {
        assert!(body.contains(needle), "{needle:?} not in {body}");
    }
    assert_eq!(
        inbox
            .iter()
            .filter(|m| m.subject.contains("Approval needed"))
            .count(),
        1,
        "one mail per request"
    );
}

#[test]
fn issue11_item4_an_approval_is_used_exactly_once() {
    let env = Env::new();
    let me = env.agent(env.root);
    let id = pending(env.svc.tool_call_admit(me, risky()).unwrap());
    let a = env.svc.approve(Principal::User, id, false).unwrap();
    assert_eq!(a.status, ApprovalStatus::Approved);
    assert_eq!(
        env.svc.tool_call_admit(me, risky()).unwrap(),
        Admission::Allow { approval: Some(id) }
    );
    let used = env.svc.approval_get(Principal::User, id).unwrap();
    assert_eq!(used.status, ApprovalStatus::Consumed);
    assert!(used.consumed_at.is_some());
    // The second identical call asks again, as a new request.
    let again = pending(env.svc.tool_call_admit(me, risky()).unwrap());
    assert_ne!(again, id);
    // Deciding twice is refused.
    assert_kind(env.svc.approve(Principal::User, id, false), "invalid_input");
}

#[test]
fn issue11_item4_always_keeps_allowing_that_exact_call() {
    let env = Env::new();
    let me = env.agent(env.root);
    let id = pending(env.svc.tool_call_admit(me, risky()).unwrap());
    env.svc.approve(Principal::User, id, true).unwrap();
    for _ in 0..3 {
        assert_eq!(
            env.svc.tool_call_admit(me, risky()).unwrap(),
            Admission::Allow { approval: Some(id) }
        );
    }
    // Only that call: other arguments still ask.
    let other = call("bash", json!({"command": "rm -rf /tmp/something-else"}));
    pending(env.svc.tool_call_admit(me, other).unwrap());
}

#[test]
fn issue11_item4_deny_tells_the_agent_why() {
    let env = Env::new();
    let me = env.agent(env.root);
    let id = pending(env.svc.tool_call_admit(me, risky()).unwrap());
    assert_kind(env.svc.deny(Principal::User, id, "  "), "invalid_input");
    env.svc
        .deny(Principal::User, id, "keep /tmp alone")
        .unwrap();
    match env.svc.tool_call_admit(me, risky()).unwrap() {
        Admission::Denied { reason } => {
            assert!(reason.contains("keep /tmp alone"), "{reason}");
            assert!(reason.contains(&id.to_string()), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        env.svc
            .approvals_list(Principal::User, false)
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        env.svc.approvals_list(Principal::User, true).unwrap().len(),
        1
    );
}

/// Attack: a prompt-injected agent tries to approve its own request (and
/// another's), and to deny; only the user decides.
#[test]
fn issue11_item4_attack_an_agent_cannot_decide() {
    let env = Env::new();
    let me = env.agent(env.root);
    let id = pending(env.svc.tool_call_admit(me, risky()).unwrap());
    let e = assert_kind(env.svc.approve(me, id, true), "permission_denied");
    assert!(e.to_string().contains("only the user"), "{e}");
    assert_kind(env.svc.approve(me, id, false), "permission_denied");
    assert_kind(env.svc.deny(me, id, "no"), "permission_denied");
    let under = underling(&env);
    let other = env.agent(under);
    assert_kind(env.svc.approve(other, id, false), "permission_denied");
    // Still pending, and the call still does not run.
    assert_eq!(
        env.svc.approval_get(Principal::User, id).unwrap().status,
        ApprovalStatus::Pending
    );
    pending(env.svc.tool_call_admit(me, risky()).unwrap());
    // An agent sees its own handler's requests only.
    assert_eq!(env.svc.approvals_list(me, true).unwrap().len(), 1);
    assert!(env.svc.approvals_list(other, true).unwrap().is_empty());
    assert_kind(env.svc.approval_get(other, id), "not_found");
}

/// Attack: an agent replays another handler's approval by making the
/// identical call; the approval is bound to the handler that asked.
#[test]
fn issue11_item4_attack_an_approval_serves_only_its_handler() {
    let env = Env::new();
    let boss = env.agent(env.root);
    let under = underling(&env);
    let other = env.agent(under);
    let id = pending(env.svc.tool_call_admit(boss, risky()).unwrap());
    env.svc.approve(Principal::User, id, true).unwrap();
    // The underling's identical call is its own, pending request.
    let theirs = pending(env.svc.tool_call_admit(other, risky()).unwrap());
    assert_ne!(theirs, id);
    // The boss's approval is untouched and still works for the boss.
    assert_eq!(
        env.svc.tool_call_admit(boss, risky()).unwrap(),
        Admission::Allow { approval: Some(id) }
    );
}

/// Attack: arguments changed after the approval (a different path) are a
/// different call; the same arguments in another key order are not.
#[test]
fn issue11_item4_attack_changed_arguments_ask_again() {
    let env = Env::new();
    let me = env.agent(env.root);
    let first = call(
        "bash",
        json!({"command": "rm -rf /tmp/agency-approval-test", "timeout_ms": 1000}),
    );
    let id = pending(env.svc.tool_call_admit(me, first).unwrap());
    env.svc.approve(Principal::User, id, false).unwrap();
    let changed = call(
        "bash",
        json!({"command": "rm -rf /tmp/agency-approval-test /etc/cron.d", "timeout_ms": 1000}),
    );
    let other = pending(env.svc.tool_call_admit(me, changed).unwrap());
    assert_ne!(other, id);
    // Same arguments, keys in another order: the approved call.
    let reordered: serde_json::Value =
        serde_json::from_str(r#"{"timeout_ms":1000,"command":"rm -rf /tmp/agency-approval-test"}"#)
            .unwrap();
    assert_eq!(
        env.svc
            .tool_call_admit(me, call("bash", reordered))
            .unwrap(),
        Admission::Allow { approval: Some(id) }
    );
}

/// Two identical calls racing on one approval: exactly one runs.
#[test]
fn issue11_item4_racing_calls_consume_one_approval_once() {
    let env = Env::new();
    let me = env.agent(env.root);
    let id = pending(env.svc.tool_call_admit(me, risky()).unwrap());
    env.svc.approve(Principal::User, id, false).unwrap();
    let n = 8;
    let barrier = Arc::new(Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let svc = env.svc.clone();
            let b = barrier.clone();
            std::thread::spawn(move || {
                b.wait();
                svc.tool_call_admit(me, risky()).unwrap()
            })
        })
        .collect();
    let results: Vec<Admission> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let allowed = results
        .iter()
        .filter(|a| matches!(a, Admission::Allow { .. }))
        .count();
    assert_eq!(allowed, 1, "{results:?}");
    // The others got one and the same new pending request.
    let mut pend: Vec<ApprovalId> = results
        .iter()
        .filter_map(|a| match a {
            Admission::Pending { approval, .. } => Some(*approval),
            _ => None,
        })
        .collect();
    pend.dedup();
    assert_eq!(pend.len(), 1, "{results:?}");
}

/// An approval survives a restart and is still used once.
#[test]
fn issue11_item4_approvals_are_durable() {
    let env = Env::new();
    let me = env.agent(env.root);
    let id = pending(env.svc.tool_call_admit(me, risky()).unwrap());
    env.svc.approve(Principal::User, id, false).unwrap();
    let env = env.reopen();
    let me = env.agent(env.root);
    assert_eq!(
        env.svc.tool_call_admit(me, risky()).unwrap(),
        Admission::Allow { approval: Some(id) }
    );
    let env = env.reopen();
    let me = env.agent(env.root);
    pending(env.svc.tool_call_admit(me, risky()).unwrap());
}

#[test]
fn issue11_item4_policy_file_rules_apply() {
    let env = Env::new();
    env.svc.set_policy(
        Policy::from_toml(
            "[[rule]]\ntool = \"bash\"\ncommand = '^rm '\nverdict = \"allow\"\nreason = \"scratch\"\n\
             [[rule]]\ntool = \"bash\"\ncommand = '^make deploy'\nverdict = \"deny\"\nreason = \"CI deploys\"\n",
        )
        .unwrap(),
    );
    let me = env.agent(env.root);
    assert_eq!(
        env.svc.tool_call_admit(me, risky()).unwrap(),
        Admission::Allow { approval: None }
    );
    assert_eq!(
        env.svc
            .tool_call_admit(me, call("bash", json!({"command": "make deploy"})))
            .unwrap(),
        Admission::Denied {
            reason: "CI deploys".into()
        }
    );
}

#[test]
fn issue11_item4_extra_mcp_writes_ask_reads_do_not() {
    let env = Env::new();
    let me = env.agent(env.root);
    let send = ToolCallRequest {
        tool: "mcp:mail/send".into(),
        args: json!({"to": "a@example.com"}),
        read_only: Some(false),
    };
    pending(env.svc.tool_call_admit(me, send).unwrap());
    let search = ToolCallRequest {
        tool: "mcp:mail/search".into(),
        args: json!({"q": "x"}),
        read_only: Some(true),
    };
    assert_eq!(
        env.svc.tool_call_admit(me, search).unwrap(),
        Admission::Allow { approval: None }
    );
}

/// Item 4a: a capability granted with `approval = "each_use"` makes every
/// call through it ask, even a read-only one, and passing it down keeps
/// the requirement.
#[test]
fn issue11_item4_each_use_capability() {
    let env = Env::new();
    let grant = GrantRequest {
        resource: Resource::McpServer("mail".into()),
        level: Level::Read,
        delegatable: true,
    };
    assert_kind(
        env.svc
            .grant_with_approval(Principal::User, env.root, &grant, None, Some("sometimes")),
        "invalid_input",
    );
    let cap = env
        .svc
        .grant_with_approval(Principal::User, env.root, &grant, None, Some("each_use"))
        .unwrap();
    assert_eq!(
        env.svc.capability_approval(cap).unwrap().as_deref(),
        Some("each_use")
    );
    let search = || ToolCallRequest {
        tool: "mcp:mail/search".into(),
        args: json!({"q": "x"}),
        read_only: Some(true),
    };
    let me = env.agent(env.root);
    let id = pending(env.svc.tool_call_admit(me, search()).unwrap());
    assert!(
        env.svc
            .approval_get(Principal::User, id)
            .unwrap()
            .reason
            .contains("each_use")
    );
    env.svc.approve(Principal::User, id, false).unwrap();
    assert!(matches!(
        env.svc.tool_call_admit(me, search()).unwrap(),
        Admission::Allow { approval: Some(_) }
    ));
    pending(env.svc.tool_call_admit(me, search()).unwrap());

    // Delegated with the capability: the underling's grant is marked too.
    let o = env.outcome(env.root, "mail work", &[env.root.root()]);
    let d = env
        .svc
        .delegate(
            me,
            o,
            &[GrantRequest {
                delegatable: false,
                ..grant.clone()
            }],
        )
        .unwrap();
    let under_cap = d.capabilities[0];
    assert_eq!(
        env.svc.capability_approval(under_cap).unwrap().as_deref(),
        Some("each_use")
    );
    let other = env.agent(d.handler);
    pending(env.svc.tool_call_admit(other, search()).unwrap());
}

#[test]
fn issue11_item4_repo_push_waits_for_approval_and_records_once() {
    let env = Env::new();
    env.svc
        .grant(
            Principal::User,
            env.root,
            &GrantRequest {
                resource: Resource::Repo("demo".into()),
                level: Level::Write,
                delegatable: false,
            },
        )
        .unwrap();
    let me = env.agent(env.root);
    let push = RepoPush {
        repo: "demo",
        branch: "work",
        remote_ref: "refs/heads/agency/h/work",
        commit: "0123456789abcdef0123456789abcdef01234567",
    };
    let pushes = || {
        env.svc
            .audit_read(Principal::User, Some(env.root))
            .unwrap()
            .into_iter()
            .filter(|e| e.summary.starts_with("repo push"))
            .count()
    };
    let e = assert_kind(env.svc.repo_push_record(me, &push), "permission_denied");
    assert!(e.to_string().contains("pending approval"), "{e}");
    assert_eq!(pushes(), 0);
    let list = env.svc.approvals_list(Principal::User, false).unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].tool, "repo_push");
    assert!(list[0].args.contains("0123456789abcdef"));
    env.svc.approve(Principal::User, list[0].id, false).unwrap();
    env.svc.repo_push_record(me, &push).unwrap();
    assert_eq!(pushes(), 1);
    // A second push of the same commit asks again.
    assert_kind(env.svc.repo_push_record(me, &push), "permission_denied");
    assert_eq!(pushes(), 1);
}

#[test]
fn bad_tool_calls_are_refused_clearly() {
    let env = Env::new();
    let me = env.agent(env.root);
    assert_kind(
        env.svc.tool_call_admit(me, call("", json!({}))),
        "invalid_input",
    );
    let huge = call("bash", json!({"command": "x".repeat(300 * 1024)}));
    assert_kind(env.svc.tool_call_admit(me, huge), "invalid_input");
    // The user makes no tool calls.
    assert_kind(
        env.svc.tool_call_admit(Principal::User, risky()),
        "invalid_input",
    );
}
