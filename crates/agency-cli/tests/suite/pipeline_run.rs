//! Issue 31: pipeline runs against a real daemon (`agency serve`) and the
//! scripted model server: AgencyCore end to end with every artifact
//! checked against the seed's schemas, the retry ladder's counts, 503s
//! that never reach a prompt, SafetyGuard blocking `rm -rf /`, ToolRunner
//! in mock mode running nothing, and a daemon restart mid-run that resumes
//! at the stage it was in.

use std::time::{Duration, Instant};

use agency_testkit::{ModelServer, RecordedRequest, Script};
use serde_json::{Value, json};

use crate::home::TestHome;

pub(crate) const SCRIPT: &str = include_str!("../../src/demo_pipeline_script.json");
pub(crate) const REQUEST: &str = "Add a /health endpoint to our web API";

/// A change to one stage's scripted answer.
pub(crate) type Edit<'a> = (&'a str, &'a dyn Fn(&mut Value));

/// The demo's script with `edit` applied to stage `stage`'s answer.
pub(crate) fn script_with(edits: &[Edit<'_>]) -> Script {
    let mut doc: Value = serde_json::from_str(SCRIPT).unwrap();
    for (stage, edit) in edits {
        let scenario = doc["scenarios"]
            .as_array_mut()
            .unwrap()
            .iter_mut()
            .find(|s| s["name"] == format!("AgencyCore {stage}"))
            .unwrap();
        let text = scenario["turns"][0]["text"].as_str().unwrap().to_owned();
        let mut answer: Value = serde_json::from_str(&text).unwrap();
        edit(&mut answer);
        scenario["turns"][0]["text"] = json!(answer.to_string());
    }
    Script::from_json(&doc.to_string()).unwrap()
}

pub(crate) fn config(model: &ModelServer) -> String {
    format!(
        "[models.default]\napi = \"anthropic\"\nbase_url = {:?}\nmodel = \"test-model\"\ndefault_price = {{ input = 1.0, output = 2.0 }}\n",
        model.base_url()
    )
}

/// `agency pipeline run … --wait --json` in a blocking thread.
pub(crate) async fn run_waiting(
    home: &TestHome,
    pipeline: &str,
    input: &str,
) -> (i32, Value, String) {
    let args: Vec<String> = ["--json", "pipeline", "run", pipeline, input, "--wait"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    let dir = home.dir.clone();
    let out = tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        crate::agent_story::agency(&dir, &refs)
    })
    .await
    .unwrap();
    let v = serde_json::from_str(&out.1).unwrap_or(Value::Null);
    (out.0, v, out.2)
}

pub(crate) fn stage<'a>(run: &'a Value, name: &str) -> &'a Value {
    run["stages_detail"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no stage {name} in {run}"))
}

pub(crate) fn artifact(home: &TestHome, run: &Value, name: &str) -> Value {
    let file = stage(run, name)["artifact"].as_str().unwrap().to_owned();
    let v = home.json(&["kb", "cat", &file]);
    serde_json::from_str(v["text"].as_str().unwrap()).unwrap()
}

fn requests_of(model: &ModelServer, stage: &str) -> Vec<RecordedRequest> {
    let name = format!("AgencyCore {stage}");
    model
        .requests()
        .into_iter()
        .filter(|r| r.scenario.as_deref() == Some(name.as_str()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue31_agencycore_runs_end_to_end_and_every_artifact_is_the_seeds() {
    let probe_dir = tempfile::tempdir().unwrap();
    let probe = probe_dir.path().join("probe");
    let probe_cmd = format!("touch {}", probe.display());
    let set_probe = move |a: &mut Value| {
        a["actions"][1]["command"] = json!(probe_cmd.clone());
        a["commandsRun"] = json!([probe_cmd.clone()]);
    };
    let model = ModelServer::start(script_with(&[("Implementor", &set_probe)]))
        .await
        .unwrap();
    let home = TestHome::new();
    home.init_with(&config(&model));
    let daemon = home.serve();
    let (code, run, err) = run_waiting(&home, "agencycore", REQUEST).await;
    assert_eq!(code, 0, "{err}\n{run}\n{}", home.log());
    assert_eq!(run["status"], "done");

    let seed = agency_org::pipeline::agencycore().unwrap();
    assert_eq!(run["stages_detail"].as_array().unwrap().len(), 11);
    for spec in &seed.stages {
        let s = stage(&run, &spec.name);
        assert_eq!(s["status"], "ok", "{}: {s}", spec.name);
        let a = artifact(&home, &run, &spec.name);
        let v = agency_org::pipeline::schemas::validator(&spec.output_schema).unwrap();
        let errors: Vec<String> = v.iter_errors(&a).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{}: {errors:?}\n{a}", spec.name);
        // Stamped by the engine, not taken from the answer.
        assert_eq!(a["agent"], json!(spec.name));
        assert!(a["timestamp"].as_str().unwrap().ends_with('Z'), "{a}");
    }
    // The Learner's answer claimed level 3; the run's level (0) stands.
    assert_eq!(artifact(&home, &run, "Learner")["currentLevel"], json!(0));
    // ToolRunner in mock mode recorded the command and ran nothing.
    let tools = artifact(&home, &run, "ToolRunner");
    assert_eq!(tools["executedCommands"][0]["mockMode"], json!(true));
    assert!(!probe.exists(), "mock mode ran {}", probe.display());
    // One model call per llm stage, each metered; and, the pipeline's
    // Gatekeeper grading for the first time, one per shipped anchor.
    assert_eq!(model.requests().len(), 8 + 3);
    assert!(stage(&run, "Observer")["input_tokens"].as_i64().unwrap() > 0);
    assert!(
        stage(&run, "Observer")["cost_micro_usd"].as_i64().unwrap() > 0,
        "{}\n{}",
        home.json(&["cost"]),
        home.json(&["agents"])
    );

    // The run is an outcome; each stage a completed child outcome.
    let id = run["id"].as_str().unwrap();
    let shown = home.ok(&["pipeline", "show", &id[..8]]);
    assert!(
        shown.contains("Gatekeeper") && shown.contains("done"),
        "{shown}"
    );
    let runs = home.json(&["pipeline", "runs"]);
    assert_eq!(runs[0]["id"], json!(id));
    let outcome = home.json(&[
        "outcome",
        "show",
        stage(&run, "Planner")["outcome"].as_str().unwrap(),
    ]);
    assert_eq!(outcome["outcome"]["status"], "completed", "{outcome}");
    assert_eq!(outcome["parents"][0]["id"], json!(id), "{outcome}");
    // The Planner's tasks are outcomes under its stage ("Health test"
    // depends on "Health route": the route is a child of the test), and,
    // the run done with ToolRunner in mock mode, closed as not executed.
    let task = |title: &str| {
        let t = outcome["children"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["title"] == json!(title))
            .unwrap_or_else(|| panic!("no task {title:?} in {outcome}"));
        home.json(&["outcome", "show", t["id"].as_str().unwrap()])
    };
    assert_eq!(
        outcome["children"].as_array().unwrap().len(),
        2,
        "{outcome}"
    );
    let (route, test) = (task("Health route"), task("Health test"));
    assert_eq!(test["children"][0]["id"], route["outcome"]["id"], "{test}");
    assert_eq!(test["children"].as_array().unwrap().len(), 1, "{test}");
    assert_eq!(route["children"], json!([]), "{route}");
    for t in [&route, &test] {
        assert_eq!(t["outcome"]["status"], "closed", "{t}");
        let why = t["outcome"]["status_reason"].as_str().unwrap_or_default();
        assert!(
            why.contains("ToolRunner ran in mock mode, so nothing was executed"),
            "{why}"
        );
    }
    let description = test["outcome"]["description"].as_str().unwrap_or_default();
    assert!(
        description.contains("**owner**: qa") && description.contains("- cargo test passes"),
        "{description}"
    );

    // The done run joined the portfolio: a second run on a like request
    // is shown it, its PatternObserver's similar tasks are it (the answer
    // said none), and its Retriever recalls it (scored 21 of 25).
    let (code, again, err) = run_waiting(&home, "agencycore", REQUEST).await;
    assert_eq!(code, 0, "{err}\n{again}");
    let patterns = artifact(&home, &again, "PatternObserver");
    assert_eq!(patterns["similarPastTasks"], json!([id]), "{patterns}");
    let recalled = artifact(&home, &again, "Retriever");
    let example = recalled["examples"][0].as_str().unwrap_or_default();
    assert!(
        example.contains(id) && example.contains("score 21/25"),
        "{recalled}"
    );
    let asked = model
        .requests()
        .into_iter()
        .rfind(|r| r.body.contains("You are the PatternObserver"))
        .expect("PatternObserver was asked again");
    assert!(asked.body.contains(id), "the prompt shows the earlier run");
    daemon.terminate();
}

const TWO_STAGES: &str = r#"---
pipeline: two
description: an always-invalid first stage
stages:
  - name: Observer
    kind: llm
    system: You are the Observer of a test.
    reads: [input]
    output:
      type: object
      additionalProperties: false
      required: [keywords]
      properties:
        keywords: {type: array, items: {type: string}, minItems: 1}
    retry: {repair_attempts: 2}
  - name: Planner
    kind: llm
    system: You are the Planner of a test.
    reads: [Observer]
    output:
      type: object
      required: [tasks]
      properties:
        tasks: {type: array, items: {type: string}}
---

## Observer

Request: {{input}}

## Planner

Keywords: {{Observer.keywords}}
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue31_an_always_invalid_stage_makes_one_plus_repair_attempts_calls_and_stops() {
    let script = Script::from_json(
        &json!({"scenarios": [{
            "name": "observer",
            "match": {"system_contains": "You are the Observer of a test"},
            "turns": [{"text": "{\"keywords\": [\"a\"], \"extraneousField\": 1}"}],
            "after_last": {"text": "{\"keywords\": []}"}
        }, {
            "name": "planner",
            "match": {"system_contains": "You are the Planner of a test"},
            "turns": [{"text": "{\"tasks\": [\"t\"]}"}]
        }]})
        .to_string(),
    )
    .unwrap();
    let model = ModelServer::start(script).await.unwrap();
    let home = TestHome::new();
    home.init_with(&config(&model));
    let file = home.tmp.path().join("two.pipeline");
    std::fs::write(&file, TWO_STAGES).unwrap();
    let daemon = home.serve();
    let (code, run, err) = run_waiting(&home, file.to_str().unwrap(), "hello").await;
    assert_eq!(code, 1, "{err}\n{run}");
    assert_eq!(run["status"], "failed");
    let s = stage(&run, "Observer");
    assert_eq!(s["status"], "failed_validation");
    assert_eq!(s["attempts"], 3, "1 + repair_attempts billed calls: {s}");
    assert!(s.get("artifact").is_none(), "{s}");
    assert_eq!(stage(&run, "Planner")["status"], "pending");
    let reqs = model.requests();
    assert_eq!(reqs.len(), 3, "the next stage never asked the model");
    // The first re-ask carries the first answer's issue; the second re-ask
    // carries only the second answer's, not the first's.
    assert!(reqs[1].body.contains("extraneousField"), "{}", reqs[1].body);
    assert!(
        !reqs[2].body.contains("extraneousField"),
        "{}",
        reqs[2].body
    );
    assert!(reqs[2].body.contains("minItems"), "{}", reqs[2].body);
    daemon.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue31_503s_back_off_without_a_repair_attempt_and_never_reach_a_prompt() {
    let mut doc: Value = serde_json::from_str(SCRIPT).unwrap();
    let observer = &mut doc["scenarios"][0];
    assert_eq!(observer["name"], "AgencyCore Observer");
    let answer = observer["turns"][0].clone();
    observer["turns"] = json!([
        {"error": {"status": 503, "message": "upstream overloaded xyzzy", "times": 2}},
        answer
    ]);
    let model = ModelServer::start(Script::from_json(&doc.to_string()).unwrap())
        .await
        .unwrap();
    let home = TestHome::new();
    home.init_with(&config(&model));
    let daemon = home.serve();
    let (code, run, err) = run_waiting(&home, "agencycore", REQUEST).await;
    assert_eq!(code, 0, "{err}\n{run}");
    let s = stage(&run, "Observer");
    assert_eq!(s["status"], "ok", "transport failures are not repairs: {s}");
    assert_eq!(s["attempts"], 3, "{s}");
    let observer = requests_of(&model, "Observer");
    assert_eq!(
        observer.iter().map(|r| r.status).collect::<Vec<_>>(),
        [503, 503, 200]
    );
    // (A bare "503" may be in a stamped timestamp's nanoseconds.)
    for r in model.requests() {
        assert!(
            !r.body.contains("xyzzy") && !r.body.contains("overloaded") && !r.body.contains("503 "),
            "{}",
            r.body
        );
    }
    daemon.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue31_safety_guard_blocks_a_plan_with_rm_rf_and_nothing_after_runs() {
    let destructive = |a: &mut Value| {
        a["tasks"][0]["steps"] = json!(["clean the disk with rm -rf /", "register the route"]);
    };
    let model = ModelServer::start(script_with(&[("Planner", &destructive)]))
        .await
        .unwrap();
    let home = TestHome::new();
    home.init_with(&config(&model));
    let daemon = home.serve();
    let (code, run, err) = run_waiting(&home, "agencycore", REQUEST).await;
    assert_eq!(code, 1, "{err}\n{run}");
    assert_eq!(run["status"], "failed");
    let s = stage(&run, "SafetyGuard");
    assert_eq!(s["status"], "blocked_policy", "{s}");
    assert!(s.get("artifact").is_none());
    for later in ["Implementor", "ToolRunner", "Gatekeeper", "Learner"] {
        assert_eq!(stage(&run, later)["status"], "pending", "{later}");
    }
    assert!(requests_of(&model, "Implementor").is_empty());
    daemon.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue31_a_daemon_restart_mid_run_resumes_at_the_stage_it_was_in() {
    // PatternObserver's upstream is down for a while: the run sits in its
    // backoff when the daemon stops.
    let mut doc: Value = serde_json::from_str(SCRIPT).unwrap();
    let po = &mut doc["scenarios"][1];
    assert_eq!(po["name"], "AgencyCore PatternObserver");
    let answer = po["turns"][0].clone();
    po["turns"] = json!([{"error": {"status": 503, "message": "down", "times": 3}}, answer]);
    let model = ModelServer::start(Script::from_json(&doc.to_string()).unwrap())
        .await
        .unwrap();
    let home = TestHome::new();
    home.init_with(&config(&model));
    let daemon = home.serve();
    let started = home.json(&["pipeline", "run", "agencycore", REQUEST]);
    let id = started["id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(60);
    while requests_of(&model, "PatternObserver").is_empty() {
        assert!(Instant::now() < deadline, "PatternObserver never asked");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    daemon.terminate();
    let daemon = home.serve();
    let deadline = Instant::now() + Duration::from_secs(90);
    let run = loop {
        let v = home.json(&["pipeline", "show", &id]);
        if v["status"] != "running" {
            break v;
        }
        assert!(Instant::now() < deadline, "the run did not finish: {v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(run["status"], "done", "{run}\n{}", home.log());
    // Observer finished before the stop and was not asked again.
    assert_eq!(requests_of(&model, "Observer").len(), 1);
    assert_eq!(stage(&run, "Observer")["attempts"], 1);
    assert_eq!(requests_of(&model, "Learner").len(), 1);
    daemon.terminate();
}

/// Poll `agency pipeline show` until `done(run)`.
/// The user's pending approval requests for `tool`.
pub(crate) fn pending(home: &TestHome, tool: &str) -> Vec<Value> {
    home.json(&["approvals"])
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["tool"] == tool)
        .cloned()
        .collect()
}

pub(crate) async fn wait_run(home: &TestHome, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let v = home.json(&["pipeline", "show", id]);
        if done(&v) {
            return v;
        }
        assert!(Instant::now() < deadline, "the run did not get there: {v}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue31_a_plan_needing_approval_waits_then_runs_once_after_agency_approve() {
    let sensitive = |a: &mut Value| {
        a["tasks"][0]["steps"] = json!(["add a password field to the login form"]);
    };
    let model = ModelServer::start(script_with(&[("Planner", &sensitive)]))
        .await
        .unwrap();
    let home = TestHome::new();
    home.init_with(&config(&model));
    let daemon = home.serve();
    let started = home.json(&["pipeline", "run", "agencycore", REQUEST]);
    let id = started["id"].as_str().unwrap().to_owned();
    let waiting = wait_run(&home, &id, |v| v["status"] != "running").await;
    assert_eq!(waiting["status"], "waiting", "{waiting}");
    assert_eq!(stage(&waiting, "SafetyGuard")["status"], "running");
    assert!(requests_of(&model, "Implementor").is_empty());
    // One request for the plan, bound to it, in the user's approvals.
    let pending = home.json(&["approvals"]);
    let plan: Vec<&Value> = pending
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["tool"] == "pipeline:plan")
        .collect();
    assert_eq!(plan.len(), 1, "{pending}");
    assert!(
        plan[0]["args"].to_string().contains("password"),
        "{}",
        plan[0]
    );
    let approval = plan[0]["id"].to_string();
    home.ok(&["approve", &approval]);
    let done = wait_run(&home, &id, |v| {
        v["status"] != "running" && v["status"] != "waiting"
    })
    .await;
    assert_eq!(done["status"], "done", "{done}\n{}", home.log());
    assert_eq!(stage(&done, "SafetyGuard")["status"], "ok");
    let guard = artifact(&home, &done, "SafetyGuard");
    assert_eq!(guard["requiresApproval"], json!(true));
    assert_eq!(requests_of(&model, "Implementor").len(), 1, "ran once");
    daemon.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue31_a_denied_plan_stops_the_run_at_safety_guard() {
    let sensitive = |a: &mut Value| {
        a["tasks"][0]["steps"] = json!(["rotate the api_key in the config"]);
    };
    let model = ModelServer::start(script_with(&[("Planner", &sensitive)]))
        .await
        .unwrap();
    let home = TestHome::new();
    home.init_with(&config(&model));
    let daemon = home.serve();
    let started = home.json(&["pipeline", "run", "agencycore", REQUEST]);
    let id = started["id"].as_str().unwrap().to_owned();
    wait_run(&home, &id, |v| v["status"] == "waiting").await;
    let pending = home.json(&["approvals"]);
    let approval = pending[0]["id"].to_string();
    home.ok(&["deny", &approval, "--reason", "not today"]);
    let done = wait_run(&home, &id, |v| v["status"] == "failed").await;
    let s = stage(&done, "SafetyGuard");
    assert_eq!(s["status"], "blocked_policy", "{s}");
    assert!(s["error"].as_str().unwrap().contains("not today"), "{s}");
    assert!(requests_of(&model, "Implementor").is_empty());
    daemon.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue31_a_reached_budget_pauses_the_run_and_raising_it_resumes_the_stage() {
    let model = ModelServer::start(Script::from_json(SCRIPT).unwrap())
        .await
        .unwrap();
    let home = TestHome::new();
    home.init_with(&config(&model));
    let daemon = home.serve();
    let root = home.root();
    // Three model calls: Observer, PatternObserver, CruxFinder.
    home.ok(&["budget", "set", &root, "--calls", "3"]);
    let started = home.json(&["pipeline", "run", "agencycore", REQUEST]);
    let id = started["id"].as_str().unwrap().to_owned();
    let paused = wait_run(&home, &id, |v| v["status"] != "running").await;
    assert_eq!(paused["status"], "paused", "{paused}");
    assert_eq!(stage(&paused, "Guide")["status"], "budget_exhausted");
    assert!(
        requests_of(&model, "Guide").is_empty(),
        "the refused call never left"
    );
    home.ok(&["budget", "set", &root, "--calls", "50"]);
    let done = wait_run(&home, &id, |v| {
        v["status"] != "running" && v["status"] != "paused"
    })
    .await;
    assert_eq!(done["status"], "done", "{done}\n{}", home.log());
    assert_eq!(
        requests_of(&model, "Observer").len(),
        1,
        "nothing finished is redone"
    );
    assert_eq!(requests_of(&model, "Guide").len(), 1);
    daemon.terminate();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue31_agency_pipeline_stop_ends_a_run_mid_stage() {
    // Observer's upstream stays down: the run sits in its backoff.
    let mut doc: Value = serde_json::from_str(SCRIPT).unwrap();
    doc["scenarios"][0]["turns"] =
        json!([{"error": {"status": 503, "message": "down", "times": 1000}}]);
    let model = ModelServer::start(Script::from_json(&doc.to_string()).unwrap())
        .await
        .unwrap();
    let home = TestHome::new();
    home.init_with(&config(&model));
    let daemon = home.serve();
    let started = home.json(&["pipeline", "run", "agencycore", REQUEST]);
    let id = started["id"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + Duration::from_secs(60);
    while requests_of(&model, "Observer").is_empty() {
        assert!(Instant::now() < deadline, "Observer never asked");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let stopped = home.json(&["pipeline", "stop", &id[..8]]);
    assert_eq!(stopped["status"], "stopped", "{stopped}");
    let again = home.run(&["pipeline", "stop", &id]);
    assert_eq!(again.code, 1, "{}", again.stderr);
    assert!(again.stderr.contains("already stopped"), "{}", again.stderr);
    // Nothing after the stop: no other stage asks the model.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(requests_of(&model, "PatternObserver").is_empty());
    assert_eq!(home.json(&["pipeline", "show", &id])["status"], "stopped");
    daemon.terminate();
}
