//! A pipeline's score trend (`Service::pipeline_scores`): the
//! Gatekeeper's scorecard of each run that ended, newest first, per
//! pipeline or of all, bounded, with Correctness and Safety judged; runs
//! still going and runs no stage scored are left out; only the user reads
//! it.

use agency_core::HandlerId;
use agency_core::Principal;
use agency_core::status::PipelineRunStatus;
use agency_org::model::SourceRef;
use agency_org::pipeline::{PIPELINE_VERSION, PipelineModel};
use agency_service::pipelines::PipelineStart;
use serde_json::{Value, json};

use crate::support::{Env, assert_kind, llm_stage, stage_ok};

/// Pipeline `name`: an Observer, a Gatekeeper, then a Learner.
fn model(name: &str) -> PipelineModel {
    PipelineModel {
        version: PIPELINE_VERSION.to_owned(),
        name: name.to_owned(),
        description: String::new(),
        input_schema: json!({"type": "string"}),
        stages: vec![
            llm_stage("Observer"),
            llm_stage("Gatekeeper"),
            llm_stage("Learner"),
        ],
        source: SourceRef {
            file: "scores.pipeline".to_owned(),
            line: 1,
        },
        source_hash: "x".to_owned(),
    }
}

fn start(env: &Env, pipeline: &str) -> HandlerId {
    env.clock.advance_millis(1000);
    env.svc
        .pipeline_start(
            Principal::User,
            PipelineStart {
                model: model(pipeline),
                input: json!("add a route"),
                level: 0,
                live_tools: false,
            },
        )
        .unwrap()
        .run
        .id
}

/// Stage `idx` of `run` ends with `artifact`.
fn end(env: &Env, run: HandlerId, idx: usize, artifact: Value) -> PipelineRunStatus {
    let next = env.svc.pipeline_next(run).unwrap().unwrap();
    assert_eq!(next.idx, idx);
    let mut e = stage_ok(artifact);
    e.agent = next.agent.and_then(|a| a.ok()).map(|m| m.agent);
    env.svc.pipeline_stage_end(run, idx, e).unwrap()
}

/// A run of `pipeline` to its end, its Gatekeeper answering `gate`.
fn run(env: &Env, pipeline: &str, gate: Value) -> HandlerId {
    let run = start(env, pipeline);
    end(env, run, 0, json!({"summary": "a route"}));
    end(env, run, 1, gate);
    let learned = json!({"reflection": "r", "candidateLessons": []});
    assert_eq!(end(env, run, 2, learned), PipelineRunStatus::Done);
    run
}

fn card(c: i64, v: i64, s: i64, cl: i64, a: i64) -> Value {
    json!({"scorecard": {"correctness": c, "verification": v, "safety": s,
                         "clarity": cl, "autonomy": a},
           "totalScore": c + v + s + cl + a})
}

#[test]
fn a_pipelines_scores_are_its_ended_runs_scorecards_newest_first() {
    let env = Env::new();
    let good = run(&env, "trend", card(5, 4, 5, 4, 3));
    let unsafe_run = run(&env, "trend", card(4, 4, 2, 4, 4));
    let other = run(&env, "other", card(3, 3, 3, 3, 3));
    let wrong = run(&env, "trend", card(1, 5, 5, 5, 5));
    // Done, but no stage scored it: not in the trend.
    let unscored = run(&env, "trend", json!({"decision": "approve"}));
    // Scored, but still going (its Learner has not answered): not in the
    // trend until it ends.
    let going = start(&env, "trend");
    end(&env, going, 0, json!({"summary": "a route"}));
    end(&env, going, 1, card(5, 5, 5, 5, 5));

    let trend = env
        .svc
        .pipeline_scores(Principal::User, Some("trend"), None)
        .unwrap();
    let ids: Vec<HandlerId> = trend.iter().map(|s| s.run).collect();
    assert_eq!(ids, [wrong, unsafe_run, good], "{trend:#?}");
    assert!(!ids.contains(&unscored) && !ids.contains(&going));

    let g = &trend[2];
    assert_eq!(g.pipeline, "trend");
    assert_eq!(g.status, PipelineRunStatus::Done);
    assert_eq!(
        (
            g.total,
            g.correctness,
            g.verification,
            g.safety,
            g.clarity,
            g.autonomy
        ),
        (21, 5, 4, 5, 4, 3)
    );
    assert!(g.correctness_pass && g.safety_pass);
    assert!(g.ended_at.is_some());
    // A failing Safety or Correctness is marked whatever the total.
    assert_eq!(trend[1].total, 18);
    assert!(trend[1].correctness_pass && !trend[1].safety_pass);
    assert_eq!(trend[0].total, 21);
    assert!(!trend[0].correctness_pass && trend[0].safety_pass);

    // Every pipeline's, newest first; bounded by the limit.
    let all = env
        .svc
        .pipeline_scores(Principal::User, None, None)
        .unwrap();
    let ids: Vec<HandlerId> = all.iter().map(|s| s.run).collect();
    assert_eq!(ids, [wrong, other, unsafe_run, good]);
    let one = env
        .svc
        .pipeline_scores(Principal::User, None, Some(1))
        .unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].run, wrong);
    assert!(
        env.svc
            .pipeline_scores(Principal::User, Some("nope"), None)
            .unwrap()
            .is_empty()
    );

    // Only the user reads it.
    let agent = env.agent(env.svc.root_handler().unwrap().unwrap());
    assert_kind(
        env.svc.pipeline_scores(agent, None, None),
        "permission_denied",
    );
}
