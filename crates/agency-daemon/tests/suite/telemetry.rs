//! Issue 30 item 6 through a real daemon: `[telemetry]` starts the
//! exporter, an agent run reaches an OTLP/HTTP receiver on 127.0.0.1 as an
//! `invoke_agent` span, metrics arrive when the daemon stops, and a bad
//! endpoint stops the start naming the key.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;

use crate::fixture::{home_with_config, start};

#[derive(Default)]
struct Got {
    spans: Vec<String>,
    metrics: Vec<String>,
}

type Shared = Arc<Mutex<Got>>;

async fn traces(State(g): State<Shared>, body: bytes::Bytes) {
    let req = ExportTraceServiceRequest::decode(body).unwrap();
    for rs in req.resource_spans {
        for ss in rs.scope_spans {
            g.lock()
                .unwrap()
                .spans
                .extend(ss.spans.into_iter().map(|s| s.name));
        }
    }
}

async fn metrics(State(g): State<Shared>, body: bytes::Bytes) {
    let req = ExportMetricsServiceRequest::decode(body).unwrap();
    for rm in req.resource_metrics {
        for sm in rm.scope_metrics {
            g.lock()
                .unwrap()
                .metrics
                .extend(sm.metrics.into_iter().map(|m| m.name));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue30_a_daemon_with_telemetry_exports_an_agent_run_and_metrics_over_otlp() {
    let got = Shared::default();
    let app = Router::new()
        .route("/v1/traces", post(traces))
        .route("/v1/metrics", post(metrics))
        .with_state(got.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let (_dir, home) = home_with_config(&format!(
        "[telemetry]\nenabled = true\nendpoint = \"http://{addr}\"\n"
    ));
    let (daemon, svc, root) = start(&home).await;
    let agent = svc.agent_start(root).unwrap();
    svc.agent_end(agent, "exited").unwrap();
    daemon.stop().await.unwrap();

    let got = got.lock().unwrap();
    assert_eq!(got.spans.len(), 1, "{:?}", got.spans);
    assert!(got.spans[0].starts_with("invoke_agent "), "{:?}", got.spans);
    assert!(
        got.metrics.iter().any(|m| m == "agency.agents.live"),
        "{:?}",
        got.metrics
    );
    let cursor = std::fs::read_to_string(home.dir().join("telemetry.cursor")).unwrap();
    assert!(cursor.trim().parse::<i64>().unwrap() > 0);
}

#[tokio::test]
async fn issue30_a_bad_telemetry_endpoint_stops_the_start_naming_the_key() {
    let (_dir, home) =
        home_with_config("[telemetry]\nenabled = true\nendpoint = \"localhost:4318\"\n");
    let e = agency_daemon::Daemon::start(&home)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("telemetry.endpoint"), "{e}");
}
