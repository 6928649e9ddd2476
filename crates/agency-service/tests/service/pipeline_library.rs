//! Issue 31 item 4: a pipeline's library. A run that ends `done` joins
//! its pipeline's portfolio; a later run's `history` holds the earlier
//! runs sharing its words (and what their Gatekeepers asked to improve),
//! and the built-in Retriever recalls only examples scoring at least 15.

use agency_core::HandlerId;
use agency_core::Principal;
use agency_core::status::{PipelineRunStatus, StageStatus};
use agency_org::model::SourceRef;
use agency_org::pipeline::{
    HISTORY, PIPELINE_VERSION, PipelineModel, ReadPath, RetryPolicy, StageKind, StageModel,
    history_schema, schemas,
};
use agency_service::pipelines::PipelineStart;
use serde_json::{Value, json};

use crate::support::{Env, stage_ok};

fn read(path: &str) -> ReadPath {
    let mut parts = path.split('.');
    ReadPath {
        stage: parts.next().unwrap().to_owned(),
        fields: parts.map(str::to_owned).collect(),
    }
}

fn stage(name: &str, kind: StageKind, reads: &[&str], schema: Value) -> StageModel {
    StageModel {
        name: name.to_owned(),
        description: String::new(),
        kind,
        reads: reads.iter().map(|r| read(r)).collect(),
        output_schema: schema,
        stamped: vec![],
        checks: vec![],
        retry: RetryPolicy::default(),
        budget: None,
        outcomes: None,
        source: SourceRef {
            file: "lib.pipeline".to_owned(),
            line: 1,
        },
    }
}

fn llm() -> StageKind {
    StageKind::Llm {
        model: None,
        system: "You are a stage.".to_owned(),
        prompt: "{{input}}".to_owned(),
    }
}

fn model() -> PipelineModel {
    let strings = json!({"type": "array", "items": {"type": "string"}});
    PipelineModel {
        version: PIPELINE_VERSION.to_owned(),
        name: "lib".to_owned(),
        description: String::new(),
        input_schema: json!({"type": "string", "minLength": 1}),
        stages: vec![
            stage(
                "Observer",
                llm(),
                &["input", HISTORY],
                json!({"type": "object", "required": ["summary", "keywords"],
                       "properties": {"summary": {"type": "string"}, "keywords": strings}}),
            ),
            stage(
                "Retriever",
                StageKind::Code {
                    step: "retriever".to_owned(),
                },
                &["Observer.keywords"],
                json!({"type": "object", "properties": {
                    "lessons": strings, "playbooks": strings, "examples": strings}}),
            ),
            stage(
                "Gatekeeper",
                llm(),
                &["Observer"],
                json!({"type": "object", "required": ["totalScore", "decision", "improvements"],
                       "properties": {"totalScore": {"type": "integer"}, "decision": {"type": "string"},
                                      "improvements": strings}}),
            ),
        ],
        source: SourceRef {
            file: "lib.pipeline".to_owned(),
            line: 1,
        },
        source_hash: "x".to_owned(),
    }
}

fn start(env: &Env, input: &str) -> HandlerId {
    env.svc
        .pipeline_start(
            Principal::User,
            PipelineStart {
                model: model(),
                input: json!(input),
                level: 0,
                live_tools: false,
            },
        )
        .unwrap()
        .run
        .id
}

/// What the engine was handed for a run's stages, as the run went.
struct Seen {
    run: HandlerId,
    history: Value,
    recalled: agency_service::pipelines::Recalled,
}

/// One run of `model()` to its end: Observer answers `keywords`, the
/// Gatekeeper scores `score` and asks for `improvement`.
fn run(env: &Env, input: &str, keywords: &[&str], score: i64, improvement: &str) -> Seen {
    let run = start(env, input);
    let next = env.svc.pipeline_next(run).unwrap().unwrap();
    let history = next.context[HISTORY].clone();
    let agent = next.agent.unwrap().unwrap().agent;
    let mut observer = stage_ok(json!({"summary": input, "keywords": keywords}));
    observer.agent = Some(agent);
    env.svc.pipeline_stage_end(run, 0, observer).unwrap();
    let next = env.svc.pipeline_next(run).unwrap().unwrap();
    assert_eq!(next.idx, 1);
    let recalled = next
        .recalled
        .clone()
        .expect("the Retriever is handed its recall");
    let out = json!({"lessons": recalled.lessons, "playbooks": recalled.playbooks,
                     "examples": recalled.examples});
    env.svc.pipeline_stage_end(run, 1, stage_ok(out)).unwrap();
    let next = env.svc.pipeline_next(run).unwrap().unwrap();
    let mut gate = stage_ok(json!({"totalScore": score, "decision": "approve",
                             "improvements": [improvement]}));
    gate.agent = next.agent.unwrap().ok().map(|m| m.agent);
    let status = env.svc.pipeline_stage_end(run, 2, gate).unwrap();
    assert_eq!(status, PipelineRunStatus::Done);
    Seen {
        run,
        history,
        recalled,
    }
}

#[test]
fn issue31_done_runs_join_the_portfolio_and_later_runs_recall_them() {
    let env = Env::new();
    let validator = schemas::validator(&history_schema()).unwrap();
    let first = run(
        &env,
        "add a REST endpoint for invoices",
        &["rest", "endpoint", "invoices"],
        20,
        "write the tests first",
    );
    // Nothing earlier: an empty history, nothing recalled.
    assert_eq!(first.history, json!({"runs": [], "improvements": []}));
    assert_eq!(first.recalled, Default::default());
    let low = run(
        &env,
        "add a REST endpoint for orders",
        &["rest", "endpoint", "orders"],
        9,
        "name the routes",
    );
    let other = run(
        &env,
        "fix the flaky login test",
        &["flaky", "login"],
        22,
        "retry less",
    );
    let third = run(
        &env,
        "add a REST endpoint for users",
        &["rest", "endpoint", "users"],
        18,
        "x",
    );
    assert!(validator.is_valid(&third.history), "{}", third.history);
    // History: runs sharing the words, whatever their score, none other.
    let ids: Vec<&str> = third.history["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    let (first_id, low_id) = (first.run.to_string(), low.run.to_string());
    assert_eq!(ids.len(), 2, "{}", third.history);
    assert!(ids.contains(&first_id.as_str()) && ids.contains(&low_id.as_str()));
    let first_seen = third.history["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == first_id.as_str())
        .unwrap();
    assert_eq!(first_seen["totalScore"], json!(20));
    assert_eq!(first_seen["improvements"], json!(["write the tests first"]));
    assert_eq!(
        first_seen["keywords"],
        json!(["rest", "endpoint", "invoices"])
    );
    // Improvements: the latest runs' Gatekeepers, newest first.
    assert_eq!(
        third.history["improvements"],
        json!(["retry less", "name the routes", "write the tests first"])
    );
    // The Retriever recalls the example scoring 20, not the one scoring 9,
    // nor the unrelated one scoring 22.
    assert_eq!(third.recalled.examples.len(), 1, "{:?}", third.recalled);
    assert!(third.recalled.examples[0].contains(&first_id));
    assert!(third.recalled.examples[0].contains("score 20/25"));
    let q = agency_service::EventQuery {
        handler: Some(first.run),
        kinds: vec!["pipeline.ended".to_owned()],
        ..Default::default()
    };
    let events = env.svc.events_read(Principal::User, &q).unwrap().events;
    assert_eq!(events[0].data["portfolio"], json!(true), "{events:#?}");
    let _ = other;
}

/// A run that fails joins no portfolio: only what finished is recalled.
#[test]
fn issue31_a_failed_run_is_not_in_the_portfolio() {
    let env = Env::new();
    let run = start(&env, "add a REST endpoint for invoices");
    let next = env.svc.pipeline_next(run).unwrap().unwrap();
    let mut failed = stage_ok(json!({}));
    failed.status = StageStatus::FailedValidation;
    failed.artifact = None;
    failed.error = Some("no answer validated".to_owned());
    failed.agent = next.agent.unwrap().ok().map(|m| m.agent);
    assert_eq!(
        env.svc.pipeline_stage_end(run, 0, failed).unwrap(),
        PipelineRunStatus::Failed
    );
    let later = run_again(&env);
    assert_eq!(later["runs"], json!([]));
    // The log says which runs joined the portfolio.
    let ended = |run: HandlerId| {
        let q = agency_service::EventQuery {
            handler: Some(run),
            kinds: vec!["pipeline.ended".to_owned()],
            ..Default::default()
        };
        let events = env.svc.events_read(Principal::User, &q).unwrap().events;
        assert_eq!(events.len(), 1, "{events:#?}");
        events[0].data["portfolio"].clone()
    };
    assert_eq!(ended(run), json!(false));
}

fn run_again(env: &Env) -> Value {
    let run = start(env, "add a REST endpoint for invoices");
    env.svc.pipeline_next(run).unwrap().unwrap().context[HISTORY].clone()
}
