//! The Gatekeeper judges with facts the engine computed, against a real
//! daemon (`agency serve`, the sandbox on) and the scripted model server:
//! AgencyCore runs with `--level 1 --live`, a command the Implementor
//! proposes fails for real, and the Gatekeeper's scripted answer gives
//! full marks and promotes the run. The failed command reaches the
//! Gatekeeper as a fact (in its prompt's facts, not only in ToolRunner's
//! artifact), Correctness is capped below the pass mark whatever the
//! model said, promotion is refused, and the run joins its pipeline's
//! history without ever being recalled as an example to follow.

use agency_testkit::{ModelServer, Script};
use serde_json::{Value, json};

use crate::home::TestHome;
use crate::pipeline_run::{REQUEST, pending, run_waiting, script_with, stage, wait_run};

/// A command that runs and fails (`ls` of a file that is not there).
const FAILING: &str = "ls no-such-file-3f9";

/// The Implementor proposes a probe and the failing command; the
/// Gatekeeper gives full marks, approves and promotes.
fn script() -> Script {
    let implementor = |a: &mut Value| {
        a["actions"] = json!([
            {"type": "runCommand", "description": "probe", "command": "touch probe"},
            {"type": "runCommand", "description": "check the build", "command": FAILING},
        ]);
        a["commandsRun"] = json!(["touch probe", FAILING]);
    };
    let gatekeeper = |a: &mut Value| {
        a["scorecard"] =
            json!({"correctness": 5, "verification": 5, "safety": 5, "clarity": 5, "autonomy": 5});
        a["totalScore"] = json!(25);
        a["decision"] = json!({"approved": true, "promoteToPortfolio": true, "reason": "flawless"});
        // The model's own claim of what was capped is not kept.
        a["capped"] = json!([]);
    };
    script_with(&[("Implementor", &implementor), ("Gatekeeper", &gatekeeper)])
}

/// Stage `name`'s artifact; the stage ended ok.
fn artifact(home: &TestHome, run: &Value, name: &str) -> Value {
    assert_eq!(stage(run, name)["status"], "ok", "{run}");
    crate::pipeline_run::artifact(home, run, name)
}

/// The facts placed in a Gatekeeper prompt: the JSON object after the
/// line that introduces them.
fn facts_in_prompt(body: &str) -> Value {
    let req: Value = serde_json::from_str(body).unwrap();
    let prompt = match &req["messages"][0]["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<String>(),
        other => panic!("no prompt in {other}"),
    };
    let start = prompt
        .find("not claims to weigh:")
        .unwrap_or_else(|| panic!("no facts in the prompt: {prompt}"));
    let rest = &prompt[start..];
    let open = rest.find('{').unwrap();
    let mut de = serde_json::Deserializer::from_str(&rest[open..]).into_iter::<Value>();
    de.next().unwrap().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gatekeeper_giving_full_marks_while_a_command_failed_cannot_pass_correctness() {
    let home = TestHome::new();
    let model = ModelServer::start(script()).await.unwrap();
    home.init_with(&format!(
        "[models.default]\napi = \"anthropic\"\nbase_url = {:?}\nmodel = \"test-model\"\ndefault_price = {{ input = 1.0, output = 2.0 }}\n",
        model.base_url()
    ));
    let daemon = home.serve();
    let started = home.json(&[
        "pipeline",
        "run",
        "agencycore",
        REQUEST,
        "--level",
        "1",
        "--live",
    ]);
    let id = started["id"].as_str().unwrap().to_owned();
    // A grader giving full marks moves the shipped anchors' scores (a
    // failed test and a blocked plan among them): before it judges, the
    // change waits for the user in "needs you".
    let waiting = wait_run(&home, &id, |v| v["status"] != "running").await;
    assert_eq!(waiting["status"], "waiting", "{waiting}\n{}", home.log());
    let judge = pending(&home, "pipeline:judge");
    assert_eq!(judge.len(), 1, "{judge:?}");
    let why = judge[0]["args"].to_string();
    assert!(
        why.contains("default/test-model") && why.contains("moved"),
        "{why}"
    );
    home.ok(&["approve", &judge[0]["id"].to_string()]);
    let run = wait_run(&home, &id, |v| {
        v["status"] != "running" && v["status"] != "waiting"
    })
    .await;
    assert_eq!(run["status"], "done", "{run}\n{}", home.log());

    // The command ran for real and failed.
    let tools = artifact(&home, &run, "ToolRunner");
    let failed = &tools["executedCommands"][1];
    assert_eq!(
        (
            failed["command"].as_str(),
            failed["success"].as_bool(),
            failed["mockMode"].as_bool()
        ),
        (Some(FAILING), Some(false), Some(false)),
        "{tools}"
    );

    // The Gatekeeper was given the failure as a fact.
    let asked: Vec<_> = model
        .requests()
        .into_iter()
        .filter(|r| r.scenario.as_deref() == Some("AgencyCore Gatekeeper"))
        .collect();
    // Three anchors, then the run itself.
    assert_eq!(asked.len(), 4);
    let given = facts_in_prompt(&asked[3].body);
    assert_eq!(given["commands"]["live"], json!(true), "{given}");
    assert_eq!(
        given["commands"]["failed"][0]["command"],
        json!(FAILING),
        "{given}"
    );
    assert_eq!(given["artifactsValid"], json!(true), "{given}");

    // It answered 5 and 25; the stored scorecard is capped, promotion
    // refused, and what changed (and why) recorded beside the facts.
    let gk = artifact(&home, &run, "Gatekeeper");
    let correctness = gk["scorecard"]["correctness"].as_i64().unwrap();
    assert!(
        correctness < agency_service::pipelines::judge::PASS_AT,
        "{gk}"
    );
    assert_eq!(gk["totalScore"], json!(20 + correctness), "{gk}");
    assert_eq!(gk["decision"]["promoteToPortfolio"], json!(false), "{gk}");
    assert_eq!(gk["decision"]["approved"], json!(false), "{gk}");
    let capped = gk["capped"].as_array().unwrap();
    let c = capped
        .iter()
        .find(|c| c["field"] == "scorecard.correctness")
        .unwrap_or_else(|| panic!("correctness not capped: {gk}"));
    assert_eq!(c["from"], json!(5), "{gk}");
    assert!(c["why"].as_str().unwrap().contains(FAILING), "{gk}");
    assert_eq!(gk["facts"], given, "the facts stored are the ones given");
    // The rubric and the grader are stored with the scorecard.
    assert!(
        gk["rubric"].as_str().unwrap().starts_with("Gatekeeper@"),
        "{gk}"
    );
    assert_eq!(gk["grader"], json!("default/test-model"), "{gk}");

    // The learning loop reads the same judgement.
    let judged =
        agency_service::pipelines::judge::judged(&[("Gatekeeper".into(), gk.clone())]).unwrap();
    assert!(!judged.correctness_pass && !judged.passed(), "{judged:?}");
    assert_eq!(judged.rubric, gk["rubric"].as_str().unwrap());
    assert_eq!(judged.grader, "default/test-model");

    // A like run (mock mode) finds it in the history, but its Retriever
    // never recalls it as an example: it was not promoted.
    let (code, again, err) = run_waiting(&home, "agencycore", REQUEST).await;
    assert_eq!(code, 0, "{err}\n{again}");
    let patterns = artifact(&home, &again, "PatternObserver");
    assert_eq!(patterns["similarPastTasks"], json!([id]), "{patterns}");
    let recalled = artifact(&home, &again, "Retriever");
    assert_eq!(recalled["examples"], json!([]), "{recalled}");
    // That run passed (nothing failed in mock mode): the full marks stand.
    let second = artifact(&home, &again, "Gatekeeper");
    assert_eq!(second["totalScore"], json!(25), "{second}");
    assert_eq!(second["capped"], json!([]), "{second}");
    daemon.terminate();
}
