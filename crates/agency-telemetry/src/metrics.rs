//! Metrics from events, exported cumulatively since the exporter started:
//! `gen_ai.client.token.usage` and `gen_ai.client.operation.duration`
//! (histograms with the GenAI conventions' bucket boundaries), and Agency's
//! own: approvals waiting and the oldest one's age, live agents (gauges,
//! seeded from the store at start), budget pauses and problems by kind
//! (counters).

use std::collections::{BTreeMap, HashMap};

use agency_api::{Event, EventKind};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Gauge, Histogram, HistogramDataPoint, Metric, NumberDataPoint,
    ResourceMetrics, ScopeMetrics, Sum, metric::Data, number_data_point,
};

use crate::otlp::{SCHEMA_URL, nanos, s};
use crate::spans::{error_of_status, provider};

/// The conventions' advised boundaries for token counts.
const TOKEN_BOUNDS: [f64; 14] = [
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];
/// … and for durations, in seconds.
const DURATION_BOUNDS: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

/// Attribute sets, as sorted (key, value) pairs.
type Key = Vec<(&'static str, String)>;

#[derive(Debug, Clone)]
struct Hist {
    count: u64,
    sum: f64,
    min: f64,
    max: f64,
    buckets: Vec<u64>,
}

impl Hist {
    fn new(bounds: usize) -> Self {
        Hist {
            count: 0,
            sum: 0.0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            buckets: vec![0; bounds + 1],
        }
    }

    fn record(&mut self, bounds: &[f64], v: f64) {
        self.count += 1;
        self.sum += v;
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        let at = bounds.iter().position(|b| v <= *b).unwrap_or(bounds.len());
        self.buckets[at] += 1;
    }
}

/// The metrics' state.
#[derive(Debug)]
pub struct Metrics {
    start_ms: i64,
    tokens: BTreeMap<Key, Hist>,
    durations: BTreeMap<Key, Hist>,
    /// Pending approvals: id → when asked.
    approvals: HashMap<String, i64>,
    live: HashMap<String, ()>,
    budget_pauses: u64,
    problems: BTreeMap<String, u64>,
}

impl Metrics {
    /// Metrics counted from `start_ms`, gauges seeded with what the store
    /// holds now (live agents, pending approvals with their ages).
    pub fn new(start_ms: i64, live: Vec<String>, approvals: Vec<(String, i64)>) -> Self {
        Metrics {
            start_ms,
            tokens: BTreeMap::new(),
            durations: BTreeMap::new(),
            approvals: approvals.into_iter().collect(),
            live: live.into_iter().map(|a| (a, ())).collect(),
            budget_pauses: 0,
            problems: BTreeMap::new(),
        }
    }

    pub fn on_event(&mut self, e: &Event) {
        let d = &e.data;
        let agent = e.agent.map(|a| a.to_string());
        match &e.kind {
            EventKind::ModelCallEnded => {
                let model = d["model"].as_str().unwrap_or("unknown").to_owned();
                let base = vec![
                    ("gen_ai.operation.name", "chat".to_owned()),
                    ("gen_ai.provider.name", provider(d)),
                    ("gen_ai.request.model", model),
                ];
                let tok = |k: &str| d[k].as_i64().unwrap_or(0);
                let input =
                    tok("input_tokens") + tok("cache_read_tokens") + tok("cache_write_tokens");
                for (kind, n) in [("input", input), ("output", tok("output_tokens"))] {
                    let mut k = base.clone();
                    k.push(("gen_ai.token.type", kind.to_owned()));
                    k.sort();
                    self.tokens
                        .entry(k)
                        .or_insert_with(|| Hist::new(TOKEN_BOUNDS.len()))
                        .record(&TOKEN_BOUNDS, n as f64);
                }
                let mut k = base;
                if let Some(err) = error_of_status(tok("status")) {
                    k.push(("error.type", err));
                }
                k.sort();
                self.durations
                    .entry(k)
                    .or_insert_with(|| Hist::new(DURATION_BOUNDS.len()))
                    .record(&DURATION_BOUNDS, tok("duration_ms") as f64 / 1000.0);
            }
            EventKind::AgentStarted => {
                self.live.extend(agent.map(|a| (a, ())));
            }
            EventKind::AgentEnded => {
                if let Some(a) = agent {
                    self.live.remove(&a);
                }
            }
            EventKind::ApprovalRequested => {
                if let Some(id) = approval_id(&d["approval"]) {
                    self.approvals.insert(id, e.at.0);
                }
            }
            EventKind::ApprovalDecided | EventKind::ApprovalConsumed => {
                if let Some(id) = approval_id(&d["approval"]) {
                    self.approvals.remove(&id);
                }
            }
            EventKind::BudgetPaused => self.budget_pauses += 1,
            // One per episode, by its kind (`stuck`, `tool_loop`, …); a
            // cleared episode is not a new problem.
            EventKind::ProblemRaised => {
                let kind = d["kind"].as_str().unwrap_or("unknown").to_owned();
                *self.problems.entry(kind).or_default() += 1;
            }
            _ => {}
        }
    }

    /// Every metric as of `now_ms`.
    pub fn export(
        &self,
        now_ms: i64,
        resource: opentelemetry_proto::tonic::resource::v1::Resource,
    ) -> ExportMetricsServiceRequest {
        let (start, now) = (nanos(self.start_ms), nanos(now_ms));
        let hist =
            |name: &str, unit: &str, desc: &str, m: &BTreeMap<Key, Hist>, b: &[f64]| Metric {
                name: name.to_owned(),
                description: desc.to_owned(),
                unit: unit.to_owned(),
                data: Some(Data::Histogram(Histogram {
                    aggregation_temporality: AggregationTemporality::Cumulative as i32,
                    data_points: m
                        .iter()
                        .map(|(k, h)| HistogramDataPoint {
                            attributes: attrs(k),
                            start_time_unix_nano: start,
                            time_unix_nano: now,
                            count: h.count,
                            sum: Some(h.sum),
                            bucket_counts: h.buckets.clone(),
                            explicit_bounds: b.to_vec(),
                            min: Some(h.min),
                            max: Some(h.max),
                            ..HistogramDataPoint::default()
                        })
                        .collect(),
                })),
                ..Metric::default()
            };
        let point = |attributes: Vec<KeyValue>, v: number_data_point::Value| NumberDataPoint {
            attributes,
            start_time_unix_nano: start,
            time_unix_nano: now,
            value: Some(v),
            ..NumberDataPoint::default()
        };
        let gauge = |name: &str, unit: &str, desc: &str, v: number_data_point::Value| Metric {
            name: name.to_owned(),
            description: desc.to_owned(),
            unit: unit.to_owned(),
            data: Some(Data::Gauge(Gauge {
                data_points: vec![point(Vec::new(), v)],
            })),
            ..Metric::default()
        };
        let counter = |name: &str, desc: &str, points: Vec<NumberDataPoint>| Metric {
            name: name.to_owned(),
            description: desc.to_owned(),
            unit: "{event}".to_owned(),
            data: Some(Data::Sum(Sum {
                data_points: points,
                aggregation_temporality: AggregationTemporality::Cumulative as i32,
                is_monotonic: true,
            })),
            ..Metric::default()
        };
        let oldest = self
            .approvals
            .values()
            .min()
            .map_or(0.0, |at| (now_ms - at).max(0) as f64 / 1000.0);
        use number_data_point::Value::{AsDouble, AsInt};
        let mut metrics = vec![
            hist(
                "gen_ai.client.token.usage",
                "{token}",
                "Tokens of model calls, by token type",
                &self.tokens,
                &TOKEN_BOUNDS,
            ),
            hist(
                "gen_ai.client.operation.duration",
                "s",
                "Duration of model calls",
                &self.durations,
                &DURATION_BOUNDS,
            ),
            gauge(
                "agency.approvals.waiting",
                "{approval}",
                "Approval requests waiting for the user",
                AsInt(self.approvals.len() as i64),
            ),
            gauge(
                "agency.approvals.oldest_age",
                "s",
                "Age of the oldest approval request waiting (0: none)",
                AsDouble(oldest),
            ),
            gauge(
                "agency.agents.live",
                "{agent}",
                "Agents running",
                AsInt(self.live.len() as i64),
            ),
            counter(
                "agency.budget.pauses",
                "Subtrees paused by a budget",
                vec![point(Vec::new(), AsInt(self.budget_pauses as i64))],
            ),
        ];
        metrics.push(counter(
            "agency.problems",
            "Problems detected, by kind",
            self.problems
                .iter()
                .map(|(k, n)| point(vec![s("agency.problem.kind", k.clone())], AsInt(*n as i64)))
                .collect(),
        ));
        ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                resource: Some(resource),
                scope_metrics: vec![ScopeMetrics {
                    scope: Some(crate::otlp::scope()),
                    metrics,
                    schema_url: SCHEMA_URL.to_owned(),
                }],
                schema_url: SCHEMA_URL.to_owned(),
            }],
        }
    }
}

fn attrs(k: &Key) -> Vec<KeyValue> {
    k.iter().map(|(k, v)| s(k, v.clone())).collect()
}

/// An approval's id as the store writes it: a number (older or other
/// writers: a string).
fn approval_id(v: &serde_json::Value) -> Option<String> {
    match v {
        serde_json::Value::Number(n) => Some(n.to_string()),
        serde_json::Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use agency_api::{Event, EventKind};
    use agency_core::Timestamp;
    use opentelemetry_proto::tonic::metrics::v1::{Metric, metric::Data, number_data_point};

    use super::Metrics;

    fn event(seq: i64, at: i64, kind: &str, data: serde_json::Value) -> Event {
        Event {
            seq,
            at: Timestamp(at),
            kind: EventKind::from(kind.to_owned()),
            handler: None,
            handler_title: None,
            agent: None,
            outcome: None,
            summary: String::new(),
            data,
        }
    }

    fn ints(m: &Metric) -> Vec<i64> {
        let points = match &m.data {
            Some(Data::Gauge(g)) => &g.data_points,
            Some(Data::Sum(s)) => &s.data_points,
            other => panic!("{}: {other:?}", m.name),
        };
        points
            .iter()
            .map(|p| match p.value {
                Some(number_data_point::Value::AsInt(i)) => i,
                other => panic!("{}: {other:?}", m.name),
            })
            .collect()
    }

    #[test]
    fn approvals_pauses_and_problems_of_any_problem_kind_are_counted() {
        // The log gives approval ids as numbers (`ApprovalId`).
        let mut n = Metrics::new(0, vec![], vec![("7".into(), 1_000)]);
        n.on_event(&event(
            1,
            2_000,
            "approval.requested",
            serde_json::json!({"approval": 8}),
        ));
        n.on_event(&event(
            2,
            2_000,
            "approval.decided",
            serde_json::json!({"approval": 7}),
        ));
        let req = n.export(3_000, Default::default());
        let waiting = req.resource_metrics[0].scope_metrics[0]
            .metrics
            .iter()
            .find(|m| m.name == "agency.approvals.waiting")
            .unwrap();
        assert_eq!(ints(waiting), vec![1], "7 decided, 8 waiting");
        // One approval pending from before the start, seeded from the store.
        let mut m = Metrics::new(0, vec!["a1".into()], vec![("old".into(), 1_000)]);
        m.on_event(&event(
            1,
            2_000,
            "approval.requested",
            serde_json::json!({"approval": "new"}),
        ));
        m.on_event(&event(
            2,
            3_000,
            "approval.decided",
            serde_json::json!({"approval": "old"}),
        ));
        m.on_event(&event(3, 3_000, "budget.paused", serde_json::json!({})));
        m.on_event(&event(
            4,
            3_000,
            "problem.raised",
            serde_json::json!({"problem": 1, "kind": "stuck"}),
        ));
        m.on_event(&event(
            5,
            3_000,
            "problem.raised",
            serde_json::json!({"problem": 2, "kind": "tool_loop"}),
        ));
        m.on_event(&event(
            6,
            3_000,
            "problem.raised",
            serde_json::json!({"problem": 3, "kind": "tool_loop"}),
        ));
        m.on_event(&event(
            6,
            3_000,
            "problem.cleared",
            serde_json::json!({"problem": 3, "kind": "tool_loop"}),
        ));
        m.on_event(&event(
            7,
            3_000,
            "mail.sent",
            serde_json::json!({"problem": "not one"}),
        ));
        let req = m.export(12_000, Default::default());
        let metrics = &req.resource_metrics[0].scope_metrics[0].metrics;
        let get = |n: &str| metrics.iter().find(|m| m.name == n).unwrap();
        assert_eq!(ints(get("agency.approvals.waiting")), vec![1]);
        let Some(Data::Gauge(age)) = &get("agency.approvals.oldest_age").data else {
            panic!("age is not a gauge");
        };
        assert_eq!(
            age.data_points[0].value,
            Some(number_data_point::Value::AsDouble(10.0)),
            "the pending one asked at 2 s, seen at 12 s"
        );
        assert_eq!(ints(get("agency.agents.live")), vec![1]);
        assert_eq!(ints(get("agency.budget.pauses")), vec![1]);
        // By kind (`stuck`, `tool_loop`); a clearing is not counted.
        assert_eq!(ints(get("agency.problems")), vec![1, 2]);
    }
}
