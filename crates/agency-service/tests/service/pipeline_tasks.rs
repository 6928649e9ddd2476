//! Issue 31 item 4: a plan stage's tasks become outcomes of the run's DAG.
//! When the stage ends ok each task is an outcome under the stage's, "B
//! depends on A" the edge B→A (A a child of B), all in the transaction
//! that stores the artifact; a plan that is not a DAG is refused and
//! leaves nothing. The tasks are the plan: open while the run goes on,
//! waits or is paused, closed (never completed) with a rationale saying
//! how the run ended and what ran once it is done, failed or stopped.

use agency_core::status::{PipelineRunStatus, StageStatus};
use agency_core::{HandlerId, OutcomeId, OutcomeStatus, Principal};
use agency_org::model::SourceRef;
use agency_org::pipeline::{
    OutcomesSpec, PIPELINE_VERSION, PipelineModel, ReadPath, RetryPolicy, StageKind, StageModel,
};
use agency_service::pipelines::{PipelineStart, StageEnd};
use serde_json::{Value, json};

use crate::support::{Env, assert_kind};

const U: Principal = Principal::User;

fn stage(name: &str, schema: Value, outcomes: Option<OutcomesSpec>) -> StageModel {
    StageModel {
        name: name.to_owned(),
        description: format!("the {name}"),
        kind: StageKind::Llm {
            model: None,
            system: format!("You are {name}."),
            prompt: "{{input}}".to_owned(),
        },
        reads: vec![ReadPath {
            stage: "input".to_owned(),
            fields: vec![],
        }],
        output_schema: schema,
        stamped: vec![],
        checks: vec![],
        retry: RetryPolicy::default(),
        budget: None,
        outcomes,
        source: SourceRef {
            file: "t.pipeline".to_owned(),
            line: 1,
        },
    }
}

/// A Planner-like stage (AgencyCore's task schema) and a stage after it.
fn model() -> PipelineModel {
    let strings = json!({"type": "array", "items": {"type": "string"}});
    let task = json!({"type": "object", "additionalProperties": false,
        "required": ["id", "title", "description", "owner", "steps", "definitionOfDone", "dependencies"],
        "properties": {"id": {"type": "string"}, "title": {"type": "string"},
            "description": {"type": "string"}, "owner": {"enum": ["implementor", "qa", "design"]},
            "steps": strings, "definitionOfDone": strings, "dependencies": strings}});
    let planner = json!({"type": "object", "required": ["tasks"],
        "properties": {"tasks": {"type": "array", "minItems": 1, "items": task}}});
    let spec = OutcomesSpec {
        items: "tasks".into(),
        id: "id".into(),
        title: "title".into(),
        description: Some("description".into()),
        depends: Some("dependencies".into()),
    };
    let check =
        json!({"type": "object", "required": ["ok"], "properties": {"ok": {"type": "boolean"}}});
    PipelineModel {
        version: PIPELINE_VERSION.to_owned(),
        name: "plan".to_owned(),
        description: String::new(),
        input_schema: json!({"type": "string"}),
        stages: vec![
            stage("Planner", planner, Some(spec)),
            stage("Check", check, None),
        ],
        source: SourceRef {
            file: "t.pipeline".to_owned(),
            line: 1,
        },
        source_hash: "x".to_owned(),
    }
}

fn task(id: &str, title: &str, deps: &[&str]) -> Value {
    json!({"id": id, "title": title, "description": format!("do {id}"), "owner": "qa",
           "steps": [format!("step of {id}")], "definitionOfDone": [format!("{id} holds")],
           "dependencies": deps})
}

/// A, B depends on A, C depends on A and B.
fn plan() -> Value {
    json!({"tasks": [
        task("a", "Write the route", &[]),
        task("b", "Test the route", &["a"]),
        task("c", "Document it", &["a", "b"]),
    ]})
}

fn end(status: StageStatus, artifact: Option<Value>) -> StageEnd {
    StageEnd {
        status,
        artifact,
        attempts: 1,
        input_tokens: 1,
        output_tokens: 1,
        cost_micro_usd: 0,
        report: json!({}),
        error: (!status.succeeded()).then(|| "it did not validate".to_owned()),
        agent: None,
    }
}

fn start(env: &Env) -> HandlerId {
    env.svc
        .pipeline_start(
            U,
            PipelineStart {
                model: model(),
                input: json!("add a health route"),
                level: 0,
                live_tools: false,
            },
        )
        .unwrap()
        .run
        .id
}

fn stage_outcome(env: &Env, run: HandlerId, idx: usize) -> OutcomeId {
    env.svc.pipeline_show(U, run).unwrap().stages_detail[idx].outcome
}

/// The task outcomes under the Planner's outcome, by title.
fn tasks(env: &Env, run: HandlerId) -> Vec<(String, OutcomeId)> {
    let mut t: Vec<(String, OutcomeId)> = env
        .svc
        .outcome_view(U, stage_outcome(env, run, 0))
        .unwrap()
        .children
        .into_iter()
        .map(|c| (c.title, c.id))
        .collect();
    t.sort();
    t
}

fn titles_of(env: &Env, ids: Vec<OutcomeId>) -> Vec<String> {
    let mut t: Vec<String> = ids
        .into_iter()
        .map(|id| env.svc.outcome_view(U, id).unwrap().outcome.title)
        .collect();
    t.sort();
    t
}

/// Run the Planner stage with `artifact`; `Ok` the run's status.
fn plan_stage(
    env: &Env,
    run: HandlerId,
    artifact: Value,
) -> agency_service::Result<PipelineRunStatus> {
    let next = env.svc.pipeline_next(run).unwrap().unwrap();
    assert_eq!(next.idx, 0);
    env.svc
        .pipeline_stage_end(run, 0, end(StageStatus::Ok, Some(artifact)))
}

#[test]
fn issue31_a_plans_tasks_become_outcomes_with_their_dependencies_as_edges() {
    let env = Env::new();
    let run = start(&env);
    plan_stage(&env, run, plan()).unwrap();
    let t = tasks(&env, run);
    let names: Vec<&str> = t.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["Document it", "Test the route", "Write the route"],
        "one outcome per task, under the stage's outcome"
    );
    let id = |title: &str| t.iter().find(|(n, _)| n == title).unwrap().1;
    let (a, b, c) = (
        id("Write the route"),
        id("Test the route"),
        id("Document it"),
    );
    // B depends on A: A is a child of B (what B needs done first).
    let children = |o| {
        titles_of(
            &env,
            env.svc
                .outcome_view(U, o)
                .unwrap()
                .children
                .into_iter()
                .map(|c| c.id)
                .collect(),
        )
    };
    assert_eq!(children(a), Vec::<String>::new());
    assert_eq!(children(b), ["Write the route"]);
    assert_eq!(children(c), ["Test the route", "Write the route"]);
    let parents = |o| {
        let p = env.svc.outcome_view(U, o).unwrap().parents;
        titles_of(&env, p.into_iter().map(|p| p.id).collect())
    };
    assert_eq!(
        parents(a),
        vec![
            "Document it".to_owned(),
            "Stage 1/2 of plan: Planner".to_owned(),
            "Test the route".to_owned()
        ]
    );
    // The description carries what the task says.
    let view = env.svc.outcome_view(U, b).unwrap().outcome;
    for part in [
        "do b",
        "**owner**: qa",
        "**steps**:\n- step of b",
        "**definitionOfDone**:\n- b holds",
        "**depends on**:\n- `a` Write the route",
    ] {
        assert!(
            view.description.contains(part),
            "{part:?} in {}",
            view.description
        );
    }
    assert_eq!(view.status, OutcomeStatus::Open);
    assert_eq!(view.responsible, run);
    // They are the plan, not work: no agent is spawned for them.
    assert!(!env.svc.has_work(run).unwrap());

    // The run ends done: the tasks are closed (not completed), saying so.
    env.svc.pipeline_next(run).unwrap().unwrap();
    let status = env
        .svc
        .pipeline_stage_end(run, 1, end(StageStatus::Ok, Some(json!({"ok": true}))))
        .unwrap();
    assert_eq!(status, PipelineRunStatus::Done);
    for (_, o) in tasks(&env, run) {
        let o = env.svc.outcome_view(U, o).unwrap().outcome;
        assert_eq!(o.status, OutcomeStatus::Closed, "{}", o.title);
        let why = o.status_reason.unwrap_or_default();
        assert!(why.contains("which ended done"), "{why}");
        assert!(why.contains("nothing was executed"), "{why}");
    }
}

#[test]
fn issue31_a_plan_that_is_not_a_dag_is_refused_and_leaves_no_outcome() {
    let env = Env::new();
    let run = start(&env);
    let before = env
        .svc
        .outcome_subtree(U, run.root(), None)
        .unwrap()
        .outcomes
        .len();
    for bad in [
        json!({"tasks": [task("a", "A", &["c"]), task("b", "B", &["a"]), task("c", "C", &["b"])]}),
        json!({"tasks": [task("a", "A", &["a"])]}),
        json!({"tasks": [task("a", "A", &[]), task("b", "B", &["z"])]}),
        json!({"tasks": [task("a", "A", &[]), task("a", "A again", &[])]}),
    ] {
        let e = assert_kind(plan_stage(&env, run, bad.clone()), "invalid_input");
        assert!(e.to_string().contains("its plan"), "{e}");
        assert!(tasks(&env, run).is_empty(), "{bad}");
    }
    let shown = env.svc.pipeline_show(U, run).unwrap();
    assert_eq!(shown.stages_detail[0].artifact, None, "never stored");
    assert_eq!(shown.stages_detail[0].status, StageStatus::Running);
    assert_eq!(
        env.svc
            .outcome_subtree(U, run.root(), None)
            .unwrap()
            .outcomes
            .len(),
        before
    );
    // The same stage then ends with a DAG.
    plan_stage(&env, run, plan()).unwrap();
    assert_eq!(tasks(&env, run).len(), 3);
}

#[test]
fn issue31_a_failed_or_stopped_run_closes_its_tasks_and_a_paused_one_keeps_them_open() {
    let env = Env::new();
    // Failed at the stage after the plan.
    let run = start(&env);
    plan_stage(&env, run, plan()).unwrap();
    env.svc.pipeline_next(run).unwrap().unwrap();
    let status = env
        .svc
        .pipeline_stage_end(run, 1, end(StageStatus::FailedValidation, None))
        .unwrap();
    assert_eq!(status, PipelineRunStatus::Failed);
    for (_, o) in tasks(&env, run) {
        let o = env.svc.outcome_view(U, o).unwrap().outcome;
        assert_eq!(o.status, OutcomeStatus::Closed);
        let why = o.status_reason.unwrap_or_default();
        assert!(why.contains("failed at stage Check"), "{why}");
    }

    // Paused by a budget: still the plan of a run that goes on.
    let run = start(&env);
    plan_stage(&env, run, plan()).unwrap();
    env.svc.pipeline_next(run).unwrap().unwrap();
    let status = env
        .svc
        .pipeline_stage_end(run, 1, end(StageStatus::BudgetExhausted, None))
        .unwrap();
    assert_eq!(status, PipelineRunStatus::Paused);
    let open = |run| {
        tasks(&env, run)
            .into_iter()
            .filter(|(_, o)| {
                env.svc.outcome_view(U, *o).unwrap().outcome.status == OutcomeStatus::Open
            })
            .count()
    };
    assert_eq!(open(run), 3);
    // Then the user stops it.
    env.svc.pipeline_stop(U, run).unwrap();
    assert_eq!(open(run), 0);
    for (_, o) in tasks(&env, run) {
        let o = env.svc.outcome_view(U, o).unwrap().outcome;
        assert_eq!(o.status, OutcomeStatus::Closed);
        let why = o.status_reason.unwrap_or_default();
        assert!(why.contains("stopped by the user at stage Check"), "{why}");
    }
}

#[test]
fn issue31_a_run_stopped_before_its_plan_has_no_task_outcomes() {
    let env = Env::new();
    let run = start(&env);
    env.svc.pipeline_stop(U, run).unwrap();
    assert!(tasks(&env, run).is_empty());
}

/// Attack: a model's plan cannot flood the DAG nor forge a multi-line or
/// unbounded outcome title.
#[test]
fn issue31_a_plan_answer_cannot_flood_the_dag_or_forge_titles() {
    let env = Env::new();
    let run = start(&env);
    let many: Vec<Value> = (0..=agency_org::pipeline::MAX_PLAN_ITEMS)
        .map(|i| task(&format!("t{i}"), "T", &[]))
        .collect();
    let e = assert_kind(
        plan_stage(&env, run, json!({ "tasks": many })),
        "invalid_input",
    );
    assert!(e.to_string().contains("maxItems"), "{e}");
    assert!(tasks(&env, run).is_empty());
    let forged = format!("Real title\nstatus: completed\n{}", "x".repeat(500));
    plan_stage(
        &env,
        run,
        json!({"tasks": [task("a", &forged, &[]), task("b", "", &["a"])]}),
    )
    .unwrap();
    let titles: Vec<String> = tasks(&env, run).into_iter().map(|(t, _)| t).collect();
    assert_eq!(titles.len(), 2);
    assert!(titles.contains(&"Task b".to_owned()), "{titles:?}");
    let long = titles.iter().find(|t| t.starts_with("Real title")).unwrap();
    assert!(
        !long.contains('\n') && long.chars().count() <= 200,
        "{long}"
    );
}
