//! Spans from events: `invoke_agent` per agent run, `chat` per model call,
//! `execute_tool` per tool call, linked into one trace per piece of work.
//!
//! Ids come from the log alone: an agent's span id from its agent id, a
//! model call's from its call number, a tool call's from its event number;
//! a run of a handler with no boss (the root, woken by the user) starts a
//! trace whose id derives from its agent id. Any other run inherits the
//! trace of the boss agent whose `outcome.delegated` or `mail.sent` to its
//! handler most recently preceded it, and is that agent's child. The maps
//! that remember this are bounded (oldest forgotten first); what fell out
//! or came before the exporter's window gets a trace of its own.

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

use agency_api::{Event, EventKind};
use agency_config::telemetry::Semconv;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::{Span, Status, span::SpanKind, status::StatusCode};
use serde_json::Value;

use crate::otlp::{i, nanos, s, span_id, trace_id};

/// Entries each map keeps at most.
const CAP: usize = 10_000;

/// A map that forgets its oldest entries past a capacity.
#[derive(Debug)]
struct Bounded<K, V> {
    map: HashMap<K, V>,
    order: VecDeque<K>,
}

impl<K: Hash + Eq + Clone, V> Bounded<K, V> {
    fn new() -> Self {
        Bounded {
            map: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    fn insert(&mut self, k: K, v: V) {
        if self.map.insert(k.clone(), v).is_none() {
            self.order.push_back(k);
            while self.order.len() > CAP {
                if let Some(old) = self.order.pop_front() {
                    self.map.remove(&old);
                }
            }
        }
    }

    fn get(&self, k: &K) -> Option<&V> {
        self.map.get(k)
    }
}

/// Where a run sits: its trace, its span, and the work it belongs to.
#[derive(Debug, Clone)]
struct Ctx {
    trace: [u8; 16],
    span: [u8; 8],
    /// `gen_ai.conversation.id`: the root outcome of the work.
    conversation: String,
    /// `agency.outcome.id`: the outcome the run works on.
    outcome: String,
}

#[derive(Debug, Clone)]
struct Run {
    ctx: Ctx,
    parent: Option<[u8; 8]>,
    start: i64,
    name: String,
}

/// Builds spans from events, in log order.
#[derive(Debug)]
pub struct SpanBuilder {
    semconv: Semconv,
    runs: Bounded<String, Run>,
    /// Per handler: the boss agent's context that last handed it work.
    causes: Bounded<String, Ctx>,
    bosses: Bounded<String, String>,
    calls: Bounded<i64, i64>,
}

fn agent_span(agent: &str) -> [u8; 8] {
    span_id("agency.invoke_agent", agent.as_bytes())
}

fn str_of(v: &Value) -> Option<String> {
    v.as_str().map(str::to_owned)
}

impl SpanBuilder {
    pub fn new(semconv: Semconv) -> Self {
        SpanBuilder {
            semconv,
            runs: Bounded::new(),
            causes: Bounded::new(),
            bosses: Bounded::new(),
            calls: Bounded::new(),
        }
    }

    /// The context of `agent`'s run, or one of its own if it is unknown.
    fn ctx(&self, agent: &str, handler: Option<&str>) -> Ctx {
        match self.runs.get(&agent.to_owned()) {
            Some(r) => r.ctx.clone(),
            None => {
                let h = handler.unwrap_or(agent).to_owned();
                Ctx {
                    trace: trace_id("agency.trace", agent.as_bytes()),
                    span: agent_span(agent),
                    conversation: h.clone(),
                    outcome: h,
                }
            }
        }
    }

    /// Learn from `e`, and return the spans it ends.
    pub fn on_event(&mut self, e: &Event) -> Vec<Span> {
        let agent = e.agent.map(|a| a.to_string());
        let handler = e.handler.map(|h| h.to_string());
        let d = &e.data;
        match &e.kind {
            EventKind::HandlerCreated => {
                if let (Some(h), Some(b)) = (str_of(&d["handler"]), str_of(&d["boss"])) {
                    self.bosses.insert(h, b);
                }
            }
            EventKind::OutcomeDelegated => {
                if let (Some(from), Some(to)) = (str_of(&d["from"]), str_of(&d["to"])) {
                    self.bosses.insert(to.clone(), from.clone());
                    if let Some(a) = &agent {
                        let mut c = self.ctx(a, Some(&from));
                        c.outcome = str_of(&d["outcome"]).unwrap_or(to.clone());
                        self.causes.insert(to, c);
                    }
                }
            }
            EventKind::MailSent => {
                let to = (d["to"]["kind"] == "handler")
                    .then(|| str_of(&d["to"]["id"]))
                    .flatten();
                if let (Some(a), Some(to), Some(from)) = (&agent, to, &handler)
                    && self.bosses.get(&to) == Some(from)
                {
                    let mut c = self.ctx(a, Some(from));
                    c.outcome = to.clone();
                    self.causes.insert(to, c);
                }
            }
            EventKind::AgentStarted => {
                if let (Some(a), Some(h)) = (&agent, &handler) {
                    let own = self.ctx(a, Some(h));
                    let (ctx, parent) = match self.causes.get(h) {
                        Some(c) if self.bosses.get(h).is_some() => (
                            Ctx {
                                trace: c.trace,
                                span: own.span,
                                conversation: c.conversation.clone(),
                                outcome: c.outcome.clone(),
                            },
                            Some(c.span),
                        ),
                        _ => (own, None),
                    };
                    let name = e.handler_title.clone().unwrap_or_else(|| h.clone());
                    self.runs.insert(
                        a.clone(),
                        Run {
                            ctx,
                            parent,
                            start: e.at.0,
                            name,
                        },
                    );
                }
            }
            EventKind::AgentEnded => {
                if let Some(a) = &agent {
                    return vec![self.invoke_agent(a, handler.as_deref(), e)];
                }
            }
            EventKind::ModelCallStarted => {
                if let Some(c) = d["call"].as_i64() {
                    self.calls.insert(c, e.at.0);
                }
            }
            EventKind::ModelCallEnded => {
                if let Some(a) = &agent {
                    return vec![self.chat(a, handler.as_deref(), e)];
                }
            }
            EventKind::ToolCalled => {
                if let Some(a) = &agent {
                    return vec![self.tool(a, handler.as_deref(), e)];
                }
            }
            _ => {}
        }
        Vec::new()
    }

    fn invoke_agent(&self, a: &str, h: Option<&str>, e: &Event) -> Span {
        let run = self
            .runs
            .get(&a.to_owned())
            .cloned()
            .unwrap_or_else(|| Run {
                ctx: self.ctx(a, h),
                parent: None,
                start: e.at.0,
                name: e.handler_title.clone().unwrap_or_default(),
            });
        let mut attrs = vec![
            s("gen_ai.operation.name", "invoke_agent"),
            s("gen_ai.agent.id", a),
            s("gen_ai.agent.name", run.name.clone()),
            s("gen_ai.conversation.id", run.ctx.conversation.clone()),
            s("agency.outcome.id", run.ctx.outcome.clone()),
        ];
        attrs.extend(h.map(|h| s("agency.handler.id", h)));
        span(
            &run.ctx,
            run.ctx.span,
            run.parent,
            format!("invoke_agent {}", run.name),
            SpanKind::Internal,
            (run.start, e.at.0),
            attrs,
            None,
        )
    }

    fn chat(&mut self, a: &str, h: Option<&str>, e: &Event) -> Span {
        let d = &e.data;
        let ctx = self.ctx(a, h);
        let call = d["call"].as_i64().unwrap_or(e.seq);
        let duration = d["duration_ms"].as_i64().unwrap_or(0);
        let start = self.calls.map.remove(&call).unwrap_or(e.at.0 - duration);
        let model = d["model"].as_str().unwrap_or("unknown");
        let tok = |k: &str| d[k].as_i64().unwrap_or(0);
        let (cache_read, cache_write) = (tok("cache_read_tokens"), tok("cache_write_tokens"));
        let mut attrs = vec![
            s("gen_ai.operation.name", "chat"),
            s("gen_ai.provider.name", provider(d)),
            s("gen_ai.request.model", model),
            // Both conventions count cached input in the input tokens.
            i(
                "gen_ai.usage.input_tokens",
                tok("input_tokens") + cache_read + cache_write,
            ),
            i("gen_ai.usage.output_tokens", tok("output_tokens")),
            i("agency.cost_micro_usd", tok("cost_micro_usd")),
            s(
                "agency.upstream",
                d["upstream"].as_str().unwrap_or_default(),
            ),
            s("gen_ai.conversation.id", ctx.conversation.clone()),
            s("agency.outcome.id", ctx.outcome.clone()),
            i("http.response.status_code", tok("status")),
        ];
        attrs.extend(match self.semconv {
            Semconv::Pinned => [
                i("agency.usage.cache_read_tokens", cache_read),
                i("agency.usage.cache_write_tokens", cache_write),
            ],
            Semconv::LatestExperimental => [
                i("gen_ai.usage.cache_read.input_tokens", cache_read),
                i("gen_ai.usage.cache_creation.input_tokens", cache_write),
            ],
        });
        if d["unpriced"] == true {
            attrs.push(kv_bool("agency.cost.unpriced"));
        }
        attrs.extend(h.map(|h| s("agency.handler.id", h)));
        let error = error_of_status(tok("status"));
        if let Some(err) = &error {
            attrs.push(s("error.type", err.clone()));
        }
        span(
            &ctx,
            span_id("agency.chat", &call.to_le_bytes()),
            Some(ctx.span),
            format!("chat {model}"),
            SpanKind::Client,
            (start, e.at.0.max(start)),
            attrs,
            error,
        )
    }

    fn tool(&self, a: &str, h: Option<&str>, e: &Event) -> Span {
        let d = &e.data;
        let ctx = self.ctx(a, h);
        let tool = d["tool"].as_str().unwrap_or("unknown");
        let duration = d["duration_ms"].as_i64().unwrap_or(0);
        let mut attrs = vec![
            s("gen_ai.operation.name", "execute_tool"),
            s("gen_ai.tool.name", tool),
            s(
                "agency.tool.args_digest",
                d["args_digest"].as_str().unwrap_or_default(),
            ),
            s("gen_ai.conversation.id", ctx.conversation.clone()),
            s("agency.outcome.id", ctx.outcome.clone()),
        ];
        if let Some(id) = d["call_id"].as_str() {
            attrs.push(s("gen_ai.tool.call.id", id));
        }
        attrs.extend(h.map(|h| s("agency.handler.id", h)));
        let error =
            (d["ok"] == false).then(|| d["error_kind"].as_str().unwrap_or("_OTHER").to_owned());
        if let Some(err) = &error {
            attrs.push(s("error.type", err.clone()));
        }
        span(
            &ctx,
            span_id("agency.execute_tool", &e.seq.to_le_bytes()),
            Some(ctx.span),
            format!("execute_tool {tool}"),
            SpanKind::Internal,
            (e.at.0 - duration, e.at.0),
            attrs,
            error,
        )
    }
}

/// `gen_ai.provider.name` from the upstream's API.
pub(crate) fn provider(d: &Value) -> String {
    match d["api"].as_str().unwrap_or_default() {
        "anthropic" => "anthropic".to_owned(),
        "openai" => "openai".to_owned(),
        "" => "_OTHER".to_owned(),
        other => other.to_owned(),
    }
}

/// `error.type` of a model call: the HTTP status, or that the upstream was
/// not reached.
pub(crate) fn error_of_status(status: i64) -> Option<String> {
    match status {
        200..=299 => None,
        0 => Some("unreachable".to_owned()),
        s => Some(s.to_string()),
    }
}

fn kv_bool(key: &str) -> KeyValue {
    crate::otlp::kv(
        key,
        opentelemetry_proto::tonic::common::v1::any_value::Value::BoolValue(true),
    )
}

#[allow(clippy::too_many_arguments)]
fn span(
    ctx: &Ctx,
    id: [u8; 8],
    parent: Option<[u8; 8]>,
    name: String,
    kind: SpanKind,
    (start, end): (i64, i64),
    attributes: Vec<KeyValue>,
    error: Option<String>,
) -> Span {
    Span {
        trace_id: ctx.trace.to_vec(),
        span_id: id.to_vec(),
        parent_span_id: parent.map(|p| p.to_vec()).unwrap_or_default(),
        name,
        kind: kind as i32,
        start_time_unix_nano: nanos(start),
        end_time_unix_nano: nanos(end.max(start)),
        attributes,
        status: Some(match error {
            Some(m) => Status {
                code: StatusCode::Error as i32,
                message: m,
            },
            None => Status::default(),
        }),
        ..Span::default()
    }
}
