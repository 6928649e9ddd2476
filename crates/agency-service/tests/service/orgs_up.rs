//! Issue 12 item 5: `agency up` stands an Agency Model up as standing
//! handlers under the root handler; re-applying is idempotent, changes
//! are applied in place, removed agents retire, `down` retires the whole
//! organisation and `up` brings it back with the same handlers; a model
//! that fails its checks changes nothing.

use agency_core::{HandlerId, Level, MailTarget, Principal, Resource};
use agency_org::AgencyModel;
use agency_service::{AgentAction, CapAction, Declared, MailBody, OrgPlan};
use agency_store::HandlerStatus;
use serde_json::{Value, json};

use crate::support::{Env, assert_kind};

const U: Principal = Principal::User;

fn agent(name: &str, title: &str, extra: Value) -> Value {
    let mut a = json!({
        "name": name, "title": title,
        "source": {"file": format!("{name}.agent"), "line": 1}
    });
    if let (Value::Object(a), Value::Object(e)) = (&mut a, extra) {
        a.extend(e);
    }
    a
}

/// Seed 002's WeatherAgency, with a sub-agency so that executives nest.
pub(crate) fn weather_json() -> Value {
    json!({
        "name": "WeatherAgency",
        "type": "Agency",
        "description": "Provide weather updates to users and greet them politely.",
        "staticMemory": ["We are WeatherAgency. We handle user greetings and weather information."],
        "executiveAgent": "FrontDeskAgent",
        "agents": [
            agent("FrontDeskAgent", "Front Desk", json!({
                "staticMemory": ["You are FrontDeskAgent, the main interface for the WeatherAgency."],
                "behavior": {"onMessage": ["Decide if the user is just greeting.",
                    "If they want weather information, pass the request to WeatherAgent.",
                    "Return a final response."]}
            })),
            agent("WeatherAgent", "Weather Assistant", json!({
                "staticMemory": ["You are WeatherAgent. You specialize in providing weather data."],
                "tools": ["WeatherTool"],
                "capabilities": ["egress:api.example-weather.com"]
            }))
        ],
        "tools": [{
            "name": "WeatherTool",
            "description": "Calls an external weather API.",
            "implementation": {"type": "http", "baseUrl": "https://api.example-weather.com",
                               "endpoint": "/current", "method": "GET", "query": ["location"]},
            "interface": {"inputFormat": {"location": "string"},
                          "outputFormat": {"temp": "number", "conditions": "string"},
                          "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}},
            "source": {"file": "WeatherTool.tool", "line": 1}
        }],
        "subAgencies": [{
            "name": "AlertsAgency",
            "type": "Agency",
            "description": "Warn about storms.",
            "executiveAgent": "AlertsChief",
            "agents": [
                agent("AlertsChief", "Alerts Chief", json!({})),
                agent("StormWatcher", "Storm Watcher", json!({}))
            ],
            "source": {"file": "AlertsAgency/AlertsAgency.agency", "line": 1}
        }],
        "source": {"file": "WeatherAgency.agency", "line": 1}
    })
}

pub(crate) fn model(v: Value) -> AgencyModel {
    serde_json::from_value(v).unwrap()
}

fn handler_of(p: &OrgPlan, name: &str) -> HandlerId {
    p.agents
        .iter()
        .find(|a| a.agent == name)
        .and_then(|a| a.handler)
        .unwrap_or_else(|| panic!("no handler for {name} in {p:#?}"))
}

fn action_of(p: &OrgPlan, name: &str) -> AgentAction {
    p.agents.iter().find(|a| a.agent == name).unwrap().action
}

fn live_caps(env: &Env, h: HandlerId) -> Vec<(Resource, Level)> {
    env.svc
        .permissions_list(U, Some(h))
        .unwrap()
        .into_iter()
        .map(|c| (c.resource, c.level))
        .collect()
}

fn file_version(env: &Env, f: agency_core::FileId) -> i64 {
    agency_store::read(&**env.svc.store(), |tx| tx.file(f))
        .unwrap()
        .unwrap()
        .latest_version
}

fn handler_count(env: &Env) -> usize {
    env.svc.handlers(U, None, Some(1000)).unwrap().len()
}

#[test]
fn issue12_item5_up_stands_the_model_up_as_a_handler_tree() {
    let env = Env::new();
    let p = env.svc.org_apply(U, &model(weather_json()), false).unwrap();
    assert!(p.changed && !p.plan_only);
    for a in &p.agents {
        assert_eq!(a.action, AgentAction::Create, "{a:?}");
    }
    let front = handler_of(&p, "FrontDeskAgent");
    let weather = handler_of(&p, "WeatherAgent");
    let chief = handler_of(&p, "AlertsChief");
    let storm = handler_of(&p, "StormWatcher");
    assert_eq!(p.executive, Some(front));
    assert_eq!(env.svc.org_executive("WeatherAgency").unwrap(), Some(front));

    // Bosses: the top executive under the root handler, an agency's agents
    // under its executive, a sub-agency's executive under its parent's.
    let boss = |h| env.svc.handler_view(U, h).unwrap().boss;
    assert_eq!(boss(front), Some(env.root));
    assert_eq!(boss(weather), Some(front));
    assert_eq!(boss(chief), Some(front));
    assert_eq!(boss(storm), Some(chief));

    // Each root outcome is perpetual, titled after the agent, and a child
    // of its boss's root.
    for (h, parent, title) in [
        (
            front,
            env.root,
            "WeatherAgency: FrontDeskAgent (Front Desk)",
        ),
        (
            weather,
            front,
            "WeatherAgency: WeatherAgent (Weather Assistant)",
        ),
        (storm, chief, "AlertsAgency: StormWatcher (Storm Watcher)"),
    ] {
        let v = env.svc.outcome_view(U, h.root()).unwrap();
        assert!(v.outcome.perpetual, "{title}");
        assert_eq!(v.outcome.title, title);
        assert_eq!(v.outcome.responsible, h);
        let parents: Vec<_> = v.parents.iter().map(|b| b.id).collect();
        assert_eq!(parents, vec![parent.root()]);
    }

    // Capabilities: the tool and the egress grant on WeatherAgent; mail
    // along the reporting lines, and nothing else.
    let w = live_caps(&env, weather);
    assert!(
        w.contains(&(Resource::Tool("WeatherTool".into()), Level::Read)),
        "{w:?}"
    );
    assert!(
        w.contains(&(
            Resource::Egress("api.example-weather.com".into()),
            Level::Read
        )),
        "{w:?}"
    );
    assert!(w.contains(&(Resource::Mail(MailTarget::Handler(front)), Level::Write)));
    let f = live_caps(&env, front);
    for h in [weather, chief, env.root] {
        assert!(
            f.contains(&(Resource::Mail(MailTarget::Handler(h)), Level::Write)),
            "{h}: {f:?}"
        );
    }
    assert!(
        !f.contains(&(Resource::Mail(MailTarget::Handler(storm)), Level::Write)),
        "no skip-level mail"
    );
    assert!(
        !f.iter().any(|(r, _)| matches!(r, Resource::Tool(_))),
        "{f:?}"
    );
    assert!(
        live_caps(&env, env.root)
            .contains(&(Resource::Mail(MailTarget::Handler(front)), Level::Write))
    );

    // Standing instructions per handler.
    let s = env.svc.handler_standing(weather).unwrap().unwrap();
    assert!(
        s.contains("You are WeatherAgent, \"Weather Assistant\""),
        "{s}"
    );
    assert!(
        s.contains(&format!("FrontDeskAgent (\"Front Desk\"), handler {front}")),
        "{s}"
    );
    assert!(
        s.contains("WeatherTool: Calls an external weather API."),
        "{s}"
    );
    assert_eq!(env.svc.handler_standing(env.root).unwrap(), None);

    // Listed with its agents.
    let orgs = env.svc.orgs(U).unwrap();
    assert_eq!(orgs.len(), 1);
    assert_eq!(orgs[0].executive, front);
    assert_eq!(orgs[0].agents.len(), 4);
    assert!(
        orgs[0]
            .agents
            .iter()
            .any(|a| a.agent == "FrontDeskAgent" && a.executive)
    );
}

#[test]
fn issue12_item5_plan_only_writes_nothing() {
    let env = Env::new();
    let before = handler_count(&env);
    let p = env.svc.org_apply(U, &model(weather_json()), true).unwrap();
    assert!(p.plan_only && p.changed);
    assert_eq!(p.agents.len(), 4);
    assert!(
        p.agents
            .iter()
            .all(|a| a.action == AgentAction::Create && a.handler.is_none())
    );
    assert!(p.capabilities.iter().any(|c| c.holder == "WeatherAgent"
        && c.resource == "tool:WeatherTool"
        && c.change == CapAction::Added));
    assert!(
        p.capabilities
            .iter()
            .any(|c| c.holder == "FrontDeskAgent" && c.resource == "mail:@WeatherAgent")
    );
    assert_eq!(handler_count(&env), before);
    assert!(env.svc.orgs(U).unwrap().is_empty());
    assert_eq!(env.svc.org_executive("WeatherAgency").unwrap(), None);

    // A plan against an applied organisation changes nothing either.
    env.svc.org_apply(U, &model(weather_json()), false).unwrap();
    let mut v = weather_json();
    v["agents"][1]["staticMemory"] = json!(["Changed."]);
    let before = env.svc.orgs(U).unwrap();
    let p = env.svc.org_apply(U, &model(v), true).unwrap();
    assert_eq!(action_of(&p, "WeatherAgent"), AgentAction::Update);
    assert_eq!(env.svc.orgs(U).unwrap(), before);
    let weather = handler_of(&p, "WeatherAgent");
    assert!(
        !env.svc
            .handler_standing(weather)
            .unwrap()
            .unwrap()
            .contains("Changed.")
    );
}

#[test]
fn issue12_item5_reapplying_an_unchanged_model_is_a_no_op() {
    let env = Env::new();
    let first = env.svc.org_apply(U, &model(weather_json()), false).unwrap();
    let views: Vec<_> = first
        .agents
        .iter()
        .map(|a| env.svc.handler_view(U, a.handler.unwrap()).unwrap())
        .collect();
    let versions: Vec<_> = views
        .iter()
        .map(|v| {
            (
                file_version(&env, v.state_doc),
                file_version(&env, v.audit_log),
            )
        })
        .collect();
    let caps_before = live_caps(&env, handler_of(&first, "WeatherAgent"));
    let orgs_before = env.svc.orgs(U).unwrap();

    let again = env.svc.org_apply(U, &model(weather_json()), false).unwrap();
    assert!(!again.changed, "{again:#?}");
    assert!(again.capabilities.is_empty());
    for (a, b) in first.agents.iter().zip(&again.agents) {
        assert_eq!(b.action, AgentAction::Unchanged);
        assert_eq!(a.handler, b.handler);
    }
    let versions_after: Vec<_> = views
        .iter()
        .map(|v| {
            (
                file_version(&env, v.state_doc),
                file_version(&env, v.audit_log),
            )
        })
        .collect();
    assert_eq!(
        versions, versions_after,
        "state documents and audit logs untouched"
    );
    assert_eq!(
        caps_before,
        live_caps(&env, handler_of(&again, "WeatherAgent"))
    );
    assert_eq!(orgs_before, env.svc.orgs(U).unwrap());
}

#[test]
fn issue12_item5_a_changed_agent_is_updated_in_place_and_a_removed_tool_revoked() {
    let env = Env::new();
    let first = env.svc.org_apply(U, &model(weather_json()), false).unwrap();
    let weather = handler_of(&first, "WeatherAgent");
    let state = env.svc.handler_view(U, weather).unwrap().state_doc;
    let state_v = file_version(&env, state);

    let mut v = weather_json();
    v["agents"][1]["staticMemory"] = json!(["You know every cloud by name."]);
    v["agents"][1]["tools"] = json!([]);
    v["agents"][1]["model"] = json!("fast");
    let p = env.svc.org_apply(U, &model(v), false).unwrap();
    assert_eq!(action_of(&p, "WeatherAgent"), AgentAction::Update);
    let fields = &p
        .agents
        .iter()
        .find(|a| a.agent == "WeatherAgent")
        .unwrap()
        .fields;
    for f in ["staticMemory", "tools", "model"] {
        assert!(fields.contains(&f.to_owned()), "{fields:?}");
    }
    assert_eq!(action_of(&p, "FrontDeskAgent"), AgentAction::Unchanged);
    assert!(p.capabilities.iter().any(|c| c.holder == "WeatherAgent"
        && c.resource == "tool:WeatherTool"
        && c.change == CapAction::Removed));
    assert_eq!(handler_of(&p, "WeatherAgent"), weather, "same handler");
    assert!(
        !live_caps(&env, weather)
            .iter()
            .any(|(r, _)| matches!(r, Resource::Tool(_)))
    );
    let s = env.svc.handler_standing(weather).unwrap().unwrap();
    assert!(
        s.contains("You know every cloud by name.") && !s.contains("WeatherTool:"),
        "{s}"
    );
    assert_eq!(
        env.svc.model_show(U, weather).unwrap().own.as_deref(),
        Some("fast")
    );
    assert_eq!(
        file_version(&env, state),
        state_v,
        "the state document is the agent's, not the sources'"
    );
}

#[test]
fn issue12_item5_a_removed_agent_retires_and_comes_back_with_its_handler() {
    let env = Env::new();
    let first = env.svc.org_apply(U, &model(weather_json()), false).unwrap();
    let front = handler_of(&first, "FrontDeskAgent");
    let weather = handler_of(&first, "WeatherAgent");
    // Some history of its own, to find again.
    let note = env.outcome(weather, "Remember Oslo", &[weather.root()]);
    let agent = env.agent(weather);

    let mut v = weather_json();
    v["agents"].as_array_mut().unwrap().remove(1);
    let p = env.svc.org_apply(U, &model(v), false).unwrap();
    assert_eq!(action_of(&p, "WeatherAgent"), AgentAction::Retire);
    assert_eq!(
        env.svc.handler_view(U, weather).unwrap().status,
        HandlerStatus::Deactivated
    );
    assert!(
        live_caps(&env, weather).is_empty(),
        "its capabilities are revoked"
    );
    assert!(
        !live_caps(&env, front)
            .contains(&(Resource::Mail(MailTarget::Handler(weather)), Level::Write))
    );
    // Its agent was ended.
    assert_kind(env.svc.outcome_view(agent, note), "permission_denied");
    let fs = env.svc.handler_standing(front).unwrap().unwrap();
    assert!(
        !fs.contains(&weather.to_string()),
        "no longer a contact: {fs}"
    );

    let p = env.svc.org_apply(U, &model(weather_json()), false).unwrap();
    assert_eq!(action_of(&p, "WeatherAgent"), AgentAction::Reactivate);
    assert_eq!(handler_of(&p, "WeatherAgent"), weather);
    assert_eq!(
        env.svc.handler_view(U, weather).unwrap().status,
        HandlerStatus::Active
    );
    assert!(
        live_caps(&env, weather).contains(&(Resource::Tool("WeatherTool".into()), Level::Read))
    );
    assert!(
        live_caps(&env, front)
            .contains(&(Resource::Mail(MailTarget::Handler(weather)), Level::Write))
    );
    let o = env.svc.outcome_view(U, note).unwrap();
    assert_eq!(o.outcome.responsible, weather, "its outcome waited for it");
}

#[test]
fn issue12_item5_down_retires_the_organisation_and_up_brings_it_back() {
    let env = Env::new();
    let first = env.svc.org_apply(U, &model(weather_json()), false).unwrap();
    let front = handler_of(&first, "FrontDeskAgent");
    let live = env.agent(front);
    let down = env.svc.org_down(U, "WeatherAgency").unwrap();
    assert_eq!(down.handlers.len(), 4);
    assert_eq!(down.agents_to_kill, vec![live.agent_id().unwrap()]);
    for a in &first.agents {
        let v = env.svc.handler_view(U, a.handler.unwrap()).unwrap();
        assert_eq!(v.status, HandlerStatus::Deactivated, "{}", a.agent);
    }
    assert_eq!(env.svc.org_executive("WeatherAgency").unwrap(), None);
    assert!(env.svc.orgs(U).unwrap()[0].retired_at.is_some());
    assert_kind(env.svc.org_down(U, "WeatherAgency"), "invalid_input");
    assert_kind(env.svc.org_down(U, "NoSuchOrg"), "not_found");
    // Issue 30: the apply and the take-down are each one event, on the
    // executive (a refused take-down is none).
    let q = agency_service::EventQuery {
        kinds: vec!["org".into()],
        ..Default::default()
    };
    let ev = env.svc.events_read(U, &q).unwrap().events;
    let seen: Vec<_> = ev
        .iter()
        .map(|e| (e.kind.as_str().to_owned(), e.handler, e.data["org"].clone()))
        .collect();
    let exec = first.executive;
    assert_eq!(
        seen,
        [
            ("org.applied".to_owned(), exec, "WeatherAgency".into()),
            ("org.down".to_owned(), exec, "WeatherAgency".into()),
        ]
    );
    assert_eq!(ev[1].data["handlers"], 4);
    // The user cannot write to a retired agent.
    let body = MailBody::Text {
        subject: None,
        text: "hello?".into(),
    };
    assert_kind(
        env.svc.mail_send(U, MailTarget::Handler(front), &body),
        "invalid_input",
    );

    let up = env.svc.org_apply(U, &model(weather_json()), false).unwrap();
    assert!(
        up.agents
            .iter()
            .all(|a| a.action == AgentAction::Reactivate),
        "{up:#?}"
    );
    for (a, b) in first.agents.iter().zip(&up.agents) {
        assert_eq!(a.handler, b.handler, "same handlers (and outcome ids)");
        assert_eq!(
            env.svc.handler_view(U, b.handler.unwrap()).unwrap().status,
            HandlerStatus::Active
        );
    }
    assert_eq!(env.svc.org_executive("WeatherAgency").unwrap(), Some(front));
    assert!(env.svc.orgs(U).unwrap()[0].retired_at.is_none());
    env.svc
        .mail_send(U, MailTarget::Handler(front), &body)
        .unwrap();
}

#[test]
fn issue12_item5_a_model_that_fails_its_checks_changes_nothing() {
    let env = Env::new();
    env.svc.set_declared(Declared {
        runtime: Some("builtin".into()),
        models: ["fast".to_owned()].into(),
        ..Declared::default()
    });
    let before = handler_count(&env);
    let bad = |f: &dyn Fn(&mut Value)| {
        let mut v = weather_json();
        f(&mut v);
        model(v)
    };
    let cases: Vec<(&str, AgencyModel)> = vec![
        (
            "organisation name",
            bad(&|v| v["name"] = json!("Weather Agency!")),
        ),
        (
            "capability",
            bad(&|v| v["agents"][1]["capabilities"] = json!(["disk:/etc"])),
        ),
        (
            "kb capability",
            bad(&|v| {
                v["agents"][1]["capabilities"] = json!(["kb:00000000-0000-0000-0000-000000000000"])
            }),
        ),
        (
            "undeclared mcp server",
            bad(&|v| v["agents"][1]["capabilities"] = json!(["mcp_server:gmail"])),
        ),
        (
            "unknown tool",
            bad(&|v| v["agents"][1]["tools"] = json!(["Nope"])),
        ),
        (
            "unknown connection",
            bad(&|v| v["agents"][1]["connections"] = json!(["Ghost"])),
        ),
        ("executive", bad(&|v| v["executiveAgent"] = json!("Ghost"))),
        (
            "duplicate agent",
            bad(&|v| v["subAgencies"][0]["agents"][1]["name"] = json!("WeatherAgent")),
        ),
        (
            "undeclared model",
            bad(&|v| v["agents"][1]["model"] = json!("huge")),
        ),
        (
            "runtime",
            bad(&|v| v["agents"][1]["runtime"] = json!("claude-code")),
        ),
        (
            "budget",
            bad(&|v| v["agents"][1]["budget"] = json!({"wallClock": "soon"})),
        ),
    ];
    for (what, m) in &cases {
        let e = assert_kind(env.svc.org_apply(U, m, false), "invalid_input");
        assert!(e.to_string().contains("nothing was changed"), "{what}: {e}");
        assert_eq!(handler_count(&env), before, "{what}");
    }
    let e = env
        .svc
        .org_apply(U, &cases[9].1, false)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("WeatherAgent") && e.contains("claude-code") && e.contains("builtin"),
        "{e}"
    );
    assert!(env.svc.orgs(U).unwrap().is_empty());

    // Against an applied organisation, a failing change leaves it as it was.
    env.svc.org_apply(U, &model(weather_json()), false).unwrap();
    let orgs = env.svc.orgs(U).unwrap();
    let mut v = weather_json();
    v["agents"][1]["staticMemory"] = json!(["Changed."]);
    v["agents"][1]["capabilities"] = json!(["repo:nope=admin"]);
    assert_kind(env.svc.org_apply(U, &model(v), false), "invalid_input");
    assert_eq!(env.svc.orgs(U).unwrap(), orgs);
}

#[test]
fn issue12_item5_budgets_and_models_land_on_the_handlers() {
    let env = Env::new();
    let mut v = weather_json();
    v["budget"] = json!({"usd": 5.0, "spawns": 100});
    v["agents"][0]["budget"] = json!({"usd": 1.0});
    v["agents"][1]["budget"] = json!({"tokens": 1000, "wallClock": "1h30m"});
    v["agents"][1]["model"] = json!("fast");
    let p = env.svc.org_apply(U, &model(v), false).unwrap();
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("FrontDeskAgent") && w.contains("agency's")),
        "{:?}",
        p.warnings
    );
    let front = handler_of(&p, "FrontDeskAgent");
    let weather = handler_of(&p, "WeatherAgent");
    let tree = env.svc.budget_show(U, Some(front)).unwrap();
    let l = tree.limits.unwrap();
    assert_eq!(
        (l.micro_usd, l.spawns),
        (Some(5_000_000), Some(100)),
        "the agency's budget wins"
    );
    let wb = env
        .svc
        .budget_show(U, Some(weather))
        .unwrap()
        .limits
        .unwrap();
    assert_eq!((wb.tokens, wb.wall_clock_ms), (Some(1000), Some(5_400_000)));
    assert_eq!(
        env.svc.model_show(U, weather).unwrap().own.as_deref(),
        Some("fast")
    );
    assert_eq!(env.svc.model_show(U, front).unwrap().own, None);
}

/// An HTTP tool whose base URL its agent has no egress to would have every
/// call refused: `agency up` says so in the plan (and still applies).
#[test]
fn issue12_item4_the_plan_warns_of_an_http_tool_without_egress() {
    let env = Env::new();
    let p = env.svc.org_apply(U, &model(weather_json()), true).unwrap();
    assert!(
        !p.warnings.iter().any(|w| w.contains("holds no egress")),
        "WeatherAgent has egress:api.example-weather.com: {:?}",
        p.warnings
    );
    let mut v = weather_json();
    v["agents"][1]["capabilities"] = json!([]);
    let p = env.svc.org_apply(U, &model(v), true).unwrap();
    let w: Vec<&String> = p
        .warnings
        .iter()
        .filter(|w| w.contains("holds no egress"))
        .collect();
    assert_eq!(w.len(), 1, "{:?}", p.warnings);
    assert!(
        w[0].contains("WeatherAgent")
            && w[0].contains("WeatherTool")
            && w[0].contains("api.example-weather.com:443"),
        "{w:?}"
    );
}

/// The same for an MCP tool's server URL: it is reached through the same
/// egress rule, so an agent without egress to it is warned of.
#[test]
fn issue12_item4_the_plan_warns_of_an_mcp_url_tool_without_egress() {
    let env = Env::new();
    let mut v = weather_json();
    v["tools"][0]["implementation"] =
        json!({"type": "mcp", "url": "https://mcp.example.com/mcp", "tool": "current"});
    let p = env.svc.org_apply(U, &model(v), true).unwrap();
    let w: Vec<&String> = p
        .warnings
        .iter()
        .filter(|w| w.contains("holds no egress"))
        .collect();
    assert_eq!(w.len(), 1, "{:?}", p.warnings);
    assert!(
        w[0].contains("WeatherTool") && w[0].contains("mcp.example.com:443"),
        "{w:?}"
    );
}
