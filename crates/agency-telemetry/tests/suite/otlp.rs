//! Issue 30 items 6 and 7: a two-level delegation run through the service
//! (the root's agent and its underling's each make a model call and a
//! tool call) is exported over OTLP/HTTP to a receiver on 127.0.0.1, which
//! decodes the protobuf bodies; the spans' names, attributes, trace ids,
//! parent links and times are checked, and the metrics decoded.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agency_config::telemetry::{Semconv, TelemetryConfig};
use agency_core::{AgentId, HandlerId, Principal, Timestamp};
use agency_service::{
    ManualClock, ModelCallRequest, ModelCallResult, NewOutcome, Service, System, TokenUsage,
    ToolStep,
};
use agency_store::{FsBlobStore, SqliteStore};
use agency_telemetry::Exporter;
use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value::Value};
use opentelemetry_proto::tonic::metrics::v1::{Metric, metric::Data, number_data_point};
use opentelemetry_proto::tonic::trace::v1::{
    Span, span::SpanKind, status::StatusCode as SpanStatus,
};
use prost::Message;

#[derive(Default)]
struct Received {
    spans: Vec<Span>,
    metrics: Vec<Metric>,
    /// Answers of 503 given (the first traces POST is refused once).
    refused: usize,
    bad_requests: Vec<String>,
}

type Shared = Arc<Mutex<Received>>;

fn check_headers(h: &HeaderMap, r: &mut Received) {
    if h.get("content-type").and_then(|v| v.to_str().ok()) != Some("application/x-protobuf") {
        r.bad_requests
            .push(format!("content-type {:?}", h.get("content-type")));
    }
    if h.get("x-test").and_then(|v| v.to_str().ok()) != Some("yes") {
        r.bad_requests.push("configured header missing".to_owned());
    }
}

async fn traces(State(r): State<Shared>, h: HeaderMap, body: bytes::Bytes) -> StatusCode {
    let mut r = r.lock().unwrap();
    if r.refused == 0 {
        r.refused += 1;
        return StatusCode::SERVICE_UNAVAILABLE;
    }
    check_headers(&h, &mut r);
    let Ok(req) = ExportTraceServiceRequest::decode(body) else {
        r.bad_requests.push("undecodable traces body".to_owned());
        return StatusCode::BAD_REQUEST;
    };
    for rs in req.resource_spans {
        let res = rs.resource.unwrap_or_default();
        if attr(&res.attributes, "service.name") != Some(Value::StringValue("garden".into())) {
            r.bad_requests.push("service.name missing".to_owned());
        }
        for ss in rs.scope_spans {
            r.spans.extend(ss.spans);
        }
    }
    StatusCode::OK
}

async fn metrics(State(r): State<Shared>, h: HeaderMap, body: bytes::Bytes) -> StatusCode {
    let mut r = r.lock().unwrap();
    check_headers(&h, &mut r);
    let Ok(req) = ExportMetricsServiceRequest::decode(body) else {
        r.bad_requests.push("undecodable metrics body".to_owned());
        return StatusCode::BAD_REQUEST;
    };
    for rm in req.resource_metrics {
        for sm in rm.scope_metrics {
            r.metrics.extend(sm.metrics);
        }
    }
    StatusCode::OK
}

async fn receiver() -> (String, Shared) {
    let shared = Shared::default();
    let app = Router::new()
        .route("/v1/traces", post(traces))
        .route("/v1/metrics", post(metrics))
        .with_state(shared.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), shared)
}

fn attr(attrs: &[KeyValue], key: &str) -> Option<Value> {
    attrs
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.clone()?.value)
}

fn str_attr(sp: &Span, key: &str) -> String {
    match attr(&sp.attributes, key) {
        Some(Value::StringValue(s)) => s,
        other => panic!("{}: {key} is {other:?}", sp.name),
    }
}

fn int_attr(sp: &Span, key: &str) -> i64 {
    match attr(&sp.attributes, key) {
        Some(Value::IntValue(i)) => i,
        other => panic!("{}: {key} is {other:?}", sp.name),
    }
}

fn model_call(svc: &System, clock: &ManualClock, who: Principal, model: &str, input: i64) {
    let res = svc
        .model_call_reserve(
            who,
            ModelCallRequest {
                upstream: "main".into(),
                api: "anthropic".into(),
                model: model.into(),
                stream: true,
                max_tokens: 100,
                input_estimate: 10,
                worst_cost_micro_usd: 0,
                priced: true,
            },
        )
        .unwrap();
    clock.advance_millis(1500);
    svc.model_call_settle(
        res,
        ModelCallResult {
            status: 200,
            usage: TokenUsage {
                input_tokens: input,
                output_tokens: 22,
                cache_read_tokens: 3,
                cache_write_tokens: 2,
            },
            cost_micro_usd: 1234,
            estimated: false,
        },
    )
    .unwrap();
}

fn tool_call(svc: &System, clock: &ManualClock, who: Principal, tool: &str, fail: bool) {
    clock.advance_millis(40);
    svc.record_tool_call(
        who,
        ToolStep {
            tool: tool.into(),
            args_digest: agency_service::args_digest(&serde_json::json!({"path": "beds"})),
            error_kind: fail.then(|| "denied".to_owned()),
            error: fail.then(|| "not allowed".to_owned()),
            duration_ms: 30,
            call_id: Some(format!("toolu_{tool}")),
            at_admission: false,
        },
    )
    .unwrap();
    svc.flush_read_audit().unwrap();
}

struct Story {
    root: HandlerId,
    under: HandlerId,
    garden: agency_core::OutcomeId,
    boss: AgentId,
    underling: AgentId,
}

/// The root's agent calls its model and a tool, delegates "Garden
/// planned"; the underling's agent calls its model and a tool (refused);
/// both runs end.
fn story(svc: &System, clock: &ManualClock, root: HandlerId) -> Story {
    let boss = svc.agent_start(root).unwrap();
    let ra = Principal::agent(root, boss);
    clock.advance_millis(100);
    model_call(svc, clock, ra, "claude-boss", 11);
    tool_call(svc, clock, ra, "kb_read", false);
    let garden = svc
        .outcome_create(
            ra,
            &NewOutcome {
                title: "Garden planned".into(),
                description: String::new(),
                parents: vec![root.root()],
                priority: 0,
            },
        )
        .unwrap();
    let under = svc.delegate(ra, garden, &[]).unwrap().handler;
    clock.advance_millis(100);
    let underling = svc.agent_start(under).unwrap();
    let ua = Principal::agent(under, underling);
    clock.advance_millis(100);
    model_call(svc, clock, ua, "claude-under", 5);
    tool_call(svc, clock, ua, "bash", true);
    clock.advance_millis(100);
    svc.agent_end(underling, "exited").unwrap();
    clock.advance_millis(100);
    svc.agent_end(boss, "exited").unwrap();
    Story {
        root,
        under,
        garden,
        boss,
        underling,
    }
}

fn config(base: &str, semconv: Semconv) -> TelemetryConfig {
    TelemetryConfig {
        traces_url: format!("{base}/v1/traces"),
        metrics_url: format!("{base}/v1/metrics"),
        headers: vec![("x-test".into(), "yes".into())],
        service_name: "garden".into(),
        capture_content: false,
        semconv,
        // Metrics are exported once more at shutdown, which the test waits
        // for: no timer is relied on.
        metrics_interval: Duration::from_secs(3600),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue30_a_two_level_delegation_is_exported_as_one_trace_over_otlp_http() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(Timestamp(1_800_000_000_000)));
    let store = Arc::new(SqliteStore::open(&dir.path().join("agency.db")).unwrap());
    let blobs = Arc::new(FsBlobStore::open(dir.path().join("blobs")).unwrap());
    let sys = Arc::new(Service::builder(store, blobs, clock.clone()).build());
    let root = sys.bootstrap().unwrap();
    let (base, got) = receiver().await;
    let cursor = dir.path().join("telemetry.cursor");

    let exporter = Exporter::start(
        sys.service().clone(),
        config(&base, Semconv::Pinned),
        cursor.clone(),
    )
    .unwrap();
    let s = story(&sys, &clock, root);
    exporter.shutdown(Duration::from_secs(60)).await;

    let got = std::mem::take(&mut *got.lock().unwrap());
    assert!(got.bad_requests.is_empty(), "{:?}", got.bad_requests);
    assert_eq!(
        got.refused, 1,
        "the 503 was answered, and the batch retried"
    );
    let spans = got.spans;
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(spans.len(), 6, "{names:?}");
    let by_agent = |op: &str, agent: AgentId| -> Vec<&Span> {
        spans
            .iter()
            .filter(|sp| str_attr(sp, "gen_ai.operation.name") == op)
            .filter(|sp| {
                let invoke_of_agent =
                    op == "invoke_agent" && str_attr(sp, "gen_ai.agent.id") == agent.to_string();
                let h = if agent == s.boss { s.root } else { s.under };
                invoke_of_agent
                    || (op != "invoke_agent" && str_attr(sp, "agency.handler.id") == h.to_string())
            })
            .collect()
    };
    let boss = by_agent("invoke_agent", s.boss)[0];
    let under = by_agent("invoke_agent", s.underling)[0];

    // The underling's run is the boss run's child, in the boss's trace.
    assert_eq!(under.name, "invoke_agent Garden planned");
    assert_eq!(under.trace_id, boss.trace_id);
    assert_eq!(under.parent_span_id, boss.span_id);
    assert!(
        boss.parent_span_id.is_empty(),
        "the root's run starts the trace"
    );
    assert_eq!(boss.trace_id.len(), 16);
    assert_eq!(boss.span_id.len(), 8);
    assert_ne!(boss.span_id, under.span_id);
    for sp in [boss, under] {
        assert_eq!(sp.kind, SpanKind::Internal as i32);
        assert_eq!(
            str_attr(sp, "gen_ai.conversation.id"),
            s.root.root().to_string()
        );
    }
    assert_eq!(str_attr(under, "agency.outcome.id"), s.garden.to_string());
    assert_eq!(str_attr(under, "agency.handler.id"), s.under.to_string());
    assert_eq!(str_attr(under, "gen_ai.agent.name"), "Garden planned");

    // Model and tool calls are children of their own agent's run.
    for (agent, invoke, model, input) in [
        (s.boss, boss, "claude-boss", 11),
        (s.underling, under, "claude-under", 5),
    ] {
        let chat = by_agent("chat", agent);
        assert_eq!(chat.len(), 1, "{names:?}");
        let chat = chat[0];
        assert_eq!(chat.name, format!("chat {model}"));
        assert_eq!(chat.kind, SpanKind::Client as i32);
        assert_eq!(chat.trace_id, invoke.trace_id);
        assert_eq!(chat.parent_span_id, invoke.span_id);
        assert_eq!(str_attr(chat, "gen_ai.provider.name"), "anthropic");
        assert_eq!(str_attr(chat, "gen_ai.request.model"), model);
        assert_eq!(int_attr(chat, "gen_ai.usage.input_tokens"), input + 3 + 2);
        assert_eq!(int_attr(chat, "gen_ai.usage.output_tokens"), 22);
        assert_eq!(int_attr(chat, "agency.usage.cache_read_tokens"), 3);
        assert_eq!(int_attr(chat, "agency.usage.cache_write_tokens"), 2);
        assert!(attr(&chat.attributes, "gen_ai.usage.cache_read.input_tokens").is_none());
        assert_eq!(int_attr(chat, "agency.cost_micro_usd"), 1234);
        assert_eq!(
            chat.end_time_unix_nano - chat.start_time_unix_nano,
            1_500_000_000,
            "the call's own start and end"
        );
        let tool = by_agent("execute_tool", agent);
        assert_eq!(tool.len(), 1, "{names:?}");
        let tool = tool[0];
        assert_eq!(tool.trace_id, invoke.trace_id);
        assert_eq!(tool.parent_span_id, invoke.span_id);
        let name = str_attr(tool, "gen_ai.tool.name");
        assert_eq!(tool.name, format!("execute_tool {name}"));
        assert_eq!(
            str_attr(tool, "gen_ai.tool.call.id"),
            format!("toolu_{name}")
        );
        for child in [chat, tool] {
            assert!(
                child.start_time_unix_nano >= invoke.start_time_unix_nano,
                "{}",
                child.name
            );
            assert!(
                child.end_time_unix_nano <= invoke.end_time_unix_nano,
                "{}",
                child.name
            );
        }
    }
    let failed = by_agent("execute_tool", s.underling)[0];
    assert_eq!(failed.name, "execute_tool bash");
    assert_eq!(str_attr(failed, "error.type"), "denied");
    assert_eq!(
        failed.status.clone().unwrap().code,
        SpanStatus::Error as i32
    );
    for sp in &spans {
        assert!(
            sp.end_time_unix_nano >= sp.start_time_unix_nano,
            "{}",
            sp.name
        );
        assert!(
            sp.start_time_unix_nano >= 1_800_000_000_000 * 1_000_000,
            "{}",
            sp.name
        );
    }
    assert!(boss.start_time_unix_nano < under.start_time_unix_nano);
    assert!(under.end_time_unix_nano < boss.end_time_unix_nano);

    // Metrics: decoded, with the calls' tokens and the agents gone.
    let metric = |name: &str| -> &Metric {
        got.metrics
            .iter()
            .rev()
            .find(|m| m.name == name)
            .unwrap_or_else(|| panic!("{name} not received"))
    };
    let Some(Data::Histogram(h)) = &metric("gen_ai.client.token.usage").data else {
        panic!("token usage is not a histogram");
    };
    let input: f64 = h
        .data_points
        .iter()
        .filter(|p| {
            attr(&p.attributes, "gen_ai.token.type") == Some(Value::StringValue("input".into()))
        })
        .map(|p| p.sum.unwrap())
        .sum();
    assert_eq!(input, (11 + 5 + 2 * (3 + 2)) as f64);
    assert_eq!(h.data_points.iter().map(|p| p.count).sum::<u64>(), 4);
    let Some(Data::Histogram(d)) = &metric("gen_ai.client.operation.duration").data else {
        panic!("duration is not a histogram");
    };
    assert_eq!(
        d.data_points.iter().map(|p| p.sum.unwrap()).sum::<f64>(),
        3.0
    );
    let Some(Data::Gauge(live)) = &metric("agency.agents.live").data else {
        panic!("live agents is not a gauge");
    };
    assert_eq!(
        live.data_points[0].value,
        Some(number_data_point::Value::AsInt(0))
    );
    assert!(matches!(
        metric("agency.budget.pauses").data,
        Some(Data::Sum(ref s)) if s.is_monotonic
    ));

    // The cursor was saved; the same log gives the same ids offline, and
    // the latest experimental conventions name cache tokens their way.
    let saved: i64 = std::fs::read_to_string(&cursor)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let end = sys.events_end(Principal::User).unwrap();
    assert_eq!(saved, end);
    let events = sys
        .events_read(
            Principal::User,
            &agency_service::EventQuery {
                limit: Some(1000),
                ..Default::default()
            },
        )
        .unwrap()
        .events;
    let again = agency_telemetry::spans_of(&events, &config(&base, Semconv::LatestExperimental));
    let mut ids: Vec<_> = spans
        .iter()
        .map(|s| {
            (
                s.span_id.clone(),
                s.parent_span_id.clone(),
                s.trace_id.clone(),
            )
        })
        .collect();
    let mut ids_again: Vec<_> = again
        .iter()
        .map(|s| {
            (
                s.span_id.clone(),
                s.parent_span_id.clone(),
                s.trace_id.clone(),
            )
        })
        .collect();
    ids.sort();
    ids_again.sort();
    assert_eq!(ids, ids_again);
    let chat = again.iter().find(|s| s.name == "chat claude-boss").unwrap();
    assert_eq!(int_attr(chat, "gen_ai.usage.cache_read.input_tokens"), 3);
    assert_eq!(
        int_attr(chat, "gen_ai.usage.cache_creation.input_tokens"),
        2
    );
    assert!(attr(&chat.attributes, "agency.usage.cache_read_tokens").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue30_after_a_restart_an_underling_run_still_joins_the_boss_trace_from_the_saved_cursor()
{
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(Timestamp(1_800_000_000_000)));
    let store = Arc::new(SqliteStore::open(&dir.path().join("agency.db")).unwrap());
    let blobs = Arc::new(FsBlobStore::open(dir.path().join("blobs")).unwrap());
    let sys = Arc::new(Service::builder(store, blobs, clock.clone()).build());
    let root = sys.bootstrap().unwrap();
    let (base, got) = receiver().await;
    let cursor = dir.path().join("telemetry.cursor");

    // Before the restart: the boss's run starts, calls its model (one span
    // exported, so the cursor is saved) and delegates.
    let first = Exporter::start(
        sys.service().clone(),
        config(&base, Semconv::Pinned),
        cursor.clone(),
    )
    .unwrap();
    let boss = sys.agent_start(root).unwrap();
    let ra = Principal::agent(root, boss);
    clock.advance_millis(100);
    model_call(&sys, &clock, ra, "claude-boss", 11);
    let garden = sys
        .outcome_create(
            ra,
            &NewOutcome {
                title: "Garden planned".into(),
                description: String::new(),
                parents: vec![root.root()],
                priority: 0,
            },
        )
        .unwrap();
    let under = sys.delegate(ra, garden, &[]).unwrap().handler;
    first.shutdown(Duration::from_secs(60)).await;
    let saved: i64 = std::fs::read_to_string(&cursor)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let before: Vec<Span> = std::mem::take(&mut got.lock().unwrap().spans);
    assert_eq!(before.len(), 1, "only the finished model call");

    // After it: a new exporter goes on from the saved cursor; the runs
    // that began before it are found again in the log.
    let second = Exporter::start(
        sys.service().clone(),
        config(&base, Semconv::Pinned),
        cursor.clone(),
    )
    .unwrap();
    let underling = sys.agent_start(under).unwrap();
    clock.advance_millis(100);
    sys.agent_end(underling, "exited").unwrap();
    sys.agent_end(boss, "exited").unwrap();
    second.shutdown(Duration::from_secs(60)).await;
    let after: Vec<Span> = std::mem::take(&mut got.lock().unwrap().spans);
    let names: Vec<&str> = after.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(after.len(), 2, "no span exported twice: {names:?}");
    let invoke = |agent: AgentId| {
        after
            .iter()
            .find(|s| str_attr(s, "gen_ai.agent.id") == agent.to_string())
            .unwrap_or_else(|| panic!("no run of {agent} in {names:?}"))
    };
    let (b, u) = (invoke(boss), invoke(underling));
    assert_eq!(u.parent_span_id, b.span_id);
    assert_eq!(u.trace_id, b.trace_id);
    assert_eq!(
        before[0].trace_id, b.trace_id,
        "the call before the restart is in the same trace"
    );
    assert_eq!(before[0].parent_span_id, b.span_id);
    assert_eq!(
        b.start_time_unix_nano,
        1_800_000_000_000 * 1_000_000,
        "the run's start, from before the restart"
    );
    assert!(
        std::fs::read_to_string(&cursor)
            .unwrap()
            .trim()
            .parse::<i64>()
            .unwrap()
            > saved
    );
}
