//! Issue 12 item 5 from the command line against a real `agency serve`:
//! `agency up model.json --plan` writes nothing, `agency up model.json`
//! stands seed 002's WeatherAgency up under the root handler, `agency
//! orgs` lists it with its handlers, applying it again changes nothing,
//! a model that fails its checks is refused, `agency down` retires it
//! and `agency up` brings it back with the same handlers.

#![allow(clippy::unwrap_used)]

use crate::home;

use home::TestHome;
use serde_json::{Value, json};

fn weather() -> Value {
    let agent = |name: &str, title: &str, tools: &[&str]| {
        json!({"name": name, "title": title, "tools": tools,
               "staticMemory": [format!("You are {name}.")],
               "source": {"file": format!("{name}.agent"), "line": 1}})
    };
    json!({
        "name": "WeatherAgency", "type": "Agency",
        "description": "Provide weather updates to users and greet them politely.",
        "executiveAgent": "FrontDeskAgent",
        "agents": [agent("FrontDeskAgent", "Front Desk", &[]),
                   agent("WeatherAgent", "Weather Assistant", &["WeatherTool"])],
        "tools": [{
            "name": "WeatherTool", "description": "Calls an external weather API.",
            "implementation": {"type": "http", "baseUrl": "https://api.example-weather.com",
                               "endpoint": "/current", "method": "GET", "query": ["location"]},
            "interface": {"inputFormat": {"location": "string"}, "outputFormat": {"temp": "number"},
                          "inputSchema": {"type": "object"}, "outputSchema": {"type": "object"}},
            "source": {"file": "WeatherTool.tool", "line": 1}
        }],
        "source": {"file": "WeatherAgency.agency", "line": 1}
    })
}

#[test]
fn issue12_item5_the_user_stands_an_organisation_up_and_down() {
    let home = TestHome::new();
    home.init_with("");
    let _daemon = home.serve();
    let root = home.root();
    let file = home.tmp.path().join("model.json");
    std::fs::write(&file, weather().to_string()).unwrap();
    let path = file.to_str().unwrap();

    let out = home.ok(&["up", path, "--plan"]);
    assert!(out.contains("would change (nothing written"), "{out}");
    assert!(
        out.contains("FrontDeskAgent") && out.contains("create"),
        "{out}"
    );
    assert!(out.contains("tool:WeatherTool"), "{out}");
    assert_eq!(home.json(&["orgs"]), json!([]));

    let applied = home.json(&["up", path]);
    assert_eq!(applied["changed"], true, "{applied}");
    let exec = applied["executive"].as_str().unwrap().to_owned();
    let orgs = home.json(&["orgs"]);
    assert_eq!(orgs[0]["name"], "WeatherAgency", "{orgs}");
    assert_eq!(orgs[0]["executive"], exec.as_str());
    assert_eq!(orgs[0]["agents"].as_array().unwrap().len(), 2);
    let front = home.json(&["handlers"]);
    let front = front
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["id"] == exec.as_str())
        .unwrap()
        .clone();
    assert_eq!(front["boss"], root.as_str(), "{front}");
    assert_eq!(front["title"], "WeatherAgency: FrontDeskAgent (Front Desk)");
    let text = home.ok(&["orgs"]);
    assert!(
        text.contains("WeatherAgency (up)") && text.contains("Weather Assistant"),
        "{text}"
    );

    let again = home.ok(&["up", path]);
    assert!(again.contains("up to date, nothing to change"), "{again}");

    // A model that fails its checks is refused and changes nothing.
    let mut bad = weather();
    bad["agents"][1]["capabilities"] = json!(["disk:/etc"]);
    let bad_file = home.tmp.path().join("bad.json");
    std::fs::write(&bad_file, bad.to_string()).unwrap();
    let r = home.run(&["up", bad_file.to_str().unwrap()]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        r.stderr.contains("nothing was changed") && r.stderr.contains("disk"),
        "{r:?}"
    );
    // A folder that does not compile changes nothing, and its errors are
    // printed compiler-style.
    let broken = home.tmp.path().join("broken");
    std::fs::create_dir(&broken).unwrap();
    std::fs::write(
        broken.join("Broken.agency"),
        "# Agency Name: Broken\n\n## Executive Agent\nThe executive agent is Nobody.\n",
    )
    .unwrap();
    let r = home.run(&["up", broken.to_str().unwrap()]);
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("Broken.agency:") && r.stderr.contains("nothing was changed"),
        "{r:?}"
    );
    assert_eq!(home.json(&["orgs"]), orgs);

    let down = home.ok(&["down", "WeatherAgency"]);
    assert!(
        down.contains("organisation WeatherAgency is down: 2 handlers retired"),
        "{down}"
    );
    assert!(home.ok(&["orgs"]).contains("WeatherAgency (down)"));
    let r = home.run(&["down", "WeatherAgency"]);
    assert_eq!(r.code, 1);

    let back = home.json(&["up", path]);
    assert_eq!(
        back["executive"],
        exec.as_str(),
        "the same handlers come back"
    );
    assert!(
        back["agents"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["action"] == "reactivate"),
        "{back}"
    );
}
