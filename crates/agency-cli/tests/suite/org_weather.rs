//! Issue 12 item 8: seed 002's WeatherAgency, end to end. The seed's four
//! files (`examples/weather-agency`), with the WeatherTool's base URL
//! pointed at a local stand-in of the weather API and one line added to
//! WeatherTool.tool (`- Egress: HOST:PORT`, issue 28), are compiled and stood up by `agency up` on a real
//! daemon running the built-in runtime against the scripted model server.
//! An outside party asks "What is the weather in New York?" over TCP with
//! an agency key; the answer comes back through FrontDeskAgent →
//! WeatherAgent → WeatherTool → WeatherAgent → FrontDeskAgent.

#![allow(clippy::unwrap_used)]

use crate::agent_story;

use std::path::Path;
use std::time::Duration;

use agent_story::{BIN, Story, agency, json};
use serde_json::Value;

/// Three agent runs, told apart by the standing instructions in the
/// system prompt and by the subject waiting in the inbox (first message).
/// The same script plays `agency demo --org`.
const SCRIPT: &str = include_str!("../../src/demo_org_script.json");

/// The seed's files, copied; the tool's base URL replaced by `base_url`,
/// and, with `egress`, one line added to WeatherTool.tool: the egress it
/// needs (issue 28). Nothing else is changed.
fn weather_sources(into: &Path, base_url: &str, egress: bool) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/weather-agency");
    std::fs::create_dir_all(into).unwrap();
    for f in [
        "WeatherAgency.agency",
        "FrontDeskAgent.agent",
        "WeatherAgent.agent",
        "WeatherTool.tool",
    ] {
        let text = std::fs::read_to_string(from.join(f)).unwrap();
        let text = match f {
            "WeatherTool.tool" => {
                let seed = "- Base URL: https://api.example-weather.com";
                assert!(text.contains(seed));
                let hostport = base_url.trim_start_matches("http://");
                let line = if egress {
                    format!("\n- Egress: {hostport}")
                } else {
                    String::new()
                };
                text.replace(seed, &format!("- Base URL: {base_url}{line}"))
            }
            _ => text,
        };
        std::fs::write(into.join(f), text).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue28_the_seed_weather_agency_plus_one_egress_line_answers_builtin() {
    let script = agency_testkit::Script::from_json(SCRIPT).unwrap();
    let model = agency_testkit::ModelServer::start(script).await.unwrap();
    let cfg = format!(
        "[agents]\nruntime = \"builtin\"\nagency_program = {BIN:?}\n[agents.builtin]\napi = \"anthropic\"\nbase_url = {:?}\nmodel = \"scripted\"\nmax_turns = 20\n",
        model.base_url()
    );
    weather_agency_answers(&cfg, model, "WeatherTool").await;
}

/// The same story with the real Claude Code CLI: the organisation's tool
/// is offered as `mcp__agency__WeatherTool` and allowed without a prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue12_the_weather_agency_answers_through_its_agents_and_tool_claude_code() {
    let claude = agent_story::claude_bin();
    let script = agency_testkit::Script::from_json(SCRIPT).unwrap();
    let model = agency_testkit::ModelServer::start(script).await.unwrap();
    let cfg = format!(
        "[agents]\nruntime = \"claude-code\"\n[agents.claude_code]\nprogram = {claude:?}\nmodel = \"scripted\"\nmax_turns = 20\n[agents.claude_code.env]\nANTHROPIC_BASE_URL = {:?}\nANTHROPIC_API_KEY = \"test\"\nCLAUDE_CODE_MAX_RETRIES = \"1\"\n",
        model.base_url()
    );
    weather_agency_answers(&cfg, model, "mcp__agency__WeatherTool").await;
}

async fn weather_agency_answers(cfg: &str, model: agency_testkit::ModelServer, tool: &str) {
    let weather = agency_testkit::WeatherServer::start().await.unwrap();
    let story = Story::start(cfg, Duration::from_secs(120)).await;
    let src = story.tmp.path().join("weather-agency");
    let hostport = weather.base_url().trim_start_matches("http://").to_owned();

    // Issue 28: the seed as written (its base URL pointed at the stand-in)
    // holds no egress to it: the plan warns, suggesting the grant with its
    // port and the line that gives it.
    weather_sources(&src, &weather.base_url(), false);
    let plan = json(&story.home, &["up", src.to_str().unwrap(), "--plan"]);
    let warnings = plan["warnings"].to_string();
    assert!(
        warnings.contains("holds no egress")
            && warnings.contains(&format!("`- Egress: {hostport}`"))
            && warnings.contains(&format!("egress:{hostport}")),
        "{plan}"
    );
    // Plus the one line: WeatherAgent, which holds the tool, gets the
    // egress, and nothing is left to warn of.
    weather_sources(&src, &weather.base_url(), true);

    // The plan first: nothing exists yet, two agents would be created.
    let plan = json(&story.home, &["up", src.to_str().unwrap(), "--plan"]);
    assert_eq!(plan["plan_only"], true, "{plan}");
    assert_eq!(plan["warnings"], serde_json::json!([]), "{plan}");
    assert!(
        plan["capabilities"].as_array().unwrap().iter().any(|c| {
            c["holder"] == "WeatherAgent"
                && c["resource"] == format!("egress:{hostport}")
                && c["why"] == "tool egress"
        }),
        "{plan}"
    );
    let actions: Vec<&str> = plan["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["create", "create"], "{plan}");
    assert!(json(&story.home, &["orgs"]).as_array().unwrap().is_empty());
    let (code, out, err) = agency(&story.home, &["up", src.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");

    // An outside party, with a key of this agency, over TCP.
    let (code, key, err) = agency(&story.home, &["key", "mint", "--agency", "WeatherAgency"]);
    assert_eq!(code, 0, "{err}");
    let key = key.trim().to_owned();
    let status = json(&story.home, &["status"]);
    let url = format!(
        "http://{}/v1/agency/messages",
        status["addr"].as_str().unwrap()
    );
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    let posted: Value = http
        .post(&url)
        .bearer_auth(&key)
        .json(&serde_json::json!({
            "agency": "WeatherAgency",
            "message": "What is the weather in New York?",
            "wait_ms": 100_000
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        posted["status"],
        "answered",
        "{posted}\ndaemon log:\n{}",
        story.log()
    );
    assert_eq!(
        posted["reply"], "Hello! In New York it is 12.5 degrees and light rain.",
        "{posted}"
    );

    // The tool really called the (stand-in) weather API, once, with the
    // location as its query parameter.
    assert_eq!(weather.requests(), ["/current?location=New+York"]);
    // Two runs: the front desk (an executive, warm by default: WeatherAgent's
    // answer reaches it as new mail in the same conversation, issue 13 item
    // 6) and the weather agent; each system prompt carried its agent's
    // standing instructions.
    let requests = model.requests();
    assert!(requests.iter().all(|r| r.status == 200), "{requests:?}");
    let played: std::collections::BTreeSet<&str> = requests
        .iter()
        .filter_map(|r| r.scenario.as_deref())
        .collect();
    assert_eq!(
        played.into_iter().collect::<Vec<_>>(),
        [
            "front desk: pass the question to WeatherAgent",
            "weather agent: use WeatherTool and answer the boss"
        ],
        "{requests:?}"
    );
    assert!(
        requests.iter().all(|r| r.scenario.is_some()),
        "every request matched its agent's standing instructions: {requests:?}"
    );
    // Only the agent holding tool:WeatherTool is offered the tool.
    for r in &requests {
        let weather_agent = r.scenario.as_deref().unwrap().starts_with("weather agent");
        assert_eq!(r.tools.iter().any(|t| t == tool), weather_agent, "{r:?}");
    }

    // The message, read again by its id, stays answered.
    let again: Value = http
        .get(format!("{url}/{}", posted["id"].as_str().unwrap()))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(again["reply"], posted["reply"]);

    // Applying the same folder again changes nothing.
    let plan = json(&story.home, &["up", src.to_str().unwrap(), "--plan"]);
    assert!(
        plan["agents"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["action"] == "unchanged"),
        "{plan}"
    );
    story.stop();
    model.shutdown().await;
}
