//! Issue 12 item 5, messaging and attacks: lateral mail exists only where
//! a connection grants it (seed 004: main connected to airtable and
//! github), an organisation's agents cannot reach another organisation's,
//! agents cannot apply or take down organisations nor fire standing
//! agents, and a standing handler has no work (no agent) while idle.

use agency_core::{HandlerId, MailTarget, Principal};
use agency_service::{MailBody, OrgPlan};
use serde_json::{Value, json};

use crate::orgs_up::{model, weather_json};
use crate::support::{Env, assert_kind};

const U: Principal = Principal::User;

fn agent(name: &str, connections: &[&str]) -> Value {
    json!({"name": name, "title": name, "connections": connections,
           "source": {"file": format!("{name}.agent"), "line": 1}})
}

/// Seed 004's agents.json: three siblings under a front desk, main
/// connected to airtable and github.
fn octybot(name: &str) -> Value {
    json!({
        "name": name, "type": "Agency", "executiveAgent": "front",
        "agents": [agent("front", &[]), agent("main", &["airtable", "github"]),
                   agent("airtable", &[]), agent("github", &[])],
        "source": {"file": "agents.json", "line": 1}
    })
}

fn h(p: &OrgPlan, name: &str) -> HandlerId {
    p.agents
        .iter()
        .find(|a| a.agent == name)
        .and_then(|a| a.handler)
        .unwrap()
}

fn text(t: &str) -> MailBody {
    MailBody::Text {
        subject: None,
        text: t.into(),
    }
}

#[test]
fn issue12_item5_seed004_lateral_mail_only_along_connections() {
    let env = Env::new();
    let p = env
        .svc
        .org_apply(U, &model(octybot("Octybot")), false)
        .unwrap();
    let (main, airtable, github) = (h(&p, "main"), h(&p, "airtable"), h(&p, "github"));
    let send = |from: HandlerId, to: HandlerId| {
        env.svc
            .mail_send(env.agent(from), MailTarget::Handler(to), &text("hi"))
    };
    send(main, airtable).unwrap();
    send(main, github).unwrap();
    // The target answers back along the connection.
    send(airtable, main).unwrap();
    send(github, main).unwrap();
    // Siblings without a connection: refused, both ways.
    assert_kind(send(airtable, github), "permission_denied");
    assert_kind(send(github, airtable), "permission_denied");
    // The standing instructions say so.
    let s = env.svc.handler_standing(airtable).unwrap().unwrap();
    assert!(
        s.contains(&format!("Connection: main (\"main\"), handler {main}")),
        "{s}"
    );
    assert!(!s.contains(&github.to_string()), "{s}");

    // Removing the connection revokes it.
    let mut v = octybot("Octybot");
    v["agents"][1]["connections"] = json!(["github"]);
    env.svc.org_apply(U, &model(v), false).unwrap();
    assert_kind(send(main, airtable), "permission_denied");
    assert_kind(send(airtable, main), "permission_denied");
    send(main, github).unwrap();
}

#[test]
fn issue12_item5_attack_an_agent_cannot_reach_another_organisations_agents() {
    let env = Env::new();
    let a = env
        .svc
        .org_apply(U, &model(octybot("OrgA")), false)
        .unwrap();
    let b = env
        .svc
        .org_apply(U, &model(octybot("OrgB")), false)
        .unwrap();
    for (from, to) in [
        ("main", "airtable"),
        ("front", "front"),
        ("front", "main"),
        ("airtable", "main"),
    ] {
        let r = env.svc.mail_send(
            env.agent(h(&a, from)),
            MailTarget::Handler(h(&b, to)),
            &text("psst"),
        );
        assert_kind(r, "permission_denied");
    }
    // Nor the root handler, which only the top executive reports to.
    assert_kind(
        env.svc.mail_send(
            env.agent(h(&a, "main")),
            MailTarget::Handler(env.root),
            &text("psst"),
        ),
        "permission_denied",
    );
    env.svc
        .mail_send(
            env.agent(h(&a, "front")),
            MailTarget::Handler(env.root),
            &text("report"),
        )
        .unwrap();
}

#[test]
fn issue12_item5_attack_agents_cannot_apply_or_take_down_organisations() {
    let env = Env::new();
    let p = env.svc.org_apply(U, &model(weather_json()), false).unwrap();
    let front = h(&p, "FrontDeskAgent");
    for who in [env.agent(front), env.agent(env.root)] {
        let mut v = weather_json();
        v["agents"][1]["capabilities"] = json!(["egress:*.example.com=write"]);
        assert_kind(
            env.svc.org_apply(who, &model(v), false),
            "permission_denied",
        );
        assert_kind(
            env.svc.org_apply(who, &model(octybot("Mine")), true),
            "permission_denied",
        );
        assert_kind(env.svc.org_down(who, "WeatherAgency"), "permission_denied");
        assert_kind(env.svc.orgs(who), "permission_denied");
    }
    assert_eq!(env.svc.orgs(U).unwrap().len(), 1);
    assert!(env.svc.orgs(U).unwrap()[0].retired_at.is_none());
    // Nor may a boss agent fire a standing agent: the shape is the user's.
    let weather = h(&p, "WeatherAgent");
    assert_kind(
        env.svc.force_stop(env.agent(front), weather),
        "permission_denied",
    );
    assert_kind(
        env.svc.force_stop(env.agent(env.root), front),
        "permission_denied",
    );
}

#[test]
fn issue12_item5_a_standing_handler_has_no_work_while_idle() {
    let env = Env::new();
    let p = env.svc.org_apply(U, &model(weather_json()), false).unwrap();
    let front = h(&p, "FrontDeskAgent");
    let weather = h(&p, "WeatherAgent");
    let with_work = |env: &Env| env.svc.handlers_with_work(None, 1000).unwrap();
    for a in &p.agents {
        assert!(
            !env.svc.has_work(a.handler.unwrap()).unwrap(),
            "{}",
            a.agent
        );
    }
    assert!(
        with_work(&env).is_empty(),
        "no agent spawns for an idle organisation"
    );

    // A message makes work; answering and acknowledging it ends it.
    let m = env
        .svc
        .mail_send(U, MailTarget::Handler(front), &text("Weather in Oslo?"))
        .unwrap();
    assert_eq!(with_work(&env), vec![front]);
    let me = env.agent(front);
    env.svc
        .mail_send(me, MailTarget::User, &text("Sunny."))
        .unwrap();
    env.svc.mail_ack(me, &[m]).unwrap();
    assert!(!env.svc.has_work(front).unwrap());
    assert!(with_work(&env).is_empty());

    // The perpetual root cannot be finished by its agent or its boss.
    assert_kind(
        env.svc.outcome_request_completion(me, "done"),
        "invalid_input",
    );
    assert_kind(
        env.svc.outcome_complete(me, weather.root(), "done"),
        "invalid_input",
    );
    assert_kind(
        env.svc
            .outcome_close(env.agent(weather), weather.root(), "done"),
        "permission_denied",
    );
}

/// Issue 12 item 8: seed 004's example as written (`examples/octybot`,
/// compiled by the compiler): `main` comes up as the executive with
/// `airtable` and `github` reporting to it; main can message airtable;
/// airtable cannot message github; each holds only its own tool.
#[test]
fn issue12_item8_seed004_example_comes_up_and_only_connections_talk() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/octybot");
    let compiled = agency_org::compile(&dir).unwrap();
    let env = Env::new();
    let p = env.svc.org_apply(U, &compiled.model, false).unwrap();
    let (main, airtable, github) = (h(&p, "main"), h(&p, "airtable"), h(&p, "github"));
    assert_eq!(env.svc.org_executive("octybot").unwrap(), Some(main));
    let send = |from: HandlerId, to: HandlerId| {
        env.svc
            .mail_send(env.agent(from), MailTarget::Handler(to), &text("hi"))
    };
    send(main, airtable).unwrap();
    send(airtable, main).unwrap();
    assert_kind(send(airtable, github), "permission_denied");
    assert_kind(send(github, airtable), "permission_denied");
    // Each agent's tools are its own.
    let names = |h: HandlerId| -> Vec<String> {
        env.svc
            .org_tools_for(env.agent(h))
            .unwrap()
            .into_iter()
            .map(|t| t.name)
            .collect()
    };
    assert_eq!(names(airtable), ["airtable"]);
    assert_eq!(names(github), ["github"]);
    assert!(names(main).is_empty());
}
