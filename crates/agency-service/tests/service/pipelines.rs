//! Issue 31: pipeline runs in the service. A run is a handler with one
//! outcome per stage; the engine takes stages in order with the context
//! they read; an artifact is stored only after it validates, a failed
//! stage stores none and stops the run, and a stage running when the
//! daemon stopped is handed out again after a restart.

use agency_core::Principal;
use agency_core::status::{PipelineRunStatus, StageStatus};
use agency_org::model::SourceRef;
use agency_org::pipeline::{
    PIPELINE_VERSION, PipelineModel, ReadPath, RetryPolicy, StageKind, StageModel,
};
use agency_service::pipelines::{PipelineStart, StageEnd};
use serde_json::{Value, json};

use crate::support::{Env, assert_kind};

const U: Principal = Principal::User;

fn stage(name: &str, reads: &[&str], schema: Value) -> StageModel {
    StageModel {
        name: name.to_owned(),
        description: String::new(),
        kind: StageKind::Llm {
            model: None,
            system: format!("You are {name}."),
            prompt: "{{input}}".to_owned(),
        },
        reads: reads
            .iter()
            .map(|r| ReadPath {
                stage: (*r).to_owned(),
                fields: vec![],
            })
            .collect(),
        output_schema: schema,
        stamped: vec![],
        checks: vec![],
        retry: RetryPolicy::default(),
        budget: None,
        outcomes: None,
        source: SourceRef {
            file: "t.pipeline".to_owned(),
            line: 1,
        },
    }
}

fn model() -> PipelineModel {
    let obj = |field: &str| {
        json!({"type": "object", "required": [field], "additionalProperties": false,
               "properties": {field: {"type": "array", "items": {"type": "string"}, "minItems": 1}}})
    };
    PipelineModel {
        version: PIPELINE_VERSION.to_owned(),
        name: "two".to_owned(),
        description: "two stages".to_owned(),
        input_schema: json!({"type": "string", "minLength": 1}),
        stages: vec![
            stage("Observer", &["input"], obj("keywords")),
            stage("Planner", &["Observer"], obj("tasks")),
        ],
        source: SourceRef {
            file: "t.pipeline".to_owned(),
            line: 1,
        },
        source_hash: "x".to_owned(),
    }
}

fn end(status: StageStatus, artifact: Option<Value>) -> StageEnd {
    StageEnd {
        status,
        artifact,
        attempts: 1,
        input_tokens: 10,
        output_tokens: 5,
        cost_micro_usd: 3,
        report: json!({"attempts": [{"raw": "…"}]}),
        error: (!status.succeeded()).then(|| "no answer validated".to_owned()),
        agent: None,
    }
}

fn start(env: &Env, input: Value) -> agency_core::HandlerId {
    env.svc
        .pipeline_start(
            U,
            PipelineStart {
                model: model(),
                input,
                level: 0,
                live_tools: false,
            },
        )
        .unwrap()
        .run
        .id
}

#[test]
fn issue31_a_run_goes_stage_by_stage_and_stores_only_validated_artifacts() {
    let env = Env::new();
    let run = start(&env, json!("fix the login bug"));
    let view = env.svc.pipeline_show(U, run).unwrap();
    assert_eq!(view.run.status, PipelineRunStatus::Running);
    assert_eq!(view.stages_detail.len(), 2);
    // The engine is the run's only worker: no agent is spawned for it.
    assert!(!env.svc.has_work(run).unwrap());

    let next = env.svc.pipeline_next(run).unwrap().unwrap();
    assert_eq!(next.idx, 0);
    assert_eq!(next.context["input"], json!("fix the login bug"));
    assert!(!next.context.contains_key("Planner"));
    // An invalid artifact is refused and nothing moves on.
    for bad in [
        json!({"keywords": []}),
        json!({"keywords": ["a"], "extra": 1}),
        json!("x"),
    ] {
        assert_kind(
            env.svc
                .pipeline_stage_end(run, 0, end(StageStatus::Ok, Some(bad))),
            "invalid_input",
        );
    }
    assert_kind(
        env.svc
            .pipeline_stage_end(run, 0, end(StageStatus::Ok, None)),
        "invalid_input",
    );
    let shown = env.svc.pipeline_show(U, run).unwrap();
    assert_eq!(shown.stages_detail[0].status, StageStatus::Running);
    assert_eq!(shown.stages_detail[0].artifact, None);
    // Ending a stage the run is not at is refused.
    assert_kind(
        env.svc
            .pipeline_stage_end(run, 1, end(StageStatus::Ok, Some(json!({"tasks": ["t"]})))),
        "invalid_input",
    );

    let status = env
        .svc
        .pipeline_stage_end(
            run,
            0,
            end(StageStatus::Repaired, Some(json!({"keywords": ["login"]}))),
        )
        .unwrap();
    assert_eq!(status, PipelineRunStatus::Running);
    let next = env.svc.pipeline_next(run).unwrap().unwrap();
    assert_eq!(next.idx, 1);
    assert_eq!(next.context["Observer"], json!({"keywords": ["login"]}));
    let status = env
        .svc
        .pipeline_stage_end(
            run,
            1,
            end(StageStatus::Ok, Some(json!({"tasks": ["write the fix"]}))),
        )
        .unwrap();
    assert_eq!(status, PipelineRunStatus::Done);
    assert!(env.svc.pipeline_next(run).unwrap().is_none());

    let shown = env.svc.pipeline_show(U, run).unwrap();
    assert_eq!(shown.run.status, PipelineRunStatus::Done);
    let s0 = &shown.stages_detail[0];
    assert_eq!(
        (s0.status, s0.attempts, s0.input_tokens, s0.cost_micro_usd),
        (StageStatus::Repaired, 1, 10, 3)
    );
    // The artifact is a KB file the user reads like any other.
    let file = s0.artifact.unwrap();
    let text = env.svc.kb_read(U, file).unwrap();
    let stored: Value = serde_json::from_slice(&text.content).unwrap();
    assert_eq!(stored, json!({"keywords": ["login"]}));
    let runs = env.svc.pipeline_runs(U, false, None).unwrap();
    assert_eq!(runs.len(), 1);
    assert!(env.svc.pipeline_runs(U, true, None).unwrap().is_empty());
}

#[test]
fn issue31_a_failed_stage_stores_nothing_and_the_next_never_starts() {
    let env = Env::new();
    let run = start(&env, json!("x"));
    env.svc.pipeline_next(run).unwrap().unwrap();
    // A failed stage's answer is never stored as an artifact.
    let status = env
        .svc
        .pipeline_stage_end(
            run,
            0,
            end(
                StageStatus::FailedValidation,
                Some(json!({"keywords": ["x"]})),
            ),
        )
        .unwrap();
    assert_eq!(status, PipelineRunStatus::Failed);
    assert!(env.svc.pipeline_next(run).unwrap().is_none());
    let shown = env.svc.pipeline_show(U, run).unwrap();
    assert_eq!(shown.stages_detail[0].artifact, None);
    assert_eq!(
        shown.stages_detail[0].error.as_deref(),
        Some("no answer validated")
    );
    assert_eq!(shown.stages_detail[1].status, StageStatus::Pending);
    // A reached budget pauses the run instead of failing it.
    let run = start(&env, json!("y"));
    env.svc.pipeline_next(run).unwrap().unwrap();
    let status = env
        .svc
        .pipeline_stage_end(run, 0, end(StageStatus::BudgetExhausted, None))
        .unwrap();
    assert_eq!(status, PipelineRunStatus::Paused);
}

#[test]
fn issue31_a_stage_running_at_a_restart_is_handed_out_again() {
    let env = Env::new();
    let run = start(&env, json!("x"));
    env.svc.pipeline_next(run).unwrap().unwrap();
    env.svc
        .pipeline_stage_end(
            run,
            0,
            end(StageStatus::Ok, Some(json!({"keywords": ["k"]}))),
        )
        .unwrap();
    assert_eq!(env.svc.pipeline_next(run).unwrap().unwrap().idx, 1);
    let env = env.reopen();
    assert_eq!(env.svc.pipeline_unfinished().unwrap(), [run]);
    let again = env.svc.pipeline_next(run).unwrap().unwrap();
    assert_eq!(again.idx, 1, "the finished stage is not redone");
    assert_eq!(again.context["Observer"], json!({"keywords": ["k"]}));
}

#[test]
fn issue31_pipeline_runs_are_the_users_and_bad_starts_change_nothing() {
    let env = Env::new();
    let agent = env.agent(env.root);
    let s = |m: PipelineModel, input: Value, level: i64, live: bool| PipelineStart {
        model: m,
        input,
        level,
        live_tools: live,
    };
    assert_kind(
        env.svc
            .pipeline_start(agent, s(model(), json!("x"), 0, false)),
        "permission_denied",
    );
    assert_kind(
        env.svc.pipeline_runs(agent, false, None),
        "permission_denied",
    );
    // Input outside its schema, levels out of range, live tools at level 0.
    assert_kind(
        env.svc.pipeline_start(U, s(model(), json!(""), 0, false)),
        "invalid_input",
    );
    assert_kind(
        env.svc.pipeline_start(U, s(model(), json!(7), 0, false)),
        "invalid_input",
    );
    assert_kind(
        env.svc.pipeline_start(U, s(model(), json!("x"), 4, false)),
        "invalid_input",
    );
    assert_kind(
        env.svc.pipeline_start(U, s(model(), json!("x"), 0, true)),
        "invalid_input",
    );
    // A model that reads a later stage, or has no stages, or a bad schema.
    let mut later = model();
    later.stages.swap(0, 1);
    assert_kind(
        env.svc.pipeline_start(U, s(later, json!("x"), 0, false)),
        "invalid_input",
    );
    let mut empty = model();
    empty.stages.clear();
    assert_kind(
        env.svc.pipeline_start(U, s(empty, json!("x"), 0, false)),
        "invalid_input",
    );
    let mut bad_schema = model();
    bad_schema.stages[0].output_schema = json!({"type": "object", "minProperties": "two"});
    assert_kind(
        env.svc
            .pipeline_start(U, s(bad_schema, json!("x"), 0, false)),
        "invalid_input",
    );
    assert!(env.svc.pipeline_runs(U, false, None).unwrap().is_empty());
}

#[test]
fn issue31_a_run_paused_by_a_budget_goes_on_at_its_stage_when_resumed() {
    let env = Env::new();
    let run = start(&env, json!("x"));
    env.svc.pipeline_next(run).unwrap().unwrap();
    env.svc
        .pipeline_stage_end(
            run,
            0,
            end(StageStatus::Ok, Some(json!({"keywords": ["k"]}))),
        )
        .unwrap();
    env.svc.pipeline_next(run).unwrap().unwrap();
    env.svc.budget_pause(U, env.root, Some("hold on")).unwrap();
    let status = env
        .svc
        .pipeline_stage_end(run, 1, end(StageStatus::BudgetExhausted, None))
        .unwrap();
    assert_eq!(status, PipelineRunStatus::Paused);
    assert!(
        env.svc.pipeline_next(run).unwrap().is_none(),
        "a paused run waits"
    );
    env.svc.budget_resume(U, env.root).unwrap();
    let shown = env.svc.pipeline_show(U, run).unwrap();
    assert_eq!(shown.run.status, PipelineRunStatus::Running);
    assert_eq!(shown.stages_detail[1].status, StageStatus::Pending);
    assert_eq!(shown.stages_detail[1].attempts, 1, "its counts are kept");
    let again = env.svc.pipeline_next(run).unwrap().unwrap();
    assert_eq!(again.idx, 1, "the finished stage is not redone");
}

#[test]
fn issue31_a_stopped_run_takes_no_more_stages_and_keeps_what_it_stored() {
    let env = Env::new();
    let run = start(&env, json!("x"));
    env.svc.pipeline_next(run).unwrap().unwrap();
    env.svc
        .pipeline_stage_end(
            run,
            0,
            end(StageStatus::Ok, Some(json!({"keywords": ["k"]}))),
        )
        .unwrap();
    env.svc.pipeline_next(run).unwrap().unwrap();
    assert_kind(
        env.svc.pipeline_stop(env.agent(env.root), run),
        "permission_denied",
    );
    let stopped = env.svc.pipeline_stop(U, run).unwrap();
    assert_eq!(stopped.run.status, PipelineRunStatus::Stopped);
    assert!(
        stopped.stages_detail[0].artifact.is_some(),
        "what it stored stays"
    );
    assert!(env.svc.pipeline_next(run).unwrap().is_none());
    // The stage in flight cannot end after the stop, and its agent is gone.
    assert_kind(
        env.svc
            .pipeline_stage_end(run, 1, end(StageStatus::Ok, Some(json!({"tasks": ["t"]})))),
        "invalid_input",
    );
    assert!(
        env.svc
            .agents_live(U)
            .unwrap()
            .iter()
            .all(|a| a.handler != run)
    );
    assert_kind(env.svc.pipeline_stop(U, run), "invalid_input");
}

/// Several daemons on one store: a run's stage is taken under the run's
/// lease, so only one daemon drives it; when that daemon's lease lapses,
/// another takes the stage over (the first one's stage agent ends) and the
/// first one's late stage end changes nothing.
#[test]
fn issue33_a_run_is_driven_by_one_daemon_and_a_takeover_fences_the_old_one() {
    use agency_service::LeaseSpec;
    let spec = |owner: &str, ttl_ms| LeaseSpec {
        owner: owner.into(),
        ttl_ms,
    };
    let env = Env::new();
    let run = start(&env, json!("fix the login bug"));
    let (a, b) = (spec("daemon-a", 60_000), spec("daemon-b", 60_000));
    assert_eq!(env.svc.pipeline_claimable("daemon-a").unwrap(), [run]);

    let taken_a = env.svc.pipeline_next_as(run, Some(&a)).unwrap().unwrap();
    let la = taken_a.lease.unwrap();
    assert_eq!((la.handler, la.token), (run, 1));
    let agent_a = taken_a.agent.as_ref().unwrap().as_ref().unwrap().agent;
    assert!(env.svc.pipeline_next_as(run, Some(&b)).unwrap().is_none());
    assert_eq!(env.svc.pipeline_claimable("daemon-b").unwrap(), []);
    assert_eq!(env.svc.pipeline_claimable("daemon-a").unwrap(), [run]);

    // A stalls past its lease: B takes the stage over; A's stage agent ends.
    env.svc.lease_renew(&spec("daemon-a", 0)).unwrap();
    assert_eq!(env.svc.pipeline_claimable("daemon-b").unwrap(), [run]);
    let taken_b = env.svc.pipeline_next_as(run, Some(&b)).unwrap().unwrap();
    let lb = taken_b.lease.unwrap();
    assert_eq!((taken_b.idx, lb.token), (0, 2));
    let live: Vec<_> = env
        .svc
        .agents_live(U)
        .unwrap()
        .into_iter()
        .map(|a| a.id)
        .collect();
    assert!(!live.contains(&agent_a), "A's stage agent was ended");

    // A's late end is refused and changes nothing; B's is recorded.
    let keywords = json!({"keywords": ["login"]});
    assert_kind(
        env.svc.pipeline_stage_end_as(
            run,
            0,
            end(StageStatus::Ok, Some(json!({"keywords": ["from A"]}))),
            Some(la.token),
        ),
        "lease_lost",
    );
    let view = env.svc.pipeline_show(U, run).unwrap();
    assert_eq!(view.run.stage, 0, "A's end did not move the run");
    assert_eq!(
        env.svc
            .pipeline_stage_end_as(
                run,
                0,
                end(StageStatus::Ok, Some(keywords.clone())),
                Some(lb.token)
            )
            .unwrap(),
        PipelineRunStatus::Running
    );
    let next = env.svc.pipeline_next_as(run, Some(&b)).unwrap().unwrap();
    assert_eq!(next.idx, 1);
    assert_eq!(next.context["Observer"], keywords, "B's artifact, not A's");
}
