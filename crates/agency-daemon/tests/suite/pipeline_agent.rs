//! Issue 31 items 1-2 against a real daemon (port 0) and MCP clients
//! holding agent tokens: typed calls between organisation agents
//! (`agent_call`, `agent_reply`, `mail_wait {conversation}`), and a
//! pipeline's `agent` stage run by the daemon's engine as a typed call
//! that the callee answers over MCP: a bad answer is refused to it while
//! the stage waits, the checked answer becomes the stage's artifact, and
//! an error answer fails the stage with the callee's message.

#![allow(clippy::unwrap_used)]

use crate::fixture;
use crate::org_client::{failed, text};

use std::sync::Arc;

use agency_core::status::{PipelineRunStatus, StageStatus};
use agency_core::{HandlerId, Principal};
use agency_daemon::Daemon;
use agency_service::System;
use agency_service::pipelines::{PipelineStart, StageCall, stage_call_id};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

type Client = RunningService<RoleClient, ()>;

const PIPELINE: &str = r#"---
pipeline: summed
input: {type: object, required: [text], properties: {text: {type: string}}}
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
    output: {type: object, required: [summary], properties: {summary: {type: string, maxLength: 40}, at: {type: string, format: date-time}}}
    stamp: {at: now}
---
"#;

struct Fx {
    _dir: tempfile::TempDir,
    daemon: Daemon,
    svc: Arc<System>,
    main: Client,
    worker: Client,
}

fn agent(name: &str, connections: &[&str], verbs: Value) -> Value {
    json!({"name": name, "title": name, "connections": connections, "verbs": verbs,
           "source": {"file": format!("{name}.agent"), "line": 1}})
}

impl Fx {
    /// A daemon with an organisation where main may call worker's
    /// `summarise`, and MCP clients for both agents.
    async fn start() -> Fx {
        let (dir, home) = fixture::home_with_config("[agents]\nsandbox = \"off\"\n");
        let (daemon, svc, _root) = fixture::start(&home).await;
        let summarise = json!({"name": "summarise",
            "input": {"type": "object", "required": ["text"], "additionalProperties": false,
                      "properties": {"text": {"type": "string", "minLength": 1}}},
            "output": {"type": "object", "required": ["summary"],
                       "properties": {"summary": {"type": "string", "maxLength": 40},
                                      "at": {"type": "string", "format": "date-time"}}}});
        let model: agency_org::AgencyModel = serde_json::from_value(json!({
            "name": "Calls", "type": "Agency", "executiveAgent": "front",
            "agents": [agent("front", &[], json!([])), agent("main", &["worker"], json!([])),
                       agent("worker", &[], json!([summarise]))],
            "source": {"file": "agents.json", "line": 1}
        }))
        .unwrap();
        let plan = svc.org_apply(Principal::User, &model, false).unwrap();
        let h = |n: &str| -> HandlerId {
            plan.agents
                .iter()
                .find(|a| a.agent == n)
                .and_then(|a| a.handler)
                .unwrap()
        };
        let main = client(&daemon, &svc, h("main")).await;
        let worker = client(&daemon, &svc, h("worker")).await;
        Fx {
            _dir: dir,
            daemon,
            svc,
            main,
            worker,
        }
    }

    async fn stop(self) {
        let _ = self.main.cancel().await;
        let _ = self.worker.cancel().await;
        self.daemon.stop().await.unwrap();
    }
}

/// An MCP client with a token minted for `h`'s agent (a live agent, so
/// the daemon spawns none for it).
async fn client(daemon: &Daemon, svc: &System, h: HandlerId) -> Client {
    let minted = svc.token_mint(Principal::User, h, None).unwrap();
    let cfg =
        StreamableHttpClientTransportConfig::with_uri(format!("http://{}/mcp", daemon.addr()))
            .auth_header(minted.token.clone());
    ().serve(StreamableHttpClientTransport::from_config(cfg))
        .await
        .unwrap()
}

async fn call(c: &Client, tool: &str, args: Value) -> CallToolResult {
    let Value::Object(args) = args else { panic!() };
    c.call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .unwrap_or_else(|e| panic!("{tool}: protocol error {e}"))
}

#[track_caller]
fn ok(r: &CallToolResult) -> Value {
    let t = text(r);
    assert_ne!(r.is_error, Some(true), "{t}");
    serde_json::from_str(&t).unwrap_or_else(|_| panic!("not JSON: {t}"))
}

fn start_run(svc: &System, text: &str) -> HandlerId {
    let model = agency_org::pipeline::compile_pipeline_str("summed.pipeline", PIPELINE).unwrap();
    svc.pipeline_start(
        Principal::User,
        PipelineStart {
            model,
            input: json!({ "text": text }),
            level: 0,
            live_tools: false,
        },
    )
    .unwrap()
    .run
    .id
}

/// Wait until the daemon's engine has sent stage `idx`'s call.
async fn call_sent(svc: &System, run: HandlerId, idx: usize) {
    fixture::wait_for("the agent stage's call", || {
        matches!(
            svc.pipeline_stage_call(run, idx).unwrap(),
            StageCall::Pending { .. }
        )
        .then_some(())
    })
    .await;
}

async fn run_ended(svc: &System, run: HandlerId) -> agency_service::pipelines::PipelineRunView {
    fixture::wait_for("the run's end", || {
        let v = svc.pipeline_show(Principal::User, run).unwrap();
        (!v.run.status.is_unfinished()).then_some(v)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue31_typed_calls_over_mcp_through_the_daemon_call_reply_and_wait_by_conversation() {
    let f = Fx::start().await;
    let sent = ok(&call(
        &f.main,
        "agent_call",
        json!({"target": "worker", "verb": "summarise", "input": {"text": "a long story"}}),
    )
    .await);
    let id = sent["request_id"].as_str().unwrap().to_owned();
    let conversation = sent["conversation_id"].as_str().unwrap().to_owned();
    let r = ok(&call(&f.worker, "mail_wait", json!({"timeout_ms": 60000})).await);
    assert_eq!(r["status"], "mail", "{r}");

    // A bad answer is refused to the callee with its issues; a good one
    // reaches the caller, who waits for it by the conversation.
    let r = call(
        &f.worker,
        "agent_reply",
        json!({"request_id": id, "output": {"summary": 7}}),
    )
    .await;
    let t = failed(&r, "schema_violation");
    assert!(t.contains(r#""instancePath":"/summary""#), "{t}");
    let replied = ok(&call(
        &f.worker,
        "agent_reply",
        json!({"request_id": id, "output": {"summary": "short"}}),
    )
    .await);
    let r = ok(&call(
        &f.main,
        "mail_wait",
        json!({"conversation": conversation, "timeout_ms": 60000}),
    )
    .await);
    assert_eq!(r["status"], "mail", "{r}");
    assert_eq!(r["messages"][0]["id"], replied["message"]);
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue31_an_agent_stage_runs_as_a_typed_call_the_callee_answers_over_mcp() {
    let f = Fx::start().await;
    let run = start_run(&f.svc, "the login bug, at length");
    call_sent(&f.svc, run, 1).await;
    let id = stage_call_id(run, 1).to_string();
    // The request reached the callee with the stage's input.
    let inbox = ok(&call(&f.worker, "mail_inbox", json!({})).await);
    let body = inbox["messages"][0]["body"].as_str().unwrap();
    assert!(
        body.contains(&id) && body.contains("the login bug, at length"),
        "{body}"
    );

    let r = call(
        &f.worker,
        "agent_reply",
        json!({"request_id": id, "output": {"summary": "x".repeat(41)}}),
    )
    .await;
    failed(&r, "schema_violation");
    // Refused: the stage still waits for an answer.
    assert!(matches!(
        f.svc.pipeline_stage_call(run, 1).unwrap(),
        StageCall::Pending { .. }
    ));
    assert_eq!(
        f.svc
            .pipeline_show(Principal::User, run)
            .unwrap()
            .run
            .status,
        PipelineRunStatus::Running
    );
    ok(&call(
        &f.worker,
        "agent_reply",
        json!({"request_id": id, "output": {"summary": "login bug"}}),
    )
    .await);
    let v = run_ended(&f.svc, run).await;
    assert_eq!(v.run.status, PipelineRunStatus::Done, "{v:?}");
    let stage = &v.stages_detail[1];
    assert_eq!(
        (stage.kind.as_str(), stage.status),
        ("agent", StageStatus::Ok)
    );
    let file = stage.artifact.unwrap();
    let content = f.svc.kb_read(Principal::User, file).unwrap();
    let artifact: Value = serde_json::from_slice(&content.content).unwrap();
    // The answer, with the stage's stamp over it.
    assert_eq!(artifact["summary"], "login bug", "{artifact}");
    assert!(
        artifact["at"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{artifact}"
    );
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue31_an_error_answer_fails_the_agent_stage_with_the_callees_message() {
    let f = Fx::start().await;
    let run = start_run(&f.svc, "t");
    call_sent(&f.svc, run, 1).await;
    let id = stage_call_id(run, 1).to_string();
    ok(&call(
        &f.worker,
        "agent_reply",
        json!({"request_id": id, "error": "cannot summarise one letter"}),
    )
    .await);
    let v = run_ended(&f.svc, run).await;
    assert_eq!(v.run.status, PipelineRunStatus::Failed);
    let stage = &v.stages_detail[1];
    assert_eq!(stage.status, StageStatus::FailedInfra);
    assert!(stage.artifact.is_none());
    let error = stage.error.as_deref().unwrap_or_default();
    assert!(error.contains("cannot summarise one letter"), "{error}");
    f.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue31_an_agent_stage_unanswered_within_its_timeout_fails_and_sends_once() {
    let f = Fx::start().await;
    let text = PIPELINE.replace(
        "    stamp: {at: now}",
        "    stamp: {at: now}\n    budget: {timeout_seconds: 1}",
    );
    let model = agency_org::pipeline::compile_pipeline_str("summed.pipeline", &text).unwrap();
    let run = f
        .svc
        .pipeline_start(
            Principal::User,
            PipelineStart {
                model,
                input: json!({ "text": "never answered" }),
                level: 0,
                live_tools: false,
            },
        )
        .unwrap()
        .run
        .id;
    let v = run_ended(&f.svc, run).await;
    assert_eq!(v.run.status, PipelineRunStatus::Failed);
    let stage = &v.stages_detail[1];
    assert_eq!(stage.status, StageStatus::FailedInfra);
    let error = stage.error.as_deref().unwrap_or_default();
    assert!(
        error.contains("did not answer verb summarise within 1 s"),
        "{error}"
    );
    // One request, however often the engine looked.
    let inbox = ok(&call(&f.worker, "mail_inbox", json!({})).await);
    assert_eq!(inbox["messages"].as_array().unwrap().len(), 1, "{inbox}");
    f.stop().await;
}
