//! Issue 11 item 3 from the command line: `agency budget set` (every kind
//! of limit), `agency budget show` (text and `--json`) and `agency resume`
//! against a real `agency serve`; a negative limit is refused naming the
//! handler; `agency init` sets the documented default root budget.

#![allow(clippy::unwrap_used)]

use agency_config::Home;
use agency_core::Principal;
use agency_service::BudgetLimits;

use crate::home_cli;

use home_cli::{agency, ok};

#[test]
fn budgets_are_set_and_shown_from_the_cli() {
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::new(tmp.path().join("home"));
    home.init().unwrap();
    let root = {
        let svc = home.open_service().unwrap();
        let root = svc.root_handler().unwrap().unwrap();
        // A root paused by its tool-call limit, for `agency resume` (its
        // agent started first: a paused subtree starts none).
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
        root
    };
    let mut daemon = home_cli::serve(&home, &tmp.path().join("daemon.log"));
    let r8 = &root.to_string()[..8];
    let shown = ok(&home, &["budget", "show"]);
    assert!(shown.contains("PAUSED: tool calls limit 0"), "{shown}");
    let resumed = ok(&home, &["resume", r8]);
    assert!(resumed.contains(&format!("resumed: {root}")), "{resumed}");
    let shown = ok(&home, &["budget", "show"]);
    assert!(!shown.contains("PAUSED"), "{shown}");
    let again = ok(&home, &["resume", r8]);
    assert!(again.contains("was paused"), "{again}");

    let set = ok(
        &home,
        &[
            "budget", "set", r8, "--tokens", "2000000", "--usd", "5", "--calls", "100",
        ],
    );
    assert!(set.contains("2000000 tokens, $5.0000, 100 calls"), "{set}");
    let shown = ok(&home, &["budget", "show"]);
    assert!(shown.starts_with(r8), "{shown}");
    assert!(
        shown.contains("spent: 0 tokens, $0.0000, 0 calls"),
        "{shown}"
    );
    assert!(
        shown.contains("limit: 2000000 tokens, $5.0000, 100 calls"),
        "{shown}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&ok(&home, &["--json", "budget", "show", r8])).unwrap();
    assert_eq!(v["handler"], root.to_string());
    assert_eq!(v["limits"]["tokens"], 2_000_000);
    assert_eq!(v["limits"]["micro_usd"], 5_000_000);
    assert_eq!(v["limits"]["calls"], 100);
    assert_eq!(v["spent"]["calls"], 0);

    // Every kind of limit.
    let set = ok(
        &home,
        &[
            "budget",
            "set",
            r8,
            "--tool-calls",
            "50",
            "--spawns",
            "7",
            "--live-agents",
            "3",
            "--handlers",
            "20",
            "--depth",
            "4",
            "--wall-clock",
            "1h30m",
        ],
    );
    assert!(
        set.contains(
            "50 tool calls, 7 spawns, 3 live agents, 20 handlers, 4 levels deep, 1h30m wall clock"
        ),
        "{set}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&ok(&home, &["--json", "budget", "show"])).unwrap();
    assert_eq!(v["limits"]["wall_clock_ms"], 5_400_000);
    assert_eq!(v["limits"]["tokens"], serde_json::Value::Null);
    let (code, _, err) = agency(&home, &["budget", "set", r8, "--wall-clock", "soon"]);
    assert_ne!(code, 0);
    assert!(err.contains("not a duration"), "{err}");
    ok(&home, &["budget", "set", r8, "--tokens", "2000000"]);

    let (code, _, err) = agency(&home, &["budget", "set", r8, "--tokens=-5"]);
    assert_ne!(code, 0);
    assert!(err.contains(&root.to_string()), "{err}");
    assert!(err.contains("negative"), "{err}");
    // The refused change changed nothing.
    let v: serde_json::Value =
        serde_json::from_str(&ok(&home, &["--json", "budget", "show"])).unwrap();
    assert_eq!(v["limits"]["tokens"], 2_000_000);
    let _ = daemon.kill();
    let _ = daemon.wait();
}

/// The root budget of `agency init`: the documented default, the limits
/// given, or none.
#[test]
fn init_sets_the_default_root_budget_or_the_one_given() {
    let tmp = tempfile::tempdir().unwrap();
    let limits_of = |dir: &str, args: &[&str]| {
        let home = Home::new(tmp.path().join(dir));
        let mut all = vec!["init"];
        all.extend_from_slice(args);
        ok(&home, &all);
        let svc = home.open_service().unwrap();
        svc.budget_show(Principal::User, None).unwrap().limits
    };
    assert_eq!(
        limits_of("default", &[]),
        Some(BudgetLimits {
            micro_usd: Some(25_000_000),
            spawns: Some(1000),
            handlers: Some(200),
            ..BudgetLimits::default()
        })
    );
    assert_eq!(
        limits_of("given", &["--usd", "5", "--tokens", "2000000"]),
        Some(BudgetLimits {
            micro_usd: Some(5_000_000),
            tokens: Some(2_000_000),
            ..BudgetLimits::default()
        })
    );
    assert_eq!(limits_of("none", &["--no-budget"]), None);
}
