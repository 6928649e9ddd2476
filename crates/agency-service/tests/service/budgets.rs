//! Issue 11 item 3, budgets on model calls: a limit on a boss stops its
//! underling's calls, a call reserves its worst case until it settles, and
//! a refusal says whose budget and what to do.

use agency_core::Principal;
use agency_service::{BudgetLimits, ModelCallRequest, ModelCallResult, TokenUsage};

use crate::support::{Env, assert_kind};

fn request(max_tokens: i64, input_estimate: i64) -> ModelCallRequest {
    ModelCallRequest {
        upstream: "main".into(),
        api: "anthropic".into(),
        model: "m".into(),
        stream: false,
        max_tokens,
        input_estimate,
        worst_cost_micro_usd: 0,
        priced: true,
    }
}

fn used(input: i64, output: i64) -> ModelCallResult {
    ModelCallResult {
        status: 200,
        usage: TokenUsage {
            input_tokens: input,
            output_tokens: output,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
        },
        cost_micro_usd: 0,
        estimated: false,
    }
}

fn tokens(n: i64) -> BudgetLimits {
    BudgetLimits {
        tokens: Some(n),
        ..BudgetLimits::default()
    }
}

/// A fresh service whose root handler has a budget of `limit` tokens, and
/// an agent of the root.
fn root_with_tokens(limit: i64) -> (Env, Principal) {
    let env = Env::new();
    env.svc
        .budget_set(Principal::User, env.root, tokens(limit))
        .unwrap();
    let agent = env.agent(env.root);
    (env, agent)
}

#[test]
fn a_limit_on_a_boss_stops_its_underlings_calls() {
    let env = Env::new();
    let o = env.outcome(env.root, "work", &[env.root.root()]);
    let boss = env
        .svc
        .delegate(env.agent(env.root), o, &[])
        .unwrap()
        .handler;
    let o2 = env.outcome(boss, "sub-work", &[o]);
    let under = env.svc.delegate(env.agent(boss), o2, &[]).unwrap().handler;
    env.svc
        .budget_set(Principal::User, boss, tokens(1000))
        .unwrap();
    let agent = env.agent(under);

    // 600 spent by the underling.
    let r = env
        .svc
        .model_call_reserve(agent, request(500, 100))
        .unwrap();
    env.svc.model_call_settle(r, used(100, 500)).unwrap();
    // 600 + 500 > 1000: refused, though the underling has no budget of its own.
    let e = assert_kind(
        env.svc.model_call_reserve(agent, request(400, 100)),
        "quota",
    );
    let text = e.to_string();
    assert!(
        text.contains(&format!("budget of handler {boss} reached")),
        "{text}"
    );
    assert!(text.contains("save your state and stop"), "{text}");
    assert!(text.contains("raise it"), "{text}");
    // A call that fits still passes; the root (no budget) is not limited.
    let r = env
        .svc
        .model_call_reserve(agent, request(300, 100))
        .unwrap();
    env.svc.model_call_settle(r, used(0, 0)).unwrap();
    let r = env
        .svc
        .model_call_reserve(env.agent(env.root), request(100_000, 0))
        .unwrap();
    env.svc.model_call_settle(r, used(0, 0)).unwrap();

    // Raising the limit lets the underling go on.
    env.svc
        .budget_set(Principal::User, boss, tokens(2000))
        .unwrap();
    env.svc
        .model_call_reserve(agent, request(400, 100))
        .unwrap();
}

#[test]
fn a_reservation_holds_until_settled_with_the_actual_usage() {
    let (env, agent) = root_with_tokens(1000);
    let first = env.svc.model_call_reserve(agent, request(600, 0)).unwrap();
    // In flight: 600 reserved, so a second worst case of 600 does not fit.
    assert_kind(env.svc.model_call_reserve(agent, request(600, 0)), "quota");
    let shown = env.svc.budget_show(Principal::User, None).unwrap();
    assert_eq!(shown.spent.reserved_tokens, 600);
    assert_eq!(shown.spent.reserved_calls, 1);
    assert_eq!(shown.limits, Some(tokens(1000)));
    // Settled at 100 actual: the reservation is replaced by the usage.
    env.svc.model_call_settle(first, used(40, 60)).unwrap();
    let shown = env.svc.budget_show(Principal::User, None).unwrap();
    assert_eq!(shown.spent.reserved_tokens, 0);
    assert_eq!(shown.spent.tokens, 100);
    assert_eq!(shown.spent.calls, 1);
    let second = env.svc.model_call_reserve(agent, request(600, 0)).unwrap();
    env.svc.model_call_settle(second, used(0, 10)).unwrap();
}

/// The gateway settles calls together: each is settled as alone, and one
/// whose reservation is gone (settled already) is refused by itself,
/// writing nothing, while the others in its batch count.
#[test]
fn settlements_in_one_batch_count_each_and_a_released_one_alone_is_refused() {
    let (env, agent) = root_with_tokens(10_000);
    let a = env.svc.model_call_reserve(agent, request(600, 0)).unwrap();
    let b = env.svc.model_call_reserve(agent, request(500, 0)).unwrap();
    let c = env.svc.model_call_reserve(agent, request(400, 0)).unwrap();
    // `b` is settled on its own first: its reservation is gone.
    env.svc.model_call_settle(b.clone(), used(1, 1)).unwrap();
    let mut each = env
        .svc
        .model_call_meter_batch(
            &[(a, used(10, 20)), (b, used(100, 200)), (c, used(3, 4))],
            &[],
        )
        .unwrap()
        .settled
        .into_iter();
    assert!(each.next().unwrap().is_ok());
    assert_kind(each.next().unwrap(), "lease_lost");
    assert!(each.next().unwrap().is_ok());
    assert!(each.next().is_none());
    let shown = env.svc.budget_show(Principal::User, None).unwrap();
    // 2 (b alone) + 30 (a) + 7 (c); b's second usage is not counted.
    assert_eq!(shown.spent.tokens, 39);
    assert_eq!(shown.spent.calls, 3);
    assert_eq!(shown.spent.reserved_tokens, 0);
    assert_eq!(shown.spent.reserved_calls, 0);
    let cost = env.svc.cost_tree(Principal::User, None).unwrap();
    assert_eq!(cost.subtree.calls, 3);
}

/// Reservations in one batch are decided one after the other, after the
/// batch's settlements: a settlement frees room for the reservation after
/// it, a refused one (not an agent; over the budget) reserves nothing and
/// does not stop the others.
#[test]
fn reservations_in_one_batch_see_the_settlements_before_them_and_refuse_alone() {
    let (env, agent) = root_with_tokens(1000);
    let held = env.svc.model_call_reserve(agent, request(900, 0)).unwrap();
    let done = env
        .svc
        .model_call_meter_batch(
            &[(held, used(50, 50))],
            &[
                (agent, request(800, 0)),
                (Principal::User, request(1, 0)),
                (agent, request(800, 0)),
                (agent, request(50, 0)),
            ],
        )
        .unwrap();
    assert!(done.settled.iter().all(|r| r.is_ok()));
    let mut each = done.reserved.into_iter();
    // 100 spent + 800 fits only because the settlement went first.
    let first = each.next().unwrap().unwrap();
    assert_kind(each.next().unwrap(), "permission_denied");
    assert_kind(each.next().unwrap(), "quota");
    let last = each.next().unwrap().unwrap();
    let shown = env.svc.budget_show(Principal::User, None).unwrap();
    assert_eq!(shown.spent.tokens, 100);
    assert_eq!(shown.spent.reserved_tokens, 850);
    assert_eq!(shown.spent.reserved_calls, 2);
    env.svc.model_call_settle(first, used(0, 0)).unwrap();
    env.svc.model_call_settle(last, used(0, 0)).unwrap();
}

#[test]
fn call_and_cost_limits_refuse_and_budgets_are_the_users_to_set() {
    let env = Env::new();
    let agent = env.agent(env.root);
    env.svc
        .budget_set(
            Principal::User,
            env.root,
            BudgetLimits {
                calls: Some(1),
                ..BudgetLimits::default()
            },
        )
        .unwrap();
    let r = env.svc.model_call_reserve(agent, request(1, 0)).unwrap();
    env.svc.model_call_settle(r, used(1, 1)).unwrap();
    let e = assert_kind(env.svc.model_call_reserve(agent, request(1, 0)), "quota");
    assert!(e.to_string().contains("model calls limit 1"), "{e}");

    env.svc
        .budget_set(
            Principal::User,
            env.root,
            BudgetLimits {
                micro_usd: Some(1000),
                ..BudgetLimits::default()
            },
        )
        .unwrap();
    let mut costly = request(1, 0);
    costly.worst_cost_micro_usd = 1001;
    assert_kind(env.svc.model_call_reserve(agent, costly), "quota");

    // An agent cannot lift its own cap; negative limits are refused by name.
    assert_kind(
        env.svc.budget_set(agent, env.root, BudgetLimits::default()),
        "permission_denied",
    );
    let e = assert_kind(
        env.svc.budget_set(Principal::User, env.root, tokens(-1)),
        "invalid_input",
    );
    assert!(e.to_string().contains(&env.root.to_string()), "{e}");
}
