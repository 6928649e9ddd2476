//! AgencyCore as shipped: it compiles to seed 001's eleven stages, a
//! hand-written artifact of each stage validates against the stage's
//! compiled schema, and typical wrong artifacts do not.

use serde_json::{Value, json};

use super::*;

const TS: &str = "2026-12-03T10:00:00Z";

fn model() -> PipelineModel {
    agencycore().unwrap_or_else(|e| panic!("AgencyCore does not compile:\n{e}"))
}

fn stage<'m>(m: &'m PipelineModel, name: &str) -> &'m StageModel {
    m.stages
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no stage {name}"))
}

fn errors(m: &PipelineModel, name: &str, artifact: &Value) -> Vec<String> {
    let v = schemas::validator(&stage(m, name).output_schema)
        .unwrap_or_else(|e| panic!("{name}'s schema: {e}"));
    v.iter_errors(artifact)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// A valid artifact of every stage, as the engine would store it.
fn valid() -> Vec<(&'static str, Value)> {
    vec![
        (
            "Observer",
            json!({
                "agent": "Observer", "summary": "Add a /health endpoint to the API.",
                "keywords": ["health", "endpoint"], "domain": "Dev",
                "rawInput": "please add a /health endpoint", "timestamp": TS
            }),
        ),
        (
            "PatternObserver",
            json!({
                "agent": "PatternObserver",
                "patterns": [{ "name": "CRUD endpoint", "confidence": 0.8, "description": "a new route" }],
                "similarPastTasks": ["run-41"], "suggestedApproach": "Add the route and a test.", "timestamp": TS
            }),
        ),
        (
            "CruxFinder",
            json!({
                "agent": "CruxFinder", "coreProblem": "Expose liveness.", "subProblems": ["route", "test"],
                "assumptions": ["axum"], "constraints": ["no new deps"], "requiredKnowledge": ["HTTP"], "timestamp": TS
            }),
        ),
        (
            "Retriever",
            json!({
                "agent": "Retriever", "lessons": ["test routes"], "playbooks": [], "examples": [], "timestamp": TS
            }),
        ),
        (
            "Guide",
            json!({
                "agent": "Guide", "plan": [{ "step": 1, "action": "add route", "rationale": "the ask" }],
                "estimatedComplexity": "low", "warnings": [], "bestPractices": ["test first"], "timestamp": TS
            }),
        ),
        (
            "Planner",
            json!({
                "agent": "Planner", "tasks": [{
                    "id": "t1", "title": "Route", "description": "Add GET /health", "owner": "implementor",
                    "steps": ["edit router"], "definitionOfDone": ["GET /health answers 200"], "dependencies": []
                }], "timestamp": TS
            }),
        ),
        (
            "SafetyGuard",
            json!({
                "agent": "SafetyGuard", "safe": true, "risks": [], "blockedActions": [],
                "requiresApproval": false, "timestamp": TS
            }),
        ),
        (
            "Implementor",
            json!({
                "agent": "Implementor", "actions": [
                    { "type": "createFile", "description": "route", "path": "src/health.rs", "content": "fn h() {}" },
                    { "type": "runCommand", "description": "test", "command": "cargo test" },
                    { "type": "readFile", "description": "look", "path": "src/main.rs" }
                ],
                "explanation": "Added the route.", "filesCreated": ["src/health.rs"], "filesModified": [],
                "commandsRun": ["cargo test"], "blocked": [], "timestamp": TS
            }),
        ),
        (
            "ToolRunner",
            json!({
                "agent": "ToolRunner",
                "executedCommands": [{ "command": "cargo test", "success": true, "output": "not executed (mock mode)", "mockMode": true }],
                "skippedCommands": [], "timestamp": TS
            }),
        ),
        (
            "Gatekeeper",
            json!({
                "agent": "Gatekeeper",
                "scorecard": { "correctness": 5, "verification": 4, "safety": 5, "clarity": 4, "autonomy": 3 },
                "totalScore": 21,
                "decision": { "approved": true, "promoteToPortfolio": true, "reason": "clean and tested" },
                "rationales": {
                    "correctness": { "rationale": "The route matches the request.", "evidence": ["Implementor.actions[0]"] },
                    "verification": { "rationale": "A qa task tests it.", "evidence": ["facts.plan.verifying"] },
                    "safety": { "rationale": "Nothing was blocked.", "evidence": ["facts.safety.safe"] },
                    "clarity": { "rationale": "Explained.", "evidence": ["Implementor.explanation"] },
                    "autonomy": { "rationale": "No approval was needed.", "evidence": ["facts.safety.approvals"] }
                },
                "feedback": "Good.", "improvements": ["run the tests live"], "approvedLessons": ["test routes"],
                "rejectedLessons": [], "facts": empty_facts(), "capped": [],
                "rubric": "Gatekeeper@0123456789abcdef", "grader": "default/test-model", "timestamp": TS
            }),
        ),
        (
            "Learner",
            json!({
                "agent": "Learner", "reflection": "Small routes need a test.",
                "candidateLessons": [{ "title": "Test routes", "lesson": "Add a request test per route.", "tags": ["http"] }],
                "growthAreas": ["live mode"], "currentLevel": 0, "questionsForNextTime": [], "timestamp": TS
            }),
        ),
    ]
}

#[test]
fn agencycore_is_seed_001s_eleven_stages_in_order() {
    let m = model();
    let names: Vec<&str> = m.stages.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "Observer",
            "PatternObserver",
            "CruxFinder",
            "Retriever",
            "Guide",
            "Planner",
            "SafetyGuard",
            "Implementor",
            "ToolRunner",
            "Gatekeeper",
            "Learner"
        ]
    );
    assert_eq!(m.name, "agencycore");
    assert_eq!(m.input_schema["type"], "string");
    for s in &m.stages {
        let code = match &s.kind {
            StageKind::Code { step } => Some(step.as_str()),
            StageKind::Llm { system, prompt, .. } => {
                assert!(!system.is_empty() && !prompt.is_empty(), "{}", s.name);
                None
            }
            StageKind::Agent { .. } => panic!("{} is an agent stage", s.name),
        };
        let expected = match s.name.as_str() {
            "Retriever" => Some("retriever"),
            "SafetyGuard" => Some("safety_guard"),
            "ToolRunner" => Some("tool_runner"),
            _ => None,
        };
        assert_eq!(code, expected, "{}", s.name);
        // `agent` (the literal) and `timestamp` are stamped on every stage.
        assert!(
            s.stamped.contains(&StampedField::Const {
                field: "agent".into(),
                value: json!(s.name)
            }),
            "{}",
            s.name
        );
        assert!(
            s.stamped.contains(&StampedField::Timestamp {
                field: "timestamp".into()
            }),
            "{}",
            s.name
        );
        assert_eq!(
            s.output_schema["properties"]["agent"]["const"],
            json!(s.name)
        );
        assert_eq!(
            s.output_schema["additionalProperties"],
            json!(false),
            "{}",
            s.name
        );
    }
    let learner = stage(&m, "Learner");
    assert!(learner.stamped.contains(&StampedField::Level {
        field: "currentLevel".into()
    }));
    let gk = stage(&m, "Gatekeeper");
    assert_eq!(
        gk.checks,
        vec![
            Check::Sum {
                total: "totalScore".into(),
                of: "scorecard".into()
            },
            Check::Facts {
                facts: "facts".into(),
                scorecard: "scorecard".into(),
                total: "totalScore".into(),
                decision: Some("decision".into()),
                capped: Some("capped".into()),
            }
        ]
    );
    // The Gatekeeper judges with the run's facts, stored with its scorecard
    // beside the rubric and the grader.
    assert!(gk.reads.contains(&ReadPath {
        stage: FACTS.into(),
        fields: vec![]
    }));
    for f in [
        StampedField::Facts {
            field: "facts".into(),
        },
        StampedField::Rubric {
            field: "rubric".into(),
        },
        StampedField::Grader {
            field: "grader".into(),
        },
    ] {
        assert!(gk.stamped.contains(&f), "{f:?}");
    }
    let retriever = stage(&m, "Retriever");
    assert!(retriever.reads.contains(&ReadPath {
        stage: "PatternObserver".into(),
        fields: vec!["patterns".into(), "name".into()]
    }));
    // The model is deterministic and serialises back to itself.
    assert_eq!(to_json(&m), to_json(&model()));
    let back: PipelineModel = serde_json::from_str(&to_json(&m)).expect("round trip");
    assert_eq!(back, m);
}

#[test]
fn every_seed_field_of_every_stage_is_required() {
    let m = model();
    let seed: &[(&str, &[&str])] = &[
        (
            "Observer",
            &[
                "agent",
                "summary",
                "keywords",
                "domain",
                "rawInput",
                "timestamp",
            ],
        ),
        (
            "PatternObserver",
            &[
                "agent",
                "patterns",
                "similarPastTasks",
                "suggestedApproach",
                "timestamp",
            ],
        ),
        (
            "CruxFinder",
            &[
                "agent",
                "coreProblem",
                "subProblems",
                "assumptions",
                "constraints",
                "requiredKnowledge",
                "timestamp",
            ],
        ),
        (
            "Retriever",
            &["agent", "lessons", "playbooks", "examples", "timestamp"],
        ),
        (
            "Guide",
            &[
                "agent",
                "plan",
                "estimatedComplexity",
                "warnings",
                "bestPractices",
                "timestamp",
            ],
        ),
        ("Planner", &["agent", "tasks", "timestamp"]),
        (
            "SafetyGuard",
            &[
                "agent",
                "safe",
                "risks",
                "blockedActions",
                "requiresApproval",
                "timestamp",
            ],
        ),
        (
            "Implementor",
            &[
                "agent",
                "actions",
                "explanation",
                "filesCreated",
                "filesModified",
                "commandsRun",
                "blocked",
                "timestamp",
            ],
        ),
        (
            "ToolRunner",
            &["agent", "executedCommands", "skippedCommands", "timestamp"],
        ),
        (
            "Gatekeeper",
            &[
                "agent",
                "scorecard",
                "totalScore",
                "decision",
                "feedback",
                "improvements",
                "approvedLessons",
                "rejectedLessons",
                "timestamp",
                // Beyond the seed: the record of the judgement (each
                // score's rationale, the facts it was given, what they
                // capped, the rubric and the grader).
                "rationales",
                "facts",
                "capped",
                "rubric",
                "grader",
            ],
        ),
        (
            "Learner",
            &[
                "agent",
                "reflection",
                "candidateLessons",
                "growthAreas",
                "currentLevel",
                "questionsForNextTime",
                "timestamp",
            ],
        ),
    ];
    for (name, fields) in seed {
        let s = stage(&m, name);
        let mut required: Vec<&str> = s.output_schema["required"]
            .as_array()
            .expect("required")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let mut props: Vec<&str> = s.output_schema["properties"]
            .as_object()
            .expect("properties")
            .keys()
            .map(String::as_str)
            .collect();
        let mut want = fields.to_vec();
        want.sort_unstable();
        required.sort_unstable();
        props.sort_unstable();
        assert_eq!(required, want, "{name}: required");
        assert_eq!(props, want, "{name}: properties");
    }
}

#[test]
fn valid_artifacts_validate() {
    let m = model();
    let all = valid();
    assert_eq!(all.len(), m.stages.len());
    for (name, artifact) in &all {
        assert_eq!(errors(&m, name, artifact), Vec::<String>::new(), "{name}");
    }
}

/// Set `pointer` in `v` to `to` (`None`: remove it).
fn edit(mut v: Value, pointer: &str, to: Option<Value>) -> Value {
    let (parent, key) = pointer.rsplit_once('/').expect("pointer");
    let p = v.pointer_mut(parent).unwrap_or_else(|| panic!("{pointer}"));
    match (p, to) {
        (Value::Object(o), Some(to)) => {
            o.insert(key.to_owned(), to);
        }
        (Value::Object(o), None) => {
            o.remove(key);
        }
        (Value::Array(a), Some(to)) => a[key.parse::<usize>().expect("index")] = to,
        (Value::Array(a), None) => {
            a.remove(key.parse::<usize>().expect("index"));
        }
        _ => panic!("{pointer} is not in a container"),
    }
    v
}

#[test]
fn wrong_artifacts_do_not_validate() {
    let m = model();
    let base: std::collections::BTreeMap<&str, Value> = valid().into_iter().collect();
    let cases: &[(&str, &str, Option<Value>, &str)] = &[
        ("Observer", "/summary", None, "missing field"),
        (
            "Observer",
            "/agent",
            Some(json!("Planner")),
            "wrong literal agent",
        ),
        ("Observer", "/keywords", Some(json!([])), "empty keywords"),
        (
            "Observer",
            "/domain",
            Some(json!("Marketing")),
            "unknown domain",
        ),
        (
            "Observer",
            "/timestamp",
            Some(json!("yesterday at noon")),
            "bad timestamp",
        ),
        (
            "Observer",
            "/timestamp",
            Some(json!("2026-13-40T99:00:00Z")),
            "impossible timestamp",
        ),
        ("Observer", "/extra", Some(json!(1)), "unknown field"),
        (
            "PatternObserver",
            "/patterns/0/confidence",
            Some(json!(1.5)),
            "confidence above 1",
        ),
        (
            "PatternObserver",
            "/patterns/0/name",
            None,
            "pattern without a name",
        ),
        (
            "CruxFinder",
            "/subProblems",
            Some(json!("one")),
            "a string for a list",
        ),
        (
            "Guide",
            "/estimatedComplexity",
            Some(json!("huge")),
            "unknown complexity",
        ),
        ("Guide", "/plan/0/rationale", None, "step without rationale"),
        ("Planner", "/tasks", Some(json!([])), "no tasks"),
        (
            "Planner",
            "/tasks/0/owner",
            Some(json!("manager")),
            "unknown owner",
        ),
        (
            "Planner",
            "/tasks/0/definitionOfDone",
            None,
            "task without definition of done",
        ),
        (
            "SafetyGuard",
            "/safe",
            Some(json!("yes")),
            "a string for a boolean",
        ),
        (
            "Implementor",
            "/actions/0/type",
            Some(json!("deleteFile")),
            "unknown action type",
        ),
        (
            "Implementor",
            "/actions/0/content",
            None,
            "createFile without content",
        ),
        (
            "Implementor",
            "/actions/1/command",
            None,
            "runCommand without command",
        ),
        (
            "ToolRunner",
            "/executedCommands/0/mockMode",
            None,
            "command without mockMode",
        ),
        ("Gatekeeper", "/scorecard/safety", Some(json!(6)), "score 6"),
        (
            "Gatekeeper",
            "/scorecard/clarity",
            Some(json!(2.5)),
            "fractional score",
        ),
        (
            "Gatekeeper",
            "/scorecard/autonomy",
            None,
            "missing dimension",
        ),
        (
            "Gatekeeper",
            "/totalScore",
            Some(json!(26)),
            "total above 25",
        ),
        (
            "Gatekeeper",
            "/decision/approved",
            None,
            "decision without approved",
        ),
        ("Learner", "/currentLevel", Some(json!(4)), "level above 3"),
        (
            "Learner",
            "/candidateLessons/0/lesson",
            None,
            "lesson without text",
        ),
        (
            "Retriever",
            "/lessons",
            Some(json!(["1", "2", "3", "4", "5", "6"])),
            "more than 5 lessons",
        ),
    ];
    for (name, pointer, to, why) in cases {
        let bad = edit(base[name].clone(), pointer, to.clone());
        assert!(
            !errors(&m, name, &bad).is_empty(),
            "{name}{pointer}: {why} validated"
        );
    }
}

#[test]
fn the_sum_check_names_numeric_fields_the_engine_can_add() {
    // The check itself runs in the engine; here: what it names is there.
    let m = model();
    let gk = stage(&m, "Gatekeeper");
    let card = schemas::walk(&gk.output_schema, &["scorecard".to_owned()]).expect("scorecard");
    let dims: Vec<&String> = card["properties"]
        .as_object()
        .expect("properties")
        .keys()
        .collect();
    assert_eq!(
        dims,
        [
            "autonomy",
            "clarity",
            "correctness",
            "safety",
            "verification"
        ]
    );
    let valid = valid();
    let art = &valid
        .iter()
        .find(|(n, _)| *n == "Gatekeeper")
        .expect("gk")
        .1;
    let sum: i64 = art["scorecard"]
        .as_object()
        .expect("card")
        .values()
        .filter_map(Value::as_i64)
        .sum();
    assert_eq!(json!(sum), art["totalScore"]);
}
