//! Issue 31 items 1-2, agent stages: a pipeline stage of kind `agent` is
//! a typed call from the run's handler to an organisation agent's verb.
//! A run whose agent stages do not fit the organisations that are up is
//! refused at start (file:line of the stage); the run may call exactly
//! its stages' agents, the connections ending with the run; the call is
//! made once per stage, whatever restarts; the input is checked before
//! sending; a bad answer is refused to the callee while the stage keeps
//! waiting; the checked answer becomes the stage's artifact.

use agency_core::status::{PipelineRunStatus, StageStatus};
use agency_core::{HandlerId, MailTarget, Principal};
use agency_org::pipeline::{PipelineModel, compile_pipeline_str};
use agency_service::pipelines::{PipelineStart, StageCall, StageEnd};
use agency_service::{CallAnswer, CallRequest, MailBody, OrgPlan, ServiceError};
use serde_json::{Value, json};

use crate::orgs_up::model;
use crate::support::{Env, assert_kind};

const U: Principal = Principal::User;

fn agent(name: &str, connections: &[&str], verbs: Value) -> Value {
    json!({"name": name, "title": name, "connections": connections, "verbs": verbs,
           "source": {"file": format!("{name}.agent"), "line": 1}})
}

/// front over worker (verb `summarise`) and helper (verb `lookup`).
fn org() -> Value {
    let summarise = json!({"name": "summarise",
        "input": {"type": "object", "required": ["text"], "additionalProperties": false,
                  "properties": {"text": {"type": "string", "minLength": 1}}},
        "output": {"type": "object", "required": ["summary"],
                   "properties": {"summary": {"type": "string", "maxLength": 40}}}});
    let lookup = json!({"name": "lookup", "input": {"type": "object"},
        "output": {"type": "object", "properties": {"n": {"type": "integer"}}}});
    json!({
        "name": "Calls", "type": "Agency", "executiveAgent": "front",
        "agents": [agent("front", &[], json!([])),
                   agent("worker", &[], json!([summarise])),
                   agent("helper", &[], json!([lookup]))],
        "source": {"file": "agents.json", "line": 1}
    })
}

/// Line 12 is the agent stage.
const PIPELINE: &str = r#"---
pipeline: summed
input:
  type: object
  required: [text]
  properties: {text: {type: string}}
stages:
  - name: Read
    kind: code
    step: retriever
    output: {type: object}
  - name: Sum
    kind: agent
    agent: worker
    verb: summarise
    reads: [input.text]
    output: {type: object, required: [summary], properties: {summary: {type: string, maxLength: 40}}}
---
"#;

fn pipeline(text: &str) -> PipelineModel {
    compile_pipeline_str("p/summed.pipeline", text).unwrap_or_else(|e| panic!("{e}"))
}

struct World {
    env: Env,
    plan: OrgPlan,
}

impl World {
    fn new() -> World {
        let env = Env::new();
        let plan = env.svc.org_apply(U, &model(org()), false).unwrap();
        World { env, plan }
    }

    fn h(&self, name: &str) -> HandlerId {
        self.plan
            .agents
            .iter()
            .find(|a| a.agent == name)
            .and_then(|a| a.handler)
            .unwrap()
    }

    fn start(&self, text: &str, input: Value) -> Result<HandlerId, ServiceError> {
        self.env
            .svc
            .pipeline_start(
                U,
                PipelineStart {
                    model: pipeline(text),
                    input,
                    level: 0,
                    live_tools: false,
                },
            )
            .map(|v| v.run.id)
    }

    /// Run `run` past its first (code) stage to the agent stage.
    fn to_agent_stage(&self, run: HandlerId) {
        let next = self.env.svc.pipeline_next(run).unwrap().unwrap();
        assert_eq!(next.idx, 0);
        let end = ok_end(json!({}));
        self.env.svc.pipeline_stage_end(run, 0, end).unwrap();
        let next = self.env.svc.pipeline_next(run).unwrap().unwrap();
        assert_eq!(next.idx, 1);
        assert!(
            next.agent.is_none(),
            "an agent stage is handed out without an agent"
        );
    }

    /// The typed-call requests in `name`'s inbox.
    fn requests(&self, name: &str) -> Vec<String> {
        self.env
            .svc
            .mail_inbox(self.env.agent(self.h(name)), None)
            .unwrap()
            .into_iter()
            .map(|m| m.subject)
            .filter(|s| s.starts_with("call "))
            .collect()
    }
}

fn ok_end(artifact: Value) -> StageEnd {
    StageEnd {
        status: StageStatus::Ok,
        artifact: Some(artifact),
        attempts: 1,
        input_tokens: 0,
        output_tokens: 0,
        cost_micro_usd: 0,
        report: json!({}),
        error: None,
        agent: None,
    }
}

#[test]
fn issue31_an_agent_stage_is_one_typed_call_whose_checked_answer_becomes_the_artifact() {
    let w = World::new();
    let run = w
        .start(PIPELINE, json!({"text": "a long story about a login bug"}))
        .unwrap();
    w.to_agent_stage(run);
    let call = |w: &World| w.env.svc.pipeline_stage_call(run, 1).unwrap();
    assert_eq!(call(&w), StageCall::NotSent);

    let input = json!({"text": "a long story about a login bug"});
    let sent = w
        .env
        .svc
        .pipeline_stage_call_send(run, 1, &input)
        .unwrap()
        .unwrap();
    assert_eq!(sent.callee, w.h("worker"));
    assert_eq!(
        sent.request_id,
        agency_service::pipelines::stage_call_id(run, 1)
    );
    // Handed out again (an engine that lost track): no second call.
    assert!(
        w.env
            .svc
            .pipeline_stage_call_send(run, 1, &input)
            .unwrap()
            .is_none()
    );
    assert_eq!(w.requests("worker").len(), 1);
    assert!(
        matches!(call(&w), StageCall::Pending { .. }),
        "{:?}",
        call(&w)
    );
    // The caller's agent lived for the send only.
    assert!(
        w.env
            .svc
            .agents_live(U)
            .unwrap()
            .iter()
            .all(|a| a.handler != run),
        "the stage's calling agent was ended"
    );

    // A restart while the stage waits: handed out again, it finds its
    // call and sends nothing.
    let World { env, plan } = w;
    let w = World {
        env: env.reopen(),
        plan,
    };
    let next = w.env.svc.pipeline_next(run).unwrap().unwrap();
    assert_eq!(next.idx, 1);
    assert!(matches!(call(&w), StageCall::Pending { .. }));
    assert!(
        w.env
            .svc
            .pipeline_stage_call_send(run, 1, &input)
            .unwrap()
            .is_none()
    );
    assert_eq!(w.requests("worker").len(), 1);

    // A bad answer is refused to the callee with its issues; the stage
    // keeps waiting; a corrected one answers it.
    let worker = w.env.agent(w.h("worker"));
    let id = sent.request_id;
    let bad = json!({"summary": "x".repeat(41)});
    let e = assert_kind(
        w.env.svc.agent_reply(worker, id, CallAnswer::Output(&bad)),
        "schema_violation",
    );
    let ServiceError::SchemaViolation { issues, .. } = &e else {
        unreachable!()
    };
    assert_eq!(
        issues
            .iter()
            .map(|i| (i.instance_path.as_str(), i.keyword.as_str()))
            .collect::<Vec<_>>(),
        [("/summary", "maxLength")]
    );
    assert!(matches!(call(&w), StageCall::Pending { .. }));
    let good = json!({"summary": "login bug story"});
    w.env
        .svc
        .agent_reply(worker, id, CallAnswer::Output(&good))
        .unwrap();
    assert_eq!(
        call(&w),
        StageCall::Answered {
            output: good.clone()
        }
    );

    // The engine stores the answer as the artifact; the run is done.
    let status = w.env.svc.pipeline_stage_end(run, 1, ok_end(good)).unwrap();
    assert_eq!(status, PipelineRunStatus::Done);
    let view = w.env.svc.pipeline_show(U, run).unwrap();
    assert_eq!(view.stages_detail[1].status, StageStatus::Ok);
    assert!(view.stages_detail[1].artifact.is_some());

    // The connections lived as long as the run: the callee can no longer
    // write to the run's handler.
    let e = assert_kind(
        w.env.svc.mail_send(
            worker,
            MailTarget::Handler(run),
            &MailBody::Text {
                subject: None,
                text: "late".into(),
            },
        ),
        "permission_denied",
    );
    assert!(e.to_string().contains("failed to send mail"), "{e}");
}

#[test]
fn issue31_an_agent_stage_input_off_the_verbs_schema_is_refused_before_sending() {
    let w = World::new();
    let run = w.start(PIPELINE, json!({"text": ""})).unwrap();
    w.to_agent_stage(run);
    let e = assert_kind(
        w.env
            .svc
            .pipeline_stage_call_send(run, 1, &json!({"text": ""})),
        "schema_violation",
    );
    let ServiceError::SchemaViolation { issues, .. } = &e else {
        unreachable!()
    };
    assert_eq!(issues[0].instance_path, "/text");
    assert_eq!(issues[0].keyword, "minLength");
    assert_eq!(
        w.requests("worker"),
        Vec::<String>::new(),
        "nothing was sent"
    );
    assert_eq!(
        w.env.svc.pipeline_stage_call(run, 1).unwrap(),
        StageCall::NotSent
    );
}

#[test]
fn issue31_an_error_answer_is_the_stages_failure() {
    let w = World::new();
    let run = w.start(PIPELINE, json!({"text": "t"})).unwrap();
    w.to_agent_stage(run);
    let sent = w
        .env
        .svc
        .pipeline_stage_call_send(run, 1, &json!({"text": "t"}))
        .unwrap()
        .unwrap();
    let worker = w.env.agent(w.h("worker"));
    w.env
        .svc
        .agent_reply(
            worker,
            sent.request_id,
            CallAnswer::Error("the text is too short"),
        )
        .unwrap();
    assert_eq!(
        w.env.svc.pipeline_stage_call(run, 1).unwrap(),
        StageCall::Failed {
            error: "the text is too short".into()
        }
    );
}

#[test]
fn issue31_a_run_whose_agent_stage_does_not_fit_the_organisation_is_refused_at_start() {
    let w = World::new();
    let cases = [
        (
            "agent: worker",
            "agent: wroker",
            "stage `Sum` calls agent `wroker`, which no organisation that is up has; did you mean `worker`?",
        ),
        (
            "verb: summarise",
            "verb: lookup",
            "calls verb `lookup` of agent `worker` (organisation Calls), which the agent does not declare",
        ),
        (
            "maxLength: 40",
            "maxLength: 41",
            "differs from the output schema of verb `summarise`",
        ),
    ];
    for (from, to, want) in cases {
        let text = PIPELINE.replace(from, to);
        let e = assert_kind(w.start(&text, json!({"text": "t"})), "invalid_input");
        let m = e.to_string();
        assert!(m.contains("p/summed.pipeline:12:1: error: "), "{to}: {m}");
        assert!(m.contains(want), "{to}: {m}");
    }
    assert!(
        w.env.svc.pipeline_runs(U, false, None).unwrap().is_empty(),
        "no run was created"
    );
    // Without the organisation, the same pipeline does not start.
    let bare = Env::new();
    let e = bare
        .svc
        .pipeline_start(
            U,
            PipelineStart {
                model: pipeline(PIPELINE),
                input: json!({"text": "t"}),
                level: 0,
                live_tools: false,
            },
        )
        .unwrap_err();
    assert!(e.to_string().contains("no organisation is up"), "{e}");
}

#[test]
fn issue31_a_run_calls_only_its_stages_agents() {
    let w = World::new();
    let run = w.start(PIPELINE, json!({"text": "t"})).unwrap();
    let as_run = w.env.agent(run);
    let call = |target: HandlerId, verb: &str| {
        w.env.svc.agent_call(
            as_run,
            &CallRequest {
                target: &target.to_string(),
                verb,
                input: &json!({}),
                steps: None,
                within: None,
            },
        )
    };
    // helper's verb is outside the run's connections: refused like mail.
    assert_kind(call(w.h("helper"), "lookup"), "permission_denied");
    assert_eq!(w.requests("helper"), Vec::<String>::new());
    // A run without agent stages is granted nothing.
    let plain = PIPELINE.replace(
        "    kind: agent\n    agent: worker\n    verb: summarise\n",
        "    kind: code\n    step: retriever\n",
    );
    let other = w.start(&plain, json!({"text": "t"})).unwrap();
    let e = w.env.svc.agent_call(
        w.env.agent(other),
        &CallRequest {
            target: &w.h("worker").to_string(),
            verb: "summarise",
            input: &json!({"text": "t"}),
            steps: None,
            within: None,
        },
    );
    assert_kind(e, "permission_denied");
    // Nor may an agent of the run reach the pipeline engine's own calls:
    // the stage's call id answers only to the callee.
    let helper = w.env.agent(w.h("helper"));
    let id = agency_service::pipelines::stage_call_id(run, 1);
    assert_kind(
        w.env
            .svc
            .agent_reply(helper, id, CallAnswer::Output(&json!({}))),
        "not_found",
    );
}
