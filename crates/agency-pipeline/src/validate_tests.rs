//! The output contract's tests: stamps, schema issues, checks.

use super::*;
use agency_org::model::SourceRef;
use agency_org::pipeline::{RetryPolicy, StageKind};
use serde_json::json;

pub(crate) fn stage(schema: Value, stamped: Vec<StampedField>, checks: Vec<Check>) -> StageModel {
    StageModel {
        name: "Learner".into(),
        description: String::new(),
        kind: StageKind::Llm {
            model: None,
            system: "You are the Learner.".into(),
            prompt: "Reflect on {{input}}".into(),
        },
        reads: vec![],
        output_schema: schema,
        stamped,
        checks,
        retry: RetryPolicy::default(),
        budget: None,
        outcomes: None,
        source: SourceRef {
            file: "agencycore.pipeline".into(),
            line: 1,
        },
    }
}

pub(crate) fn learner_schema() -> Value {
    json!({
        "type": "object",
        "required": ["agent", "timestamp", "currentLevel", "reflection"],
        "properties": {
            "agent": {"const": "Learner"},
            "timestamp": {"type": "string", "format": "date-time"},
            "currentLevel": {"type": "integer", "minimum": 0, "maximum": 3},
            "reflection": {"type": "string", "minLength": 1}
        }
    })
}

pub(crate) fn stamps() -> Stamps {
    Stamps {
        now: OffsetDateTime::from_unix_timestamp(1_790_000_000).expect("a valid time"),
        level: 0,
        similar_runs: Vec::new(),
        gate: None,
        facts: None,
        grader: None,
    }
}

pub(crate) fn learner_stamped() -> Vec<StampedField> {
    vec![
        StampedField::Const {
            field: "agent".into(),
            value: json!("Learner"),
        },
        StampedField::Timestamp {
            field: "timestamp".into(),
        },
        StampedField::Level {
            field: "currentLevel".into(),
        },
    ]
}

#[test]
fn stamped_fields_override_the_answer() {
    let c = OutputContract::compile(&stage(learner_schema(), learner_stamped(), vec![]))
        .expect("compiles");
    // A prompt-injected answer claiming a higher level and another agent.
    let answer =
        json!({"agent": "Root", "timestamp": "yesterday", "currentLevel": 3, "reflection": "ok"});
    let a = c.accept(answer, &stamps()).expect("valid once stamped");
    assert_eq!(a.value()["currentLevel"], json!(0));
    assert_eq!(a.value()["agent"], json!("Learner"));
    assert_eq!(a.value()["timestamp"], json!("2026-09-21T14:13:20Z"));
}

/// Attack: an answer cannot name runs the store did not find as
/// similar; the ids are the ones in the stage's `history`.
#[test]
fn similar_runs_are_the_historys_never_the_answers() {
    let schema = json!({"type": "object", "required": ["similar"],
        "properties": {"similar": {"type": "array", "items": {"type": "string"}}}});
    let stamped = vec![StampedField::SimilarRuns {
        field: "similar".into(),
    }];
    let c = OutputContract::compile(&stage(schema, stamped, vec![])).expect("compiles");
    let ctx = json!({"history": {"runs": [{"id": "run-a"}, {"id": "run-b"}], "improvements": []}});
    let stamps = Stamps::new(7, ctx.as_object().expect("an object"));
    assert_eq!(stamps.level, 3, "a level is clamped to 0-3");
    let a = c
        .accept(json!({"similar": ["invented", "run-z"]}), &stamps)
        .expect("valid once stamped");
    assert_eq!(a.value()["similar"], json!(["run-a", "run-b"]));
    let none = Stamps::new(0, &serde_json::Map::new());
    let a = c.accept(json!({"similar": ["x"]}), &none).expect("valid");
    assert_eq!(a.value()["similar"], json!([]));
}

/// Attack: an answer cannot hide a refused action by leaving it out of
/// its own `blocked` list; the engine gates every proposed action.
#[test]
fn blocked_actions_are_the_gates_never_the_answers() {
    let schema = json!({"type": "object", "required": ["actions", "blocked"], "properties": {
        "actions": {"type": "array"},
        "blocked": {"type": "array", "items": {"type": "string"}}}});
    let stamped = vec![StampedField::BlockedActions {
        field: "blocked".into(),
    }];
    let c = OutputContract::compile(&stage(schema, stamped, vec![])).expect("compiles");
    let answer = json!({"blocked": [], "actions": [
        {"type": "runCommand", "command": "rm -rf /"},
        {"type": "createFile", "path": "../outside.rs"},
        {"type": "readFile", "path": "/etc/passwd"},
        {"type": "createFile", "path": "src/main.rs"},
        {"type": "runCommand", "command": "cargo test"},
    ]});
    let a = c
        .accept(answer.clone(), &stamps())
        .expect("valid once stamped");
    let blocked: Vec<&str> = a.value()["blocked"]
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(blocked.len(), 3, "{blocked:?}");
    assert!(
        blocked[0].starts_with("runCommand rm -rf /: "),
        "{blocked:?}"
    );
    assert!(
        blocked[1].starts_with("createFile ../outside.rs: "),
        "{blocked:?}"
    );
    assert!(
        blocked[2].starts_with("readFile /etc/passwd: "),
        "{blocked:?}"
    );
    // A policy gate decides instead of the rules.
    let gate = ActionGate(Arc::new(|a: &Value| {
        (a["command"] == "cargo test").then(|| "not on this machine".to_owned())
    }));
    let a = c
        .accept(answer, &stamps().with_gate(gate))
        .expect("valid once stamped");
    assert_eq!(
        a.value()["blocked"],
        json!(["runCommand cargo test: not on this machine"])
    );
}

#[test]
fn date_time_format_is_asserted() {
    let c = OutputContract::compile(&stage(learner_schema(), vec![], vec![])).expect("compiles");
    let bad = json!({"agent": "Learner", "timestamp": "not a time", "currentLevel": 0, "reflection": "x"});
    let issues = c.validate(&bad).expect_err("format checked");
    assert_eq!(issues.items.len(), 1);
    assert_eq!(issues.items[0].keyword, "format");
    assert_eq!(issues.items[0].instance_path, "/timestamp");
}

#[test]
fn issues_name_path_and_keyword() {
    let c = OutputContract::compile(&stage(learner_schema(), vec![], vec![])).expect("compiles");
    let cases = [
        (
            json!({"agent": "Learner", "timestamp": "2026-01-01T00:00:00Z", "currentLevel": 9, "reflection": "x"}),
            "/currentLevel",
            "maximum",
        ),
        (
            json!({"agent": "Learner", "timestamp": "2026-01-01T00:00:00Z", "currentLevel": 0}),
            "",
            "required",
        ),
        (
            json!({"agent": "Other", "timestamp": "2026-01-01T00:00:00Z", "currentLevel": 0, "reflection": "x"}),
            "/agent",
            "const",
        ),
        (json!([1]), "", "type"),
    ];
    for (value, path, keyword) in cases {
        let issues = c.validate(&value).expect_err("invalid");
        assert_eq!(issues.items[0].instance_path, path, "{value}");
        assert_eq!(issues.items[0].keyword, keyword, "{value}");
    }
}

#[test]
fn issues_are_bounded() {
    let schema = json!({"type": "array", "items": {"type": "string"}});
    let c = OutputContract::compile(&stage(schema, vec![], vec![])).expect("compiles");
    let issues = c.validate(&json!(vec![1; 50])).expect_err("invalid");
    assert_eq!(issues.items.len(), MAX_ISSUES);
    assert_eq!(issues.omitted, 50 - MAX_ISSUES);
    let long = Issue::new("", "x", "y".repeat(5000));
    assert!(long.message.chars().count() <= MAX_MESSAGE_CHARS + 1);
}

#[test]
fn sum_check_runs_after_the_schema() {
    let schema = json!({"type": "object", "required": ["totalScore", "scorecard"]});
    let checks = vec![Check::Sum {
        total: "totalScore".into(),
        of: "scorecard".into(),
    }];
    let c = OutputContract::compile(&stage(schema, vec![], checks)).expect("compiles");
    let cases = [
        (
            json!({"totalScore": 7, "scorecard": {"a": 3, "b": 4}}),
            None,
        ),
        (
            json!({"totalScore": 8, "scorecard": {"a": 3, "b": 4}}),
            Some("/totalScore"),
        ),
        (
            json!({"totalScore": 7, "scorecard": {"a": 3, "b": "4"}}),
            Some("/scorecard/b"),
        ),
        (
            json!({"totalScore": "7", "scorecard": {}}),
            Some("/totalScore"),
        ),
        (
            json!({"totalScore": 0, "scorecard": []}),
            Some("/scorecard"),
        ),
    ];
    for (value, path) in cases {
        match (c.validate(&value), path) {
            (Ok(()), None) => {}
            (Err(i), Some(p)) => {
                assert_eq!(i.items[0].instance_path, p);
                assert_eq!(i.items[0].keyword, "sum");
            }
            (r, p) => panic!("{value}: {r:?} expected {p:?}"),
        }
    }
}

/// A plan that is not a DAG fails the contract with issues the
/// re-ask carries: a path into the plan, a keyword and a message.
#[test]
fn a_plan_stages_contract_checks_its_graph() {
    let schema = json!({"type": "object", "properties": {"tasks": {"type": "array", "items": {
        "type": "object", "required": ["id", "title", "dependencies"],
        "properties": {"id": {"type": "string"}, "title": {"type": "string"},
            "dependencies": {"type": "array", "items": {"type": "string"}}}}}}});
    let mut s = stage(schema, vec![], vec![]);
    s.outcomes = Some(OutcomesSpec {
        items: "tasks".into(),
        id: "id".into(),
        title: "title".into(),
        description: None,
        depends: Some("dependencies".into()),
    });
    let c = OutputContract::compile(&s).expect("compiles");
    let t = |id: &str, deps: &[&str]| json!({"id": id, "title": id, "dependencies": deps});
    let ok = json!({"tasks": [t("a", &[]), t("b", &["a"]), t("c", &["a", "b"])]});
    assert_eq!(c.validate(&ok), Ok(()));
    let cases = [
        (
            json!({"tasks": [t("a", &["b"]), t("b", &["a"])]}),
            "/tasks/1/dependencies/0",
            "cycle",
        ),
        (
            json!({"tasks": [t("a", &[]), t("b", &["a"]), t("c", &["x"])]}),
            "/tasks/2/dependencies/0",
            "dependency",
        ),
        (
            json!({"tasks": [t("a", &[]), t("a", &[])]}),
            "/tasks/1/id",
            "uniqueId",
        ),
        (
            json!({"tasks": [t("a", &["a"])]}),
            "/tasks/0/dependencies/0",
            "cycle",
        ),
    ];
    for (value, path, keyword) in cases {
        let issues = c.validate(&value).expect_err("refused");
        assert_eq!(issues.items[0].instance_path, path, "{value}");
        assert_eq!(issues.items[0].keyword, keyword, "{value}");
    }
    // Without the spec the same cyclic plan is only JSON.
    let plain =
        OutputContract::compile(&stage(s.output_schema.clone(), vec![], vec![])).expect("compiles");
    assert_eq!(plain.validate(&json!({"tasks": [t("a", &["a"])]})), Ok(()));
}

#[test]
fn bad_contracts_are_refused() {
    let bad = stage(json!({"type": 12}), vec![], vec![]);
    assert!(matches!(
        OutputContract::compile(&bad),
        Err(ContractError::Schema { .. })
    ));
    let bad = stage(
        json!({}),
        vec![StampedField::Timestamp {
            field: "a.b".into(),
        }],
        vec![],
    );
    assert!(matches!(
        OutputContract::compile(&bad),
        Err(ContractError::Stamped { .. })
    ));
}

#[test]
fn revalidate_refuses_a_tampered_artifact() {
    let c = OutputContract::compile(&stage(learner_schema(), vec![], vec![])).expect("compiles");
    assert!(c.revalidate(json!({"agent": "Learner"})).is_err());
}

fn judge_stage() -> StageModel {
    let schema = json!({
        "type": "object",
        "required": ["scorecard", "totalScore", "decision", "facts", "capped", "rubric"],
        "properties": {
            "scorecard": {"type": "object", "properties": {
                "correctness": {"type": "integer", "minimum": 0, "maximum": 5},
                "verification": {"type": "integer", "minimum": 0, "maximum": 5},
                "safety": {"type": "integer", "minimum": 0, "maximum": 5}}},
            "totalScore": {"type": "integer"},
            "decision": {"type": "object", "properties": {"approved": {"type": "boolean"}, "promoteToPortfolio": {"type": "boolean"}}},
            "facts": {"type": "object"},
            "capped": {"type": "array", "items": {"type": "object", "required": ["field", "from", "to", "why"]}},
            "rubric": {"type": "string"}
        }
    });
    let stamped = vec![
        StampedField::Facts {
            field: "facts".into(),
        },
        StampedField::Rubric {
            field: "rubric".into(),
        },
    ];
    let checks = vec![
        Check::Sum {
            total: "totalScore".into(),
            of: "scorecard".into(),
        },
        Check::Facts {
            facts: "facts".into(),
            scorecard: "scorecard".into(),
            total: "totalScore".into(),
            decision: Some("decision".into()),
            capped: Some("capped".into()),
        },
    ];
    let mut s = stage(schema, stamped, checks);
    s.name = "Gatekeeper".into();
    s
}

/// Attack: a judging model gives full marks and approves while a command
/// failed and claims nothing was capped; the engine's facts, not the
/// answer's, decide: Correctness is capped below the pass mark, the total
/// summed again, approval and promotion refused, and what changed
/// recorded. The answer cannot choose the facts either.
#[test]
fn a_facts_check_caps_full_marks_when_a_command_failed() {
    let c = OutputContract::compile(&judge_stage()).expect("compiles");
    let mut facts = agency_org::pipeline::empty_facts();
    facts["commands"]["found"] = json!(true);
    facts["commands"]["failed"] = json!([{"command": "cargo test", "output": "1 failed"}]);
    let stamps = Stamps::new(1, json!({"facts": facts}).as_object().expect("an object"));
    let answer = json!({
        "scorecard": {"correctness": 5, "verification": 5, "safety": 5},
        "totalScore": 15,
        "decision": {"approved": true, "promoteToPortfolio": true},
        "facts": agency_org::pipeline::empty_facts(),
        "capped": [],
        "rubric": "mine",
    });
    let a = c.accept(answer, &stamps).expect("accepted, capped");
    let v = a.value();
    assert_eq!(v["scorecard"]["correctness"], json!(2), "{v}");
    assert_eq!(v["totalScore"], json!(12), "{v}");
    assert_eq!(
        v["decision"],
        json!({"approved": false, "promoteToPortfolio": false})
    );
    assert_eq!(v["facts"], facts, "the engine's facts, not the answer's");
    assert_eq!(v["capped"][0]["field"], json!("scorecard.correctness"));
    assert_eq!(v["capped"][0]["from"], json!(5));
    assert!(
        v["rubric"]
            .as_str()
            .expect("a rubric")
            .starts_with("Gatekeeper@")
    );
    // A stored scorecard raised again fails its own facts when read back.
    let mut tampered = v.clone();
    tampered["scorecard"]["correctness"] = json!(5);
    tampered["totalScore"] = json!(15);
    let issues = c.revalidate(tampered).expect_err("refused");
    assert_eq!(issues.items[0].keyword, "facts");
    assert_eq!(issues.items[0].instance_path, "/scorecard/correctness");
    // An answer whose schema fails is not capped into shape: its issues
    // are re-asked as they are.
    let bad = json!({"scorecard": {"correctness": 9, "verification": 5, "safety": 5},
        "totalScore": 19, "decision": {}, "capped": [], "rubric": "x"});
    let issues = c.accept(bad, &stamps).expect_err("invalid");
    assert_eq!(issues.items[0].instance_path, "/scorecard/correctness");
    assert_eq!(issues.items[0].keyword, "maximum");
}
