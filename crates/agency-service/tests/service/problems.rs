//! Issue 30 item 5: stuck detection. Each signal, scripted, is found by
//! one detection tick; an episode is told once (an event and a notice),
//! not again while it holds, and clears when the condition goes.

use agency_api::{EventKind, ProblemKind};
use agency_core::{HandlerId, MailTarget, Principal};
use agency_service::BudgetLimits;
use agency_service::{
    EventQuery, MailBody, ModelCallRequest, ModelCallResult, ServiceConfig, TokenUsage, ToolStep,
    Watch,
};
use serde_json::json;

use crate::support::Env;

const MIN: i64 = 60_000;

fn env() -> Env {
    Env::with_config(ServiceConfig {
        watch: Watch {
            stuck_after_ms: 15 * MIN,
            approval_stale_after_ms: 30 * MIN,
        },
        ..ServiceConfig::default()
    })
}

fn text(t: &str) -> MailBody {
    MailBody::Text {
        subject: None,
        text: t.into(),
    }
}

fn underling(env: &Env, title: &str) -> HandlerId {
    let o = env.outcome(env.root, title, &[env.root.root()]);
    env.svc
        .delegate(env.agent(env.root), o, &[])
        .unwrap()
        .handler
}

fn open(env: &Env) -> Vec<(ProblemKind, Option<HandlerId>)> {
    env.svc
        .problems(Principal::User, false)
        .unwrap()
        .into_iter()
        .map(|p| (p.kind, p.handler))
        .collect()
}

fn tick(env: &Env) -> agency_service::TickReport {
    env.svc.flush_read_audit().unwrap();
    env.svc.problems_tick(&[]).unwrap()
}

/// Subjects of the user's inbox that tell of a problem.
fn problem_notices(env: &Env, to: MailTarget) -> usize {
    let who = match to {
        MailTarget::User => Principal::User,
        MailTarget::Handler(h) => env.agent(h),
    };
    env.svc
        .mail_inbox(who, Some(100))
        .unwrap()
        .iter()
        .filter(|m| m.subject.starts_with("Problem: "))
        .count()
}

fn tool_call(env: &Env, who: Principal, tool: &str, args: serde_json::Value) {
    env.svc
        .record_tool_call(
            who,
            ToolStep {
                tool: tool.into(),
                args_digest: agency_service::args_digest(&args),
                error_kind: None,
                error: None,
                duration_ms: 1,
                call_id: None,
                at_admission: false,
            },
        )
        .unwrap();
    let _ = env;
}

#[test]
fn issue30_item5_a_handler_with_work_and_no_progress_is_stuck_once_per_episode() {
    let env = env();
    let u = underling(&env, "Paint the shed");
    let ua = env.agent(u);
    tool_call(&env, ua, "kb_list", json!({}));
    assert_eq!(tick(&env).raised, 0, "fresh work is not stuck");

    env.clock.advance_millis(16 * MIN);
    let r = tick(&env);
    assert_eq!(r.raised, 1, "{r:?}");
    assert_eq!(open(&env), [(ProblemKind::Stuck, Some(u))]);
    // Its boss (the root handler) is told, once.
    assert_eq!(problem_notices(&env, MailTarget::Handler(env.root)), 1);
    let raised: Vec<_> = env
        .svc
        .events_read(
            Principal::User,
            &EventQuery {
                kinds: vec!["problem".into()],
                ..EventQuery::default()
            },
        )
        .unwrap()
        .events;
    assert_eq!(raised.len(), 1);
    assert_eq!(raised[0].kind, EventKind::ProblemRaised);
    assert_eq!(raised[0].handler, Some(u));

    // Still stuck a tick later: the same episode, no second notice.
    env.clock.advance_millis(MIN);
    let r = tick(&env);
    assert_eq!((r.raised, r.open), (0, 1), "{r:?}");
    assert_eq!(problem_notices(&env, MailTarget::Handler(env.root)), 1);

    // Its agent works again: the episode clears.
    tool_call(&env, ua, "kb_read", json!({"id": "x"}));
    let r = tick(&env);
    assert_eq!(r.cleared, 1, "{r:?}");
    assert!(open(&env).is_empty());
    let all = env.svc.problems(Principal::User, true).unwrap();
    assert!(all[0].closed_at.is_some());
}

#[test]
fn issue30_item5_the_same_call_three_times_in_a_row_is_a_loop() {
    let env = env();
    let u = underling(&env, "Search");
    let ua = env.agent(u);
    tool_call(&env, ua, "kb_read", json!({"id": "a"}));
    tool_call(&env, ua, "kb_read", json!({"id": "a"}));
    assert_eq!(tick(&env).raised, 0, "two is not a loop");
    tool_call(&env, ua, "kb_read", json!({"id": "a"}));
    assert_eq!(tick(&env).raised, 1);
    let p = env.svc.problems(Principal::User, false).unwrap();
    assert_eq!(p[0].kind, ProblemKind::ToolLoop);
    assert_eq!(p[0].detail["calls"], 3);
    assert!(p[0].summary.contains("kb_read"), "{}", p[0].summary);
    tool_call(&env, ua, "kb_read", json!({"id": "b"}));
    assert_eq!(tick(&env).cleared, 1, "a different call breaks the loop");
}

fn model_call(env: &Env, who: Principal, status: i64, tokens: i64) {
    let r = env
        .svc
        .model_call_reserve(
            who,
            ModelCallRequest {
                upstream: "main".into(),
                api: "anthropic".into(),
                model: "m".into(),
                stream: false,
                max_tokens: 10,
                input_estimate: 0,
                worst_cost_micro_usd: 0,
                priced: true,
            },
        )
        .unwrap();
    env.svc
        .model_call_settle(
            r,
            ModelCallResult {
                status,
                usage: TokenUsage {
                    input_tokens: tokens,
                    ..TokenUsage::default()
                },
                cost_micro_usd: 0,
                estimated: false,
            },
        )
        .unwrap();
}

#[test]
fn issue30_item5_five_failed_model_calls_in_a_minute_are_a_retry_storm() {
    let env = env();
    let u = underling(&env, "Call the model");
    let ua = env.agent(u);
    for _ in 0..4 {
        model_call(&env, ua, 529, 0);
    }
    model_call(&env, ua, 200, 0);
    assert_eq!(tick(&env).raised, 0, "four failures");
    model_call(&env, ua, 0, 0);
    assert_eq!(tick(&env).raised, 1);
    assert_eq!(open(&env), [(ProblemKind::RetryStorm, Some(u))]);
    env.clock.advance_millis(2 * MIN);
    model_call(&env, ua, 200, 0);
    assert_eq!(tick(&env).cleared, 1, "the minute passed");
}

#[test]
fn issue30_item5_a_subtree_past_80_percent_of_its_budget() {
    let env = env();
    let u = underling(&env, "Spend");
    env.svc
        .budget_set(
            Principal::User,
            u,
            BudgetLimits {
                tokens: Some(100),
                ..BudgetLimits::default()
            },
        )
        .unwrap();
    let ua = env.agent(u);
    model_call(&env, ua, 200, 70);
    assert_eq!(tick(&env).raised, 0, "70%");
    model_call(&env, ua, 200, 12);
    assert_eq!(tick(&env).raised, 1, "82%");
    let p = env.svc.problems(Principal::User, false).unwrap();
    assert_eq!(p[0].kind, ProblemKind::BudgetNear);
    assert!(
        p[0].summary.contains("tokens 82 of 100"),
        "{}",
        p[0].summary
    );
    // Raised: below 80% again, cleared.
    env.svc
        .budget_set(
            Principal::User,
            u,
            BudgetLimits {
                tokens: Some(1000),
                ..BudgetLimits::default()
            },
        )
        .unwrap();
    assert_eq!(tick(&env).cleared, 1);
}

#[test]
fn issue30_item5_an_approval_left_waiting_is_stale() {
    let env = env();
    let u = underling(&env, "Clean up");
    let ua = env.agent(u);
    let a = env
        .svc
        .tool_call_admit(
            ua,
            agency_service::ToolCallRequest {
                tool: "bash".into(),
                args: json!({"command": "rm -rf /tmp/agency-problem-test"}),
                read_only: None,
            },
        )
        .unwrap();
    let agency_service::Admission::Pending { approval, .. } = a else {
        panic!("expected a pending approval, got {a:?}");
    };
    env.clock.advance_millis(29 * MIN);
    // (Stuck is not this test's business: give the handler progress.)
    tool_call(&env, ua, "kb_list", json!({}));
    assert!(
        !open(&env)
            .iter()
            .any(|(k, _)| *k == ProblemKind::ApprovalStale)
    );
    tick(&env);
    assert!(
        !open(&env)
            .iter()
            .any(|(k, _)| *k == ProblemKind::ApprovalStale),
        "29 min"
    );
    env.clock.advance_millis(2 * MIN);
    tick(&env);
    assert!(open(&env).contains(&(ProblemKind::ApprovalStale, Some(u))));
    env.svc.approve(Principal::User, approval, false).unwrap();
    tick(&env);
    assert!(
        !open(&env)
            .iter()
            .any(|(k, _)| *k == ProblemKind::ApprovalStale),
        "decided"
    );
}

#[test]
fn issue30_item5_a_live_run_whose_process_is_gone() {
    let env = env();
    let u = underling(&env, "Run");
    let Principal::Agent { agent, .. } = env.agent(u) else {
        unreachable!()
    };
    assert_eq!(env.svc.problems_tick(&[agent]).unwrap().raised, 1);
    assert_eq!(open(&env), [(ProblemKind::RunGone, Some(u))]);
    env.svc.agent_end(agent, "reaped").unwrap();
    assert_eq!(env.svc.problems_tick(&[agent]).unwrap().cleared, 1, "ended");
}

#[test]
fn issue30_item5_mail_refused_for_lack_of_a_connection() {
    let env = env();
    let u = underling(&env, "Garden");
    let v = underling(&env, "Shed");
    let ua = env.agent(u);
    assert!(
        env.svc
            .mail_send(ua, MailTarget::Handler(v), &text("hi"))
            .is_err()
    );
    assert_eq!(tick(&env).raised, 1);
    let p = env.svc.problems(Principal::User, false).unwrap();
    assert_eq!(p[0].kind, ProblemKind::MailRefused);
    assert_eq!(p[0].handler, Some(u));
    // Refused again: the same episode.
    let _ = env.svc.mail_send(ua, MailTarget::Handler(v), &text("hi"));
    assert_eq!(tick(&env).raised, 0);
    // Quiet for the stuck window: the episode ends.
    env.clock.advance_millis(16 * MIN);
    tool_call(&env, ua, "kb_list", json!({}));
    let r = tick(&env);
    assert!(r.cleared >= 1, "{r:?}");
    assert!(
        !open(&env)
            .iter()
            .any(|(k, _)| *k == ProblemKind::MailRefused)
    );
}

#[test]
fn issue30_item5_only_the_user_lists_problems() {
    let env = env();
    let e = env.svc.problems(env.agent(env.root), false).unwrap_err();
    assert_eq!(e.kind(), "permission_denied");
}
