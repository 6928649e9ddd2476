//! Issue 28: a paused budget is seen wherever the work it holds is shown,
//! against a real `agency serve`: `agency handlers` (`paused (budget)`),
//! `agency orgs` (the organisation and its agents), `agency status` (each
//! paused budget) and an outside caller of the agency's API (`"paused":
//! true` on its pending message, at once rather than at the end of its
//! wait); and `agency budget set` under what was already spent says that
//! the subtree pauses now.

#![allow(clippy::unwrap_used)]

use agency_config::Home;
use agency_core::{HandlerId, Principal};
use agency_service::BudgetLimits;
use serde_json::{Value, json};

use crate::home_cli;

use home_cli::{agency, json, ok};

/// A home whose agency `weather` (executive handler under the root) is
/// applied before the daemon starts; the root and the executive.
fn home_with_agency(dir: &std::path::Path) -> (Home, HandlerId, HandlerId) {
    let home = Home::new(dir.join("home"));
    home.init().unwrap();
    let svc = home.open_service().unwrap();
    let root = svc.root_handler().unwrap().unwrap();
    let model: agency_org::AgencyModel = serde_json::from_value(json!({
        "name": "weather", "type": "Agency", "executiveAgent": "desk",
        "agents": [{"name": "desk", "title": "Desk", "source": {"file": "desk.agent", "line": 1}}],
        "source": {"file": "weather.agency", "line": 1}
    }))
    .unwrap();
    svc.org_apply(Principal::User, &model, false).unwrap();
    let exec = svc.org_executive("weather").unwrap().unwrap();
    (home, root, exec)
}

/// Pause the root's budget the way an agent would: a tool-call limit of
/// 0, reached by a tool call.
fn pause_root(home: &Home, root: HandlerId) {
    let svc = home.open_service().unwrap();
    // Started first: a paused subtree starts no agent.
    let agent = svc.agent_start(root).unwrap();
    svc.budget_set(
        Principal::User,
        root,
        BudgetLimits {
            tool_calls: Some(0),
            ..BudgetLimits::default()
        },
    )
    .unwrap();
    assert!(svc.tool_call_charge(Principal::agent(root, agent)).is_err());
    svc.agent_end(agent, "test").unwrap();
}

fn row_of<'a>(table: &'a str, id: &str) -> &'a str {
    table
        .lines()
        .find(|l| l.contains(id))
        .unwrap_or_else(|| panic!("no row for {id} in\n{table}"))
}

#[test]
fn issue28_a_paused_subtree_shows_in_handlers_orgs_status_and_to_outside_callers() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, root, exec) = home_with_agency(tmp.path());
    pause_root(&home, root);
    let mut daemon = home_cli::serve(&home, &tmp.path().join("daemon.log"));
    let (root_s, exec_s) = (root.to_string(), exec.to_string());

    // handlers: both the root and the executive under it are held.
    let text = ok(&home, &["handlers"]);
    assert!(row_of(&text, &root_s).contains("paused (budget)"), "{text}");
    assert!(row_of(&text, &exec_s).contains("paused (budget)"), "{text}");
    assert!(text.contains("agency resume <handler>"), "{text}");
    let list = json(&home, &["handlers"]);
    for h in list.as_array().unwrap() {
        assert_eq!(h["paused"]["by"], root_s.as_str(), "{h}");
        assert!(
            h["paused"]["reason"]
                .as_str()
                .unwrap()
                .contains("tool calls limit 0"),
            "{h}"
        );
    }

    // orgs: the organisation and its agent.
    let text = ok(&home, &["orgs"]);
    assert!(
        text.contains(&format!(
            "weather (up, paused by the budget of handler {root})"
        )),
        "{text}"
    );
    assert!(row_of(&text, "desk").contains("paused (budget)"), "{text}");
    let orgs = json(&home, &["orgs"]);
    assert_eq!(orgs[0]["paused"]["by"], root_s.as_str(), "{orgs}");
    assert_eq!(orgs[0]["agents"][0]["paused"]["by"], root_s.as_str());

    // status: each paused budget, and how to continue.
    let text = ok(&home, &["status"]);
    assert!(
        text.contains(&format!(
            "PAUSED: the subtree of handler {root} by its budget (tool calls limit 0"
        )),
        "{text}"
    );
    let status = json(&home, &["status"]);
    assert_eq!(status["paused"][0]["by"], root_s.as_str(), "{status}");

    // An outside caller: the user's `agency ask`, and a key over TCP,
    // which learns that it is paused but not whose budget or why.
    let asked = json(&home, &["ask", "weather", "Rain in Oslo?", "--wait", "0s"]);
    assert_eq!(asked["status"], "pending", "{asked}");
    assert_eq!(asked["paused"], true, "{asked}");
    let id = asked["id"].as_str().unwrap().to_owned();
    let text = ok(&home, &["answer", &id]);
    assert!(text.contains("is paused by its budget"), "{text}");
    let key = ok(&home, &["key", "mint", "--agency", "weather"]);
    let base = format!("http://{}", status["addr"].as_str().unwrap());
    let http = reqwest::blocking::Client::builder()
        .no_proxy()
        .build()
        .unwrap();
    // A wait of two minutes ends at once: nothing answers a paused agency.
    let r = http
        .post(format!("{base}/v1/agency/messages"))
        .bearer_auth(key.trim())
        .json(&json!({"agency": "weather", "message": "from outside", "wait_ms": 120_000}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 202);
    let v: Value = r.json().unwrap();
    assert_eq!(v["status"], "pending", "{v}");
    assert_eq!(v["paused"], true, "{v}");
    let body = v.to_string();
    assert!(
        !body.contains(&root_s) && !body.contains("tool calls"),
        "an outside caller sees only the fact: {body}"
    );

    // Resumed: nothing shows paused any more.
    ok(&home, &["resume", &root_s]);
    let text = ok(&home, &["handlers"]);
    assert!(!text.contains("paused"), "{text}");
    assert!(ok(&home, &["orgs"]).contains("weather (up)"));
    assert_eq!(json(&home, &["status"])["paused"], json!([]));
    let asked = json(&home, &["answer", &id]);
    assert_eq!(asked["paused"], Value::Null, "{asked}");
    let _ = daemon.kill();
    let _ = daemon.wait();
}

#[test]
fn issue28_budget_set_under_what_was_spent_says_it_pauses_now() {
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::new(tmp.path().join("home"));
    home.init().unwrap();
    let root = {
        let svc = home.open_service().unwrap();
        let root = svc.root_handler().unwrap().unwrap();
        // Three tool calls spent under a roomy limit.
        svc.budget_set(
            Principal::User,
            root,
            BudgetLimits {
                tool_calls: Some(100),
                ..BudgetLimits::default()
            },
        )
        .unwrap();
        let agent = svc.agent_start(root).unwrap();
        for _ in 0..3 {
            svc.tool_call_charge(Principal::agent(root, agent)).unwrap();
        }
        svc.agent_end(agent, "test").unwrap();
        root
    };
    let mut daemon = home_cli::serve(&home, &tmp.path().join("daemon.log"));
    let r = root.to_string();

    // Above the spend: nothing said, nothing paused.
    let out = ok(&home, &["budget", "set", &r, "--tool-calls", "10"]);
    assert!(!out.contains("PAUSED"), "{out}");
    assert!(!ok(&home, &["budget", "show"]).contains("PAUSED"));

    // Under it: said now, and paused now (not at the next call).
    let out = ok(&home, &["budget", "set", &r, "--tool-calls", "2"]);
    assert!(out.contains("PAUSED NOW"), "{out}");
    assert!(out.contains("tool calls limit 2, spent 3"), "{out}");
    assert!(
        ok(&home, &["budget", "show"]).contains("PAUSED: tool calls limit 2, spent 3"),
        "paused in the store"
    );
    assert!(row_of(&ok(&home, &["handlers"]), &r).contains("paused (budget)"));
    let v = json(
        &home,
        &["budget", "set", &r, "--tool-calls", "3", "--usd", "5"],
    );
    assert!(
        v["paused"]["reason"]
            .as_str()
            .unwrap()
            .contains("tool calls limit 3, spent 3"),
        "{v}"
    );

    // Raised above it again: continues.
    let v = json(&home, &["budget", "set", &r, "--tool-calls", "50"]);
    assert_eq!(v["paused"], Value::Null, "{v}");
    assert!(!ok(&home, &["budget", "show"]).contains("PAUSED"));
    let (code, _, _) = agency(&home, &["status"]);
    assert_eq!(code, 0);
    let _ = daemon.kill();
    let _ = daemon.wait();
}

/// Issue 30: `agency pause` holds a subtree by hand until `agency resume`,
/// shown as paused by the user (not by a budget) wherever it shows, and an
/// agent's token cannot pause anything through the REST route.
#[test]
fn issue30_pause_by_hand_holds_until_resume() {
    let tmp = tempfile::tempdir().unwrap();
    let (home, root, exec) = home_with_agency(tmp.path());
    let mut daemon = home_cli::serve(&home, &tmp.path().join("daemon.log"));
    let exec_s = exec.to_string();

    // An agent's token on the pause route is refused and changes nothing.
    let minted = home
        .open_service()
        .unwrap()
        .token_mint(Principal::User, exec, None)
        .unwrap();
    let status = json(&home, &["status"]);
    let base = format!("http://{}", status["addr"].as_str().unwrap());
    let http = reqwest::blocking::Client::builder()
        .no_proxy()
        .build()
        .unwrap();
    let r = http
        .post(format!("{base}/v1/budgets/{root}/pause"))
        .bearer_auth(&minted.token)
        .json(&json!({}))
        .send()
        .unwrap();
    assert!(r.status().is_client_error(), "{}", r.status());
    assert!(!ok(&home, &["handlers"]).contains("paused"));

    let out = ok(&home, &["pause", &exec_s[..8], "--note", "checking costs"]);
    assert!(
        out.contains(&format!("paused the subtree of handler {exec}")),
        "{out}"
    );
    let text = ok(&home, &["handlers"]);
    assert!(row_of(&text, &exec_s).contains("paused (by you)"), "{text}");
    assert!(
        !row_of(&text, &root.to_string()).contains("paused"),
        "{text}"
    );
    assert!(
        ok(&home, &["orgs"]).contains("paused"),
        "the agency's agent is held"
    );
    let st = ok(&home, &["status"]);
    assert!(
        st.contains(&format!(
            "PAUSED: the subtree of handler {exec} by you (paused by the user: checking costs)"
        )),
        "{st}"
    );
    // Again: nothing changes, and it says so.
    let out = ok(&home, &["pause", &exec_s]);
    assert!(out.contains("already paused"), "{out}");
    let v = json(&home, &["pause", &exec_s]);
    assert_eq!(v["paused"], false, "{v}");
    // New limits do not lift it; resume does.
    ok(&home, &["budget", "set", &exec_s, "--tool-calls", "100"]);
    assert!(row_of(&ok(&home, &["handlers"]), &exec_s).contains("paused (by you)"));
    let out = ok(&home, &["resume", &exec_s]);
    assert!(out.contains(&format!("resumed: {exec}")), "{out}");
    assert!(!ok(&home, &["handlers"]).contains("paused"));
    // A bad note is refused with the reason.
    let (code, _, err) = agency(&home, &["pause", &exec_s, "--note", &"x".repeat(501)]);
    assert_ne!(code, 0);
    assert!(err.contains("at most 500 characters"), "{err}");
    let _ = daemon.kill();
    let _ = daemon.wait();
}
