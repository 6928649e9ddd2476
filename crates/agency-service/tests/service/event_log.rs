//! Issue 30: the event log. A scripted story's every state change appears
//! once, in commit order, read back after a restart; readers see their own
//! area; a refused operation leaves no event; retention removes old ones.

use agency_api::{Event, EventKind};
use agency_core::{HandlerId, MailTarget, OutcomeStatus, Principal};
use agency_service::{
    EventQuery, MailBody, ModelCallRequest, ModelCallResult, OutcomeUpdate, ServiceConfig,
    TokenUsage, ToolStep,
};

use crate::support::{Env, assert_kind};

fn text(t: &str) -> MailBody {
    MailBody::Text {
        subject: None,
        text: t.into(),
    }
}

/// Every event the user can read, in order.
fn log(env: &Env) -> Vec<Event> {
    let mut out = Vec::new();
    let mut after = 0;
    loop {
        let page = env
            .svc
            .events_read(
                Principal::User,
                &EventQuery {
                    after,
                    limit: Some(7),
                    ..EventQuery::default()
                },
            )
            .unwrap();
        if page.events.is_empty() {
            return out;
        }
        after = page.next;
        out.extend(page.events);
    }
}

fn kinds(events: &[Event]) -> Vec<String> {
    events.iter().map(|e| e.kind.as_str().to_owned()).collect()
}

/// `want` appears in `have` in this order (other kinds may come between).
fn in_order(have: &[String], want: &[&str]) {
    let mut it = have.iter();
    for w in want {
        assert!(
            it.any(|h| h == w),
            "{w} missing (or out of order) in {have:#?}"
        );
    }
}

#[test]
fn issue30_every_change_of_a_story_is_logged_once_in_commit_order_and_survives_a_restart() {
    let env = Env::new();
    let svc = &env.svc;
    let root = env.root;
    let mut domain = svc.subscribe();
    let start = log(&env).len();

    svc.mail_send(
        Principal::User,
        MailTarget::Handler(root),
        &text("Plan the garden"),
    )
    .unwrap();
    let r = env.agent(root);
    let garden = env.outcome(root, "Garden planned", &[root.root()]);
    let d = svc.delegate(r, garden, &[]).unwrap();
    let u = d.handler;
    let ua = env.agent(u);
    let inbox = svc.mail_inbox(r, None).unwrap();
    svc.mail_ack(r, &[inbox[0].id]).unwrap();
    svc.mail_send(ua, MailTarget::Handler(root), &text("Beds dug"))
        .unwrap();
    let res = svc
        .model_call_reserve(
            ua,
            ModelCallRequest {
                upstream: "main".into(),
                api: "anthropic".into(),
                model: "m1".into(),
                stream: false,
                max_tokens: 100,
                input_estimate: 10,
                worst_cost_micro_usd: 0,
                priced: true,
            },
        )
        .unwrap();
    svc.model_call_settle(
        res,
        ModelCallResult {
            status: 200,
            usage: TokenUsage {
                input_tokens: 11,
                output_tokens: 22,
                cache_read_tokens: 3,
                cache_write_tokens: 0,
            },
            cost_micro_usd: 1234,
            estimated: false,
        },
    )
    .unwrap();
    svc.record_tool_call(
        ua,
        ToolStep {
            tool: "kb_read".into(),
            args_digest: agency_service::args_digest(&serde_json::json!({"id": "x"})),
            error_kind: None,
            error: None,
            duration_ms: 3,
            call_id: None,
            at_admission: false,
        },
    )
    .unwrap();
    svc.flush_read_audit().unwrap();
    svc.outcome_update(
        r,
        garden,
        &OutcomeUpdate {
            status: Some(OutcomeStatus::Blocked),
            reason: Some("waiting for rain".into()),
            ..OutcomeUpdate::default()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    svc.force_stop(r, u).unwrap();

    let events = log(&env)[start..].to_vec();
    let k = kinds(&events);
    in_order(
        &k,
        &[
            "mail.sent",
            "mail.delivered",
            "agent.started",
            "outcome.created",
            "handler.created",
            "outcome.delegated",
            "agent.started",
            "mail.acked",
            "mail.sent",
            "mail.delivered",
            "model_call.started",
            "model_call.ended",
            "tool.called",
            "outcome.changed",
            "agent.ended",
            "handler.stopped",
        ],
    );
    // Numbers strictly increase: the order is the order of commits.
    assert!(events.windows(2).all(|w| w[0].seq < w[1].seq));

    // Every domain event the scheduler saw is in the log once, in order.
    let mut published = Vec::new();
    while let Ok(e) = domain.try_recv() {
        published.push(e);
    }
    let logged_domain: Vec<&Event> = events
        .iter()
        .filter(|e| {
            !matches!(
                e.kind,
                EventKind::MailSent
                    | EventKind::MailAcked
                    | EventKind::OutcomeDelegated
                    | EventKind::ModelCallStarted
                    | EventKind::ModelCallEnded
                    | EventKind::ToolCalled
            )
        })
        .collect();
    assert_eq!(
        logged_domain.len(),
        published.len(),
        "one log entry per domain event: {:#?} vs {published:#?}",
        kinds(
            &logged_domain
                .iter()
                .map(|e| (*e).clone())
                .collect::<Vec<_>>()
        )
    );

    // What each carries.
    let ended = events
        .iter()
        .find(|e| e.kind == EventKind::ModelCallEnded)
        .unwrap();
    assert_eq!(ended.handler, Some(u));
    assert_eq!(ended.data["output_tokens"], 22);
    assert_eq!(ended.data["cost_micro_usd"], 1234);
    assert_eq!(ended.data["model"], "m1");
    let tool = events
        .iter()
        .find(|e| e.kind == EventKind::ToolCalled)
        .unwrap();
    assert_eq!(tool.data["tool"], "kb_read");
    assert_eq!(tool.data["ok"], true);
    assert_eq!(tool.data["args_digest"].as_str().unwrap().len(), 16);
    let delegated = events
        .iter()
        .find(|e| e.kind == EventKind::OutcomeDelegated)
        .unwrap();
    assert_eq!(delegated.handler, Some(u));
    assert_eq!(delegated.handler_title.as_deref(), Some("Garden planned"));
    assert!(
        delegated.summary.contains("Garden planned"),
        "{}",
        delegated.summary
    );
    let sent = events
        .iter()
        .find(|e| e.kind == EventKind::MailSent)
        .unwrap();
    assert_eq!(sent.data["subject"], "Plan the garden");

    // A restart loses nothing, and numbers go on from where they were.
    let before = log(&env);
    let env = env.reopen();
    assert_eq!(log(&env), before);
    let last = before.last().unwrap().seq;
    env.svc
        .mail_send(
            Principal::User,
            MailTarget::Handler(env.root),
            &text("again"),
        )
        .unwrap();
    assert!(log(&env).last().unwrap().seq > last);
}

#[test]
fn issue30_a_refused_operation_leaves_no_event_but_a_refusal_for_lack_of_a_connection_is_told() {
    let env = Env::new();
    let r = env.agent(env.root);
    let garden = env.outcome(env.root, "Garden", &[env.root.root()]);
    let u = env.svc.delegate(r, garden, &[]).unwrap().handler;
    let other = env.outcome(env.root, "Shed", &[env.root.root()]);
    let v = env.svc.delegate(r, other, &[]).unwrap().handler;
    let before = log(&env);
    // Siblings have no connection: refused, nothing logged.
    assert_kind(
        env.svc
            .mail_send(env.agent(u), MailTarget::Handler(v), &text("hi")),
        "permission_denied",
    );
    env.svc.flush_read_audit().unwrap();
    let after = log(&env);
    let new: Vec<&Event> = after[before.len()..]
        .iter()
        .filter(|e| e.kind != EventKind::AgentStarted)
        .collect();
    // Nothing was sent, delivered or granted: only the refusal itself.
    assert_eq!(new.len(), 1, "{new:#?}");
    assert_eq!(new[0].kind, EventKind::MailRefused);
    assert_eq!(new[0].handler, Some(u));
    assert!(
        new[0].summary.contains(&v.to_string()),
        "{}",
        new[0].summary
    );
}

fn read(env: &Env, who: Principal, q: EventQuery) -> Vec<Event> {
    env.svc.events_read(who, &q).unwrap().events
}

#[test]
fn issue30_an_agent_reads_the_events_of_its_own_subtree_only() {
    let env = Env::new();
    let r = env.agent(env.root);
    let garden = env.outcome(env.root, "Garden", &[env.root.root()]);
    let u = env.svc.delegate(r, garden, &[]).unwrap().handler;
    let ua = env.agent(u);
    let beds = env.outcome(u, "Beds", &[garden]);
    let w = env.svc.delegate(ua, beds, &[]).unwrap().handler;
    let wa = env.agent(w);
    let shed = env.outcome(env.root, "Shed", &[env.root.root()]);
    let v = env.svc.delegate(r, shed, &[]).unwrap().handler;
    let _ = env.agent(v);

    let handlers_seen = |who| -> Vec<Option<HandlerId>> {
        let mut hs: Vec<_> = read(&env, who, EventQuery::default())
            .iter()
            .map(|e| e.handler)
            .collect();
        hs.sort();
        hs.dedup();
        hs
    };
    let mut want_u = vec![Some(u), Some(w)];
    want_u.sort();
    assert_eq!(
        handlers_seen(ua),
        want_u,
        "u and below: not root, not the sibling"
    );
    assert_eq!(handlers_seen(wa), vec![Some(w)]);
    assert!(
        handlers_seen(r).contains(&Some(v)),
        "the root sees its whole tree"
    );
    assert!(handlers_seen(Principal::User).contains(&Some(env.root)));

    // Naming a handler outside one's subtree is refused, inside is fine.
    let e = assert_kind(
        env.svc.events_read(
            ua,
            &EventQuery {
                handler: Some(v),
                ..EventQuery::default()
            },
        ),
        "permission_denied",
    );
    assert!(e.to_string().contains("handlers below it"), "{e}");
    assert_kind(
        env.svc.events_read(
            ua,
            &EventQuery {
                handler: Some(env.root),
                subtree: true,
                ..EventQuery::default()
            },
        ),
        "permission_denied",
    );
    let only_w = read(
        &env,
        ua,
        EventQuery {
            handler: Some(w),
            ..EventQuery::default()
        },
    );
    assert!(!only_w.is_empty() && only_w.iter().all(|e| e.handler == Some(w)));
}

#[test]
fn issue30_reads_validate_their_query() {
    let env = Env::new();
    let q = |f: fn(&mut EventQuery)| {
        let mut q = EventQuery::default();
        f(&mut q);
        env.svc.events_read(Principal::User, &q)
    };
    let e = assert_kind(q(|q| q.kinds = vec!["mial".into()]), "invalid_input");
    assert!(e.to_string().contains("unknown kind \"mial\""), "{e}");
    assert!(e.to_string().contains("mail"), "lists the families: {e}");
    assert_kind(q(|q| q.limit = Some(0)), "invalid_input");
    assert_kind(q(|q| q.limit = Some(1001)), "invalid_input");
    assert_kind(q(|q| q.after = -1), "invalid_input");
    assert_kind(
        q(|q| q.handler = Some(HandlerId::new_random())),
        "not_found",
    );
    // A family and a whole kind are both fine.
    q(|q| q.kinds = vec!["mail".into(), "agent.ended".into()]).unwrap();
}

#[test]
fn issue30_kind_and_time_filters_and_a_cursor_that_skips_what_it_passed() {
    let env = Env::new();
    env.svc
        .mail_send(Principal::User, MailTarget::Handler(env.root), &text("one"))
        .unwrap();
    let only_mail = env
        .svc
        .events_read(
            Principal::User,
            &EventQuery {
                kinds: vec!["mail".into()],
                ..EventQuery::default()
            },
        )
        .unwrap();
    assert!(!only_mail.events.is_empty());
    assert!(only_mail.events.iter().all(|e| e.kind.family() == "mail"));
    // Nothing more matched: the cursor moves to the log's end, so the next
    // read does not scan again what this one passed.
    let end = env.svc.events_end(Principal::User).unwrap();
    let again = env
        .svc
        .events_read(
            Principal::User,
            &EventQuery {
                after: only_mail.next,
                kinds: vec!["mail".into()],
                ..EventQuery::default()
            },
        )
        .unwrap();
    assert!(again.events.is_empty());
    assert_eq!(again.next, end);

    env.clock.advance_millis(60_000);
    let later = env.now_plus(0);
    env.svc
        .mail_send(Principal::User, MailTarget::Handler(env.root), &text("two"))
        .unwrap();
    let recent = read(
        &env,
        Principal::User,
        EventQuery {
            since: Some(later),
            ..EventQuery::default()
        },
    );
    assert!(!recent.is_empty());
    assert!(recent.iter().all(|e| e.at >= later));
}

#[test]
fn issue30_gc_removes_events_past_their_retention_only() {
    let mut cfg = ServiceConfig::default();
    cfg.retention.event_days = 2;
    cfg.retention.acked_mail_days = 0;
    let env = Env::with_config(cfg);
    env.svc
        .mail_send(Principal::User, MailTarget::Handler(env.root), &text("old"))
        .unwrap();
    let old = log(&env).len();
    assert!(old > 0);
    env.clock.advance_millis(3 * 24 * 3600 * 1000);
    env.svc
        .mail_send(Principal::User, MailTarget::Handler(env.root), &text("new"))
        .unwrap();
    let all = log(&env).len();

    let dry = env.svc.gc(Principal::User, true).unwrap();
    assert_eq!(dry.events_removed, old as u64);
    assert_eq!(log(&env).len(), all, "a dry run removes nothing");
    let report = env.svc.gc(Principal::User, false).unwrap();
    assert_eq!(report.events_removed, old as u64);
    let left = log(&env);
    assert_eq!(left.len(), all - old);
    assert!(left.iter().all(|e| e.at >= report.events_before.unwrap()));
}

/// The benchmarks' baseline knob: with tool steps off a tool call leaves
/// no `tool.called`; switched on again, the next one is logged.
#[test]
fn issue30_the_bench_knob_switches_tool_steps_off_and_on_again() {
    let env = Env::new();
    let r = env.agent(env.root);
    let step = |tool: &str| ToolStep {
        tool: tool.into(),
        args_digest: agency_service::args_digest(&serde_json::json!({})),
        error_kind: None,
        error: None,
        duration_ms: 1,
        call_id: None,
        at_admission: false,
    };
    let tools = |env: &Env| -> Vec<String> {
        env.svc.flush_read_audit().unwrap();
        log(env)
            .iter()
            .filter(|e| e.kind == EventKind::ToolCalled)
            .map(|e| e.data["tool"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    env.svc.bench_log_tool_steps(false);
    env.svc.record_tool_call(r, step("unlogged")).unwrap();
    assert!(tools(&env).is_empty(), "{:?}", tools(&env));
    env.svc.bench_log_tool_steps(true);
    env.svc.record_tool_call(r, step("logged")).unwrap();
    assert_eq!(tools(&env), ["logged"]);
}
