//! Issue 28, how an organisation's files are wired into a real daemon by
//! `agency up`: an `.agency`'s `## Connections` reach the compiled model
//! and the mail capabilities (and `up --plan` shows the change), `up
//! --plan` refuses what `up` refuses, and a retired organisation releases
//! its tool names.

#![allow(clippy::unwrap_used)]

use crate::home;

use std::path::Path;

use home::TestHome;
use serde_json::Value;

/// Desk: Boss is the executive of Alice and Bob; `extra` is appended to
/// the `.agency` file.
fn desk(dir: &Path, extra: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("Desk.agency"),
        format!(
            "# Agency Name: Desk\nAnswers questions.\n\n## Executive Agent\nThe executive agent is Boss.\n\n## Agents\n- Alice (research)\n- Bob (writing)\n{extra}"
        ),
    )
    .unwrap();
    for name in ["Boss", "Alice", "Bob"] {
        std::fs::write(
            dir.join(format!("{name}.agent")),
            format!("# Agent Name: {name}\n\n## Static Memory\nYou are {name}.\n"),
        )
        .unwrap();
    }
}

/// The handler of `agent` in the applied organisation `org`.
fn handler_of(home: &TestHome, org: &str, agent: &str) -> String {
    let orgs = home.json(&["orgs"]);
    let o = orgs
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == org)
        .unwrap_or_else(|| panic!("no organisation {org}: {orgs}"));
    o["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["agent"] == agent)
        .unwrap_or_else(|| panic!("no agent {agent}: {o}"))["handler"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Whether `holder` holds a live mail capability to `target` (write).
fn mails(home: &TestHome, holder: &str, target: &str) -> bool {
    let caps = home.json(&["caps", holder]);
    caps.as_array().unwrap().iter().any(|c| {
        c["resource"]["kind"] == "mail"
            && c["resource"].to_string().contains(target)
            && c["level"] == "write"
    })
}

/// The plan's capability changes as `(sign, holder, resource, why)`.
fn cap_changes(plan: &Value) -> Vec<(String, String, String, String)> {
    plan["capabilities"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["change"].as_str().unwrap().to_owned(),
                c["holder"].as_str().unwrap().to_owned(),
                c["resource"].as_str().unwrap().to_owned(),
                c["why"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Issue 28: `## Connections` in a `.agency` compiled, had its names
/// checked, and reached nobody: every agent ended with `"connections":
/// []`, and `up --plan` called the changed folder "up to date". Now the
/// connection is Alice's (and Bob's) in the model, the plan adds the mail
/// capabilities both ways, `up` grants them, and removing the line takes
/// them away again.
#[test]
fn issue28_agency_connections_reach_the_model_and_the_mail_capabilities() {
    let home = TestHome::new();
    home.init_with("");
    let _daemon = home.serve();
    let src = home.tmp.path().join("desk");
    desk(&src, "");
    let path = src.to_str().unwrap();
    home.ok(&["up", path]);
    let (alice, bob) = (
        handler_of(&home, "Desk", "Alice"),
        handler_of(&home, "Desk", "Bob"),
    );
    assert!(!mails(&home, &alice, &bob), "no connection yet");

    desk(&src, "\n## Connections\n- Alice -> Bob\n");
    // The compiled model carries it.
    let model: Value = serde_json::from_str(&home.ok(&["compile", path])).unwrap();
    let agents = model["agents"].as_array().unwrap();
    let conns = |n: &str| agents.iter().find(|a| a["name"] == n).unwrap()["connections"].clone();
    assert_eq!(conns("Alice"), serde_json::json!(["Bob"]), "{model}");
    // Bob may answer back through the capabilities, but the model lists
    // the connection once, where it was written.
    assert_eq!(conns("Bob"), serde_json::json!([]), "{model}");

    // The plan shows the change: Alice's definition, and mail both ways.
    let plan = home.json(&["up", path, "--plan"]);
    assert_eq!(plan["changed"], true, "{plan}");
    let alice_row = plan["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["agent"] == "Alice")
        .unwrap()
        .clone();
    assert_eq!(alice_row["action"], "update", "{plan}");
    assert!(
        alice_row["fields"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f == "connections"),
        "{plan}"
    );
    let changes = cap_changes(&plan);
    for (holder, res) in [("Alice", "mail:@Bob"), ("Bob", "mail:@Alice")] {
        assert!(
            changes.contains(&(
                "added".into(),
                holder.into(),
                res.into(),
                "connection".into()
            )),
            "{holder} {res}: {changes:?}"
        );
    }
    let text = home.ok(&["up", path, "--plan"]);
    assert!(
        text.contains("would change") && text.contains("connection"),
        "{text}"
    );
    assert!(!mails(&home, &alice, &bob), "--plan wrote nothing");

    // Applied: the capabilities exist, both ways.
    home.ok(&["up", path]);
    assert!(mails(&home, &alice, &bob));
    assert!(mails(&home, &bob, &alice));
    let again = home.ok(&["up", path]);
    assert!(again.contains("up to date"), "{again}");

    // Removing the line removes them.
    desk(&src, "");
    let plan = home.json(&["up", path, "--plan"]);
    let changes = cap_changes(&plan);
    assert!(
        changes
            .iter()
            .any(|(c, h, r, _)| c == "removed" && h == "Alice" && r == "mail:@Bob"),
        "{changes:?}"
    );
    home.ok(&["up", path]);
    assert!(!mails(&home, &alice, &bob));

    // An agency-level connection to the agent itself is refused by the
    // compiler, naming the line.
    desk(&src, "\n## Connections\n- Alice -> Alice\n");
    let r = home.run(&["up", path]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains("Desk.agency:") && r.stderr.contains("connects an agent to itself"),
        "{r:?}"
    );
}

/// An organisation `name` in `dir` whose one agent holds tool `Counter`.
fn counting(dir: &Path, name: &str) {
    std::fs::create_dir_all(dir).unwrap();
    let agent = format!("{name}Agent");
    std::fs::write(
        dir.join(format!("{name}.agency")),
        format!("# Agency Name: {name}\nCounts.\n\n## Executive Agent\nThe executive agent is {agent}.\n\n## Tools\n- Counter\n"),
    )
    .unwrap();
    std::fs::write(
        dir.join(format!("{agent}.agent")),
        format!("# Agent Name: {agent}\n\n## Tools\n- Counter\n"),
    )
    .unwrap();
    std::fs::write(
        dir.join("Counter.tool"),
        "---\ntype: command\ncommand: [\"cat\"]\ninput: {n: integer}\noutput: {n: integer}\n---\n# Tool Name: Counter\nCounts.\n",
    )
    .unwrap();
}

/// Issue 28: `up --plan` passed an organisation whose tool name another
/// organisation already defines, and `up` then refused it; and an
/// organisation taken down kept its tool names, so that no other could
/// use them. Now the plan refuses it as `up` does, naming both, and
/// `agency down` releases the names (the organisation taken down gets
/// them back only if nobody took them meanwhile).
#[test]
fn issue28_up_plan_refuses_a_tool_clash_and_down_releases_the_names() {
    let home = TestHome::new();
    home.init_with("");
    let _daemon = home.serve();
    let (a, b) = (home.tmp.path().join("a"), home.tmp.path().join("b"));
    counting(&a, "Alpha");
    counting(&b, "Beta");
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    home.ok(&["up", a]);

    for args in [vec!["up", b, "--plan"], vec!["up", b]] {
        let r = home.run(&args);
        assert_eq!(r.code, 1, "{args:?}: {r:?}");
        assert!(
            r.stderr
                .contains("failed to install tool Counter of organisation Beta")
                && r.stderr.contains("organisation Alpha already defines"),
            "{args:?}: {r:?}"
        );
    }
    assert_eq!(home.json(&["orgs"]).as_array().unwrap().len(), 1);

    // Alpha taken down releases Counter: Beta's plan and apply pass.
    home.ok(&["down", "Alpha"]);
    let plan = home.json(&["up", b, "--plan"]);
    assert_eq!(plan["changed"], true, "{plan}");
    let applied = home.json(&["up", b]);
    assert_eq!(applied["changed"], true, "{applied}");
    // Beta's agent may call its Counter now.
    let beta = home.json(&["orgs"]);
    let beta_agent = beta
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == "Beta")
        .unwrap()["agents"][0]["handler"]
        .as_str()
        .unwrap()
        .to_owned();
    let caps = home.json(&["caps", &beta_agent]);
    assert!(
        caps.to_string().contains("Counter"),
        "Beta's agent holds tool:Counter: {caps}"
    );
    // Alpha cannot come back with the name Beta now holds.
    let r = home.run(&["up", a]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains("organisation Beta already defines"),
        "{r:?}"
    );
    // Once Beta is down too, Alpha comes back with its tool.
    home.ok(&["down", "Beta"]);
    let back = home.json(&["up", a]);
    assert_eq!(back["changed"], true, "{back}");
}
