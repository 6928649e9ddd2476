//! Issue 28: deciding an approval request wakes the handler that asked.
//! The agent was told "pending" and has usually ended since; the decision
//! mails the handler a notice (which gives it work, so the supervisor
//! starts an agent) and publishes `ApprovalDecided` (which the supervisor
//! reacts to at once). An approval says to call again with the same
//! arguments, and that call is let through once; a denial names the tool,
//! the arguments and the user's reason.

use agency_core::policy::ApprovalId;
use agency_core::{MailTarget, Principal};
use agency_service::{Admission, ApprovalStatus, Event, MessageView, ToolCallRequest};
use serde_json::json;

use crate::support::Env;

fn call(command: &str) -> ToolCallRequest {
    ToolCallRequest {
        tool: "bash".into(),
        args: json!({ "command": command }),
        read_only: None,
    }
}

fn pending(a: Admission) -> ApprovalId {
    match a {
        Admission::Pending { approval, .. } => approval,
        other => panic!("expected pending, got {other:?}"),
    }
}

/// The decision events published since `events` subscribed.
fn decisions(events: &mut tokio::sync::broadcast::Receiver<Event>) -> Vec<Event> {
    let mut out = Vec::new();
    while let Ok(e) = events.try_recv() {
        if matches!(e, Event::ApprovalDecided { .. }) {
            out.push(e);
        }
    }
    out
}

/// The one message in `who`'s inbox whose subject starts with `prefix`.
fn notice(env: &Env, who: Principal, prefix: &str) -> MessageView {
    let inbox = env.svc.mail_inbox(who, None).unwrap();
    let found: Vec<_> = inbox
        .into_iter()
        .filter(|m| m.subject.starts_with(prefix))
        .collect();
    assert_eq!(found.len(), 1, "one {prefix:?} notice: {found:?}");
    found.into_iter().next().unwrap()
}

#[test]
fn issue28_approve_mails_the_handler_and_gives_it_work() {
    let env = Env::new();
    let me = env.agent(env.root);
    let risky = "rm -rf /tmp/agency-issue28-approve";
    let id = pending(env.svc.tool_call_admit(me, call(risky)).unwrap());
    // The request went to the user; the root (perpetual outcome) has
    // nothing to do: no agent would be started for it.
    assert!(!env.svc.has_work(env.root).unwrap());
    let mut events = env.svc.subscribe();

    env.svc.approve(Principal::User, id, false).unwrap();

    assert_eq!(
        decisions(&mut events),
        vec![Event::ApprovalDecided {
            approval: id,
            handler: env.root,
            approved: true,
        }]
    );
    assert!(env.svc.has_work(env.root).unwrap(), "the notice is work");
    let m = notice(&env, me, &format!("Approved: bash (request {id})"));
    assert_eq!(m.from, MailTarget::User);
    let body = m.body.unwrap();
    for needle in [
        "call it again with the same arguments",
        risky,
        "it runs once",
    ] {
        assert!(body.contains(needle), "{needle:?} not in {body}");
    }
    // The retried call runs once and consumes the request.
    assert_eq!(
        env.svc.tool_call_admit(me, call(risky)).unwrap(),
        Admission::Allow { approval: Some(id) }
    );
    assert_eq!(
        env.svc.approval_get(Principal::User, id).unwrap().status,
        ApprovalStatus::Consumed
    );
}

#[test]
fn issue28_deny_tells_the_handler_the_tool_arguments_and_reason() {
    let env = Env::new();
    let me = env.agent(env.root);
    let risky = "rm -rf /tmp/agency-issue28-deny";
    let id = pending(env.svc.tool_call_admit(me, call(risky)).unwrap());
    let mut events = env.svc.subscribe();

    env.svc
        .deny(Principal::User, id, "that directory is shared")
        .unwrap();

    assert_eq!(
        decisions(&mut events),
        vec![Event::ApprovalDecided {
            approval: id,
            handler: env.root,
            approved: false,
        }]
    );
    assert!(env.svc.has_work(env.root).unwrap(), "the notice is work");
    let body = notice(&env, me, &format!("Denied: bash (request {id})"))
        .body
        .unwrap();
    for needle in [
        "denied your call of tool `bash`",
        risky,
        "that directory is shared",
        "Do not make this call again",
    ] {
        assert!(body.contains(needle), "{needle:?} not in {body}");
    }
    // And the call stays denied.
    assert!(matches!(
        env.svc.tool_call_admit(me, call(risky)).unwrap(),
        Admission::Denied { .. }
    ));
}

/// Long arguments are quoted in part: the notice stays readable, and the
/// request keeps them whole.
#[test]
fn issue28_a_notice_quotes_long_arguments_in_part() {
    let env = Env::new();
    let me = env.agent(env.root);
    let long = format!("rm -rf /tmp/{}", "x".repeat(5000));
    let id = pending(env.svc.tool_call_admit(me, call(&long)).unwrap());
    env.svc.approve(Principal::User, id, true).unwrap();
    let body = notice(&env, me, "Approved: bash").body.unwrap();
    assert!(body.len() < 2500, "{} bytes", body.len());
    assert!(body.contains("the request holds them whole"), "{body}");
    assert!(body.contains("every identical call"), "{body}");
    assert!(
        env.svc
            .approval_get(Principal::User, id)
            .unwrap()
            .args
            .contains(&long)
    );
}
