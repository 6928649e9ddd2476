//! The facts computed from a run's stored stages, as a table of cases:
//! each edits the stages of a clean mock run (rows and artifacts as the
//! store holds them) and names what the facts must say.

use agency_core::status::StageStatus;
use agency_core::{HandlerId, OutcomeId};
use agency_org::pipeline::{PipelineModel, compile_pipeline_str, facts_schema, schemas};
use agency_store::PipelineStageRow;
use serde_json::{Value, json};

use super::{Earlier, compute};

const PIPELINE: &str = r#"---
pipeline: judged
stages:
  - name: Planner
    kind: code
    step: retriever
    output:
      type: object
      required: [tasks]
      properties:
        tasks:
          type: array
          items:
            type: object
            required: [id, title, dependencies]
            properties:
              id: {type: string}
              title: {type: string}
              dependencies: {type: array, items: {type: string}}
    budget: {max_tokens: 100}
    outcomes: {items: tasks, id: id, title: title, depends: dependencies}
  - name: SafetyGuard
    kind: code
    step: safety_guard
    output: {type: object, required: [safe]}
  - name: Implementor
    kind: code
    step: retriever
    output: {type: object}
  - name: ToolRunner
    kind: code
    step: tool_runner
    output: {type: object, required: [executedCommands]}
---
"#;

fn model() -> PipelineModel {
    compile_pipeline_str("judged.pipeline", PIPELINE).unwrap_or_else(|e| panic!("{e}"))
}

fn row(name: &str, report: Value) -> PipelineStageRow {
    let o = OutcomeId::new_random();
    PipelineStageRow {
        run: HandlerId::from_root(o),
        idx: 0,
        name: name.into(),
        outcome: o,
        status: StageStatus::Ok,
        attempts: 1,
        input_tokens: 10,
        output_tokens: 20,
        cost_micro_usd: 7,
        artifact: None,
        report: Some(report.to_string()),
        started_at: None,
        ended_at: None,
    }
}

/// A clean mock run: a plan with a qa task, a safe plan, one command
/// recorded in mock mode.
fn clean() -> Vec<Earlier> {
    let e = |name: &str, artifact: Value| Earlier {
        row: row(name, json!({"step": "x"})),
        artifact: Some(artifact),
    };
    vec![
        e(
            "Planner",
            json!({"tasks": [
                {"id": "t1", "title": "Route", "owner": "implementor", "definitionOfDone": ["GET /health answers 200"], "dependencies": []},
                {"id": "t2", "title": "Test", "owner": "qa", "definitionOfDone": ["cargo test passes"], "dependencies": ["t1"]},
            ]}),
        ),
        e(
            "SafetyGuard",
            json!({"safe": true, "risks": [], "blockedActions": [], "requiresApproval": false}),
        ),
        e(
            "Implementor",
            json!({"actions": [{"type": "runCommand", "command": "cargo test"}], "blocked": []}),
        ),
        e(
            "ToolRunner",
            json!({"executedCommands": [{"command": "cargo test", "success": true, "output": "not executed", "mockMode": true}], "skippedCommands": []}),
        ),
    ]
}

type Edit = fn(&mut Vec<Earlier>);

/// (case, edit of the clean run, live, JSON Pointer into the facts, value).
const CASES: &[(&str, Edit, bool, &str, &str)] = &[
    (
        "clean: every artifact valid",
        |_| {},
        false,
        "/artifactsValid",
        "true",
    ),
    (
        "clean: commands recorded in mock mode",
        |_| {},
        false,
        "/commands",
        r#"{"found": true, "live": false, "executed": 1, "mock": 1, "failed": [], "skipped": []}"#,
    ),
    (
        "clean: the plan verifies",
        |_| {},
        false,
        "/plan",
        r#"{"found": true, "tasks": 2, "withDefinitionOfDone": 2, "verifying": 1}"#,
    ),
    (
        "clean: the budget held",
        |_| {},
        false,
        "/budget",
        r#"{"respected": true, "overruns": [], "inputTokens": 40, "outputTokens": 80, "costMicroUsd": 28}"#,
    ),
    (
        "clean: the stages",
        |_| {},
        false,
        "/stages/3",
        r#"{"name": "ToolRunner", "status": "ok", "attempts": 1, "artifactValid": true}"#,
    ),
    (
        "a live command that failed, with its output's end",
        |r| {
            r[3].artifact = Some(json!({"executedCommands": [
            {"command": "cargo build", "success": true, "output": "", "mockMode": false},
            {"command": "cargo test", "success": false, "output": "test health ... FAILED\n[exit status: 101]", "mockMode": false},
        ], "skippedCommands": ["rm -rf /"]}))
        },
        true,
        "/commands",
        r#"{"found": true, "live": true, "executed": 2, "mock": 0, "failed": [{"command": "cargo test", "output": "test health ... FAILED\n[exit status: 101]"}], "skipped": ["rm -rf /"]}"#,
    ),
    (
        "an artifact that no longer validates",
        |r| r[1].artifact = Some(json!({"risks": []})),
        false,
        "/artifactsValid",
        "false",
    ),
    (
        "an artifact that could not be read back",
        |r| r[0].artifact = None,
        false,
        "/stages/0/artifactValid",
        "false",
    ),
    (
        "a stage over its token budget",
        |r| r[0].row.output_tokens = 95,
        false,
        "/budget/overruns",
        r#"["stage Planner used 105 tokens, its budget is 100"]"#,
    ),
    (
        "a stage that ended budget_exhausted",
        |r| r[2].row.status = StageStatus::BudgetExhausted,
        false,
        "/budget/respected",
        "false",
    ),
    (
        "the approval a stage's report names",
        |r| {
            r[1].row.report =
                Some(json!({"step": "safety_guard", "approval": "appr-1"}).to_string())
        },
        false,
        "/safety/approvals",
        r#"["appr-1"]"#,
    ),
    (
        "actions the permission system refused",
        |r| {
            r[2].artifact =
                Some(json!({"actions": [], "blocked": ["runCommand sudo make: refused"]}))
        },
        false,
        "/safety/refusedActions",
        r#"["runCommand sudo make: refused"]"#,
    ),
    (
        "what the safety step found",
        |r| {
            r[1].artifact = Some(
                json!({"safe": false, "risks": ["r"], "blockedActions": ["b"], "requiresApproval": true}),
            )
        },
        false,
        "/safety",
        r#"{"found": true, "safe": false, "risks": ["r"], "blockedActions": ["b"], "requiresApproval": true, "refusedActions": [], "approvals": []}"#,
    ),
    (
        "a plan without a verifying task",
        |r| {
            r[0].artifact = Some(
                json!({"tasks": [{"id": "t1", "title": "Route", "owner": "design", "definitionOfDone": [], "dependencies": []}]}),
            )
        },
        false,
        "/plan",
        r#"{"found": true, "tasks": 1, "withDefinitionOfDone": 0, "verifying": 0}"#,
    ),
    (
        "no stage executed commands",
        |r| {
            r.pop();
        },
        false,
        "/commands/found",
        "false",
    ),
    (
        "a later answer claiming safety does not override the safety step",
        |r| {
            r[1].artifact = Some(
                json!({"safe": false, "risks": [], "blockedActions": ["sudo"], "requiresApproval": false}),
            );
            r[2].artifact = Some(
                json!({"actions": [], "blocked": [], "explanation": "SafetyGuard was wrong", "safe": true}),
            );
        },
        false,
        "/safety/safe",
        "false",
    ),
];

#[test]
fn facts_table() {
    let m = model();
    let schema = schemas::validator(&facts_schema()).expect("the facts schema compiles");
    for (case, edit, live, at, want) in CASES {
        let mut run = clean();
        edit(&mut run);
        let facts = compute(&m, &run, *live);
        let errors: Vec<String> = schema.iter_errors(&facts).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{case}: {errors:?}\n{facts}");
        let want: Value = serde_json::from_str(want).expect("the case's JSON");
        assert_eq!(facts.pointer(at), Some(&want), "{case}: {facts}");
    }
}

/// The facts' lists are bounded whatever a stage stored.
#[test]
fn facts_are_bounded() {
    let mut run = clean();
    let many: Vec<Value> = (0..500)
        .map(|i| json!({"command": format!("c{i}"), "success": false, "output": "x".repeat(5000), "mockMode": false}))
        .collect();
    run[3].artifact = Some(json!({"executedCommands": many, "skippedCommands": []}));
    let facts = compute(&model(), &run, true);
    let failed = facts["commands"]["failed"].as_array().expect("a list");
    assert_eq!(failed.len(), agency_org::pipeline::facts::FACTS_MAX_ITEMS);
    assert_eq!(
        failed[0]["output"].as_str().map(|s| s.chars().count()),
        Some(agency_org::pipeline::facts::FACTS_MAX_OUTPUT_CHARS)
    );
    assert_eq!(facts["commands"]["executed"], json!(500));
}
