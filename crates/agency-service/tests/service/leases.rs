//! Several daemons on one store: a handler's lease goes to one daemon at a
//! time; a takeover ends the previous owner's agent (its token dies) and
//! releases the budget its calls in flight held; a write made under a lost
//! lease changes nothing. Two daemons are two lease owners on one service
//! here (the store is what they share); runs on both backends.

use agency_core::{MailTarget, Principal};
use agency_service::{
    BudgetLimits, KeepWarmDefaults, LeaseSpec, ModelCallRequest, RunReport, SpawnRequest,
};

use crate::support::{Env, assert_kind};

fn spec(owner: &str, ttl_ms: i64) -> LeaseSpec {
    LeaseSpec {
        owner: owner.into(),
        ttl_ms,
    }
}

fn request<'a>(
    h: agency_core::HandlerId,
    ws: &'a std::path::Path,
    lease: &'a LeaseSpec,
) -> SpawnRequest<'a> {
    SpawnRequest {
        handler: h,
        workspace: ws,
        runtime: "command",
        keep_warm: KeepWarmDefaults {
            default_ms: 0,
            executive_ms: 0,
        },
        lease: Some(lease),
    }
}

/// A call reserving 900 tokens: two at once do not fit a budget of 1000.
fn call() -> ModelCallRequest {
    ModelCallRequest {
        upstream: "main".into(),
        api: "anthropic".into(),
        model: "m".into(),
        stream: false,
        max_tokens: 800,
        input_estimate: 100,
        worst_cost_micro_usd: 0,
        priced: true,
    }
}

fn exited() -> RunReport {
    RunReport {
        reason: "exited".into(),
        normal: true,
        ..RunReport::default()
    }
}

#[test]
fn a_lease_goes_to_one_daemon_and_a_takeover_fences_the_old_one() {
    let env = Env::new();
    let h = env.root;
    let ws = env.dir.path().to_owned();
    env.svc
        .budget_set(
            Principal::User,
            h,
            BudgetLimits {
                tokens: Some(1000),
                ..BudgetLimits::default()
            },
        )
        .unwrap();
    env.svc
        .mail_send(
            Principal::User,
            MailTarget::Handler(h),
            &agency_service::MailBody::Text {
                subject: Some("work".into()),
                text: "do it".into(),
            },
        )
        .unwrap();
    let (a, b) = (spec("daemon-a", 60_000), spec("daemon-b", 60_000));

    // A claims and starts the agent; B is refused while A holds it.
    let pa = env
        .svc
        .spawn_prepare(&request(h, &ws, &a))
        .unwrap()
        .unwrap();
    let la = pa.lease.unwrap();
    assert_eq!((la.handler, la.token), (h, 1));
    assert!(
        env.svc
            .spawn_prepare(&request(h, &ws, &b))
            .unwrap()
            .is_none()
    );
    assert_eq!(env.svc.lease_claimable_work("daemon-b", 10).unwrap(), []);
    assert_eq!(env.svc.lease_claimable_work("daemon-a", 10).unwrap(), [h]);
    // A's agent has a call in flight: 900 of the 1000 tokens reserved.
    let agent_a = Principal::agent(h, pa.minted.agent);
    let in_flight_a = env.svc.model_call_reserve(agent_a, call()).unwrap();

    // A stops renewing (stalled, cut off, killed): its lease lapses.
    env.svc.lease_renew(&spec("daemon-a", 0)).unwrap();
    assert_eq!(env.svc.lease_claimable_work("daemon-b", 10).unwrap(), [h]);

    // B takes over: a higher token, A's agent ended, its token dead, its
    // reservation released (B's own call fits again).
    let pb = env
        .svc
        .spawn_prepare(&request(h, &ws, &b))
        .unwrap()
        .unwrap();
    let lb = pb.lease.unwrap();
    assert_eq!(lb.token, 2);
    assert_kind(
        env.svc.token_authenticate(&pa.minted.token),
        "permission_denied",
    );
    let agent_b = Principal::agent(h, pb.minted.agent);
    env.svc.model_call_reserve(agent_b, call()).unwrap();
    let runs = env.svc.runs(Principal::User, Some(h), None, None).unwrap();
    let ended_a = runs.iter().find(|r| r.agent == pa.minted.agent).unwrap();
    assert!(
        ended_a
            .end_reason
            .as_deref()
            .unwrap_or("")
            .contains("taken over by daemon daemon-b"),
        "{ended_a:?}"
    );

    // A comes back: whatever it writes as the old owner changes nothing.
    assert_kind(
        env.svc
            .agent_finish_as(pa.minted.agent, &exited(), Some(la.token)),
        "lease_lost",
    );
    let again = env.svc.runs(Principal::User, Some(h), None, None).unwrap();
    let still = again.iter().find(|r| r.agent == pa.minted.agent).unwrap();
    assert_eq!(
        still.end_reason, ended_a.end_reason,
        "the old owner's report was not recorded"
    );
    // Its call's answer ends: the settlement is fenced too (B released
    // the reservation), so no spend, call or model-call row appears.
    let cost_before = env.svc.cost_tree(Principal::User, Some(h)).unwrap();
    let used = agency_service::ModelCallResult {
        status: 200,
        usage: agency_store::TokenUsage {
            input_tokens: 50,
            output_tokens: 50,
            ..Default::default()
        },
        cost_micro_usd: 10,
        estimated: false,
    };
    assert_kind(env.svc.model_call_settle(in_flight_a, used), "lease_lost");
    assert_eq!(
        env.svc.cost_tree(Principal::User, Some(h)).unwrap(),
        cost_before,
        "the old owner's settlement recorded nothing"
    );
    assert_eq!(
        env.svc
            .model_calls_of(Principal::User, pa.minted.agent)
            .unwrap()
            .len(),
        0
    );
    assert_eq!(
        env.svc.lease_renew(&a).unwrap(),
        [],
        "A learns it lost the lease"
    );
    assert_eq!(
        env.svc
            .lease_renew(&b)
            .unwrap()
            .iter()
            .map(|l| (l.handler, l.token))
            .collect::<Vec<_>>(),
        [(h, 2)]
    );

    // B finishes as the owner, then gives the lease back: A may claim it
    // at once, with a higher token still.
    env.svc
        .agent_finish_as(pb.minted.agent, &exited(), Some(lb.token))
        .unwrap();
    assert!(env.svc.lease_release("daemon-b", lb).unwrap());
    assert!(
        !env.svc.lease_release("daemon-b", lb).unwrap(),
        "released once"
    );
    let pa2 = env
        .svc
        .spawn_prepare(&request(h, &ws, &a))
        .unwrap()
        .unwrap();
    assert_eq!(pa2.lease.unwrap().token, 3);

    // The log tells the story: each new token (not A's extensions), the
    // takeover with whom it came from, the release. The loss is logged by
    // the daemon that notices it (`lease_lost`).
    env.svc
        .lease_lost("daemon-a", la, "its renewal found it taken over")
        .unwrap();
    let page = env
        .svc
        .events_read(
            Principal::User,
            &agency_service::EventQuery {
                kinds: vec!["lease".into()],
                limit: Some(100),
                ..Default::default()
            },
        )
        .unwrap();
    let story: Vec<(&str, &str, i64, &serde_json::Value)> = page
        .events
        .iter()
        .map(|e| {
            assert_eq!(e.handler, Some(h));
            (
                e.kind.as_str(),
                e.data["owner"].as_str().unwrap(),
                e.data["token"].as_i64().unwrap(),
                &e.data["from"],
            )
        })
        .collect();
    let null = serde_json::Value::Null;
    let (from_a, from_b) = (serde_json::json!("daemon-a"), serde_json::json!("daemon-b"));
    assert_eq!(
        story,
        [
            ("lease.claimed", "daemon-a", 1, &null),
            ("lease.claimed", "daemon-b", 2, &from_a),
            ("lease.released", "daemon-b", 2, &null),
            ("lease.claimed", "daemon-a", 3, &from_b),
            ("lease.lost", "daemon-a", 1, &null),
        ]
    );
}

/// An attached client's agent (`agency token mint`) answers to no daemon:
/// its token works on every one, so a daemon starting on the shared store
/// leaves it live; a spawned agent no daemon leases (left by a daemon that
/// ran without leases: its process is recorded) is ended.
#[test]
fn issue33_a_daemon_start_ends_left_over_spawns_but_not_attached_clients() {
    let env = Env::new();
    let attached = env.agent(env.root);
    let o = env.outcome(env.root, "work", &[env.root.root()]);
    let child = env.svc.delegate(attached, o, &[]).unwrap().handler;
    let spawned = env.svc.agent_start_with_token(child, None).unwrap();
    env.svc
        .agent_record_process(spawned.agent, 4_000_000, 1)
        .unwrap();

    let reaped = env
        .svc
        .agents_reap_owned("daemon-a", "reaped: the daemon restarted")
        .unwrap();
    assert_eq!(
        reaped.iter().map(|a| a.id).collect::<Vec<_>>(),
        [spawned.agent]
    );
    let live: Vec<_> = env
        .svc
        .agents_live(Principal::User)
        .unwrap()
        .into_iter()
        .map(|a| a.handler)
        .collect();
    assert_eq!(
        live,
        [env.root],
        "the attached client's agent is still live"
    );
}

/// A token minted through a daemon sharing the store makes the client's
/// agent that daemon's: the handler's lease is claimed for it, another
/// daemon neither mints for the handler nor ends the agent at its start,
/// the minting daemon's restart does (as a single daemon's would), and
/// revoking the token gives the lease back.
#[test]
fn issue33_a_token_minted_through_a_daemon_is_that_daemons() {
    let env = Env::new();
    let (a, b) = (spec("daemon-a", 60_000), spec("daemon-b", 60_000));
    let h = env.root;
    let minted = env
        .svc
        .token_mint_as(Principal::User, h, None, Some(&a))
        .unwrap();
    assert_eq!(env.svc.lease_of(h).unwrap().unwrap().owner, "daemon-a");
    let e = env
        .svc
        .token_mint_as(Principal::User, h, None, Some(&b))
        .unwrap_err()
        .to_string();
    assert!(e.contains("daemon daemon-a runs it now"), "{e}");
    assert_eq!(
        env.svc
            .agents_reap_owned("daemon-b", "reaped: the daemon restarted")
            .unwrap(),
        []
    );
    let reaped = env
        .svc
        .agents_reap_owned("daemon-a", "reaped: the daemon restarted")
        .unwrap();
    assert_eq!(
        reaped.iter().map(|r| r.id).collect::<Vec<_>>(),
        [minted.agent]
    );

    let again = env
        .svc
        .token_mint_as(Principal::User, h, None, Some(&a))
        .unwrap();
    assert_eq!(env.svc.lease_renew(&a).unwrap().len(), 1);
    assert!(env.svc.token_revoke(Principal::User, again.agent).unwrap());
    assert_eq!(env.svc.lease_renew(&a).unwrap(), [], "given back");
    // B may now mint for the handler.
    env.svc
        .token_mint_as(Principal::User, h, None, Some(&b))
        .unwrap();
}
