//! Small builders of OTLP protobuf messages: attributes, deterministic ids,
//! the resource and the instrumentation scope.

use agency_config::telemetry::TelemetryConfig;
use opentelemetry_proto::tonic::common::v1::{
    AnyValue, InstrumentationScope, KeyValue, any_value::Value,
};
use opentelemetry_proto::tonic::resource::v1::Resource;

/// The GenAI semantic conventions version Agency follows by default.
pub const SEMCONV_VERSION: &str = "1.37.0";
/// The schema URL of that version.
pub const SCHEMA_URL: &str = "https://opentelemetry.io/schemas/1.37.0";

pub(crate) fn kv(key: &str, v: Value) -> KeyValue {
    KeyValue {
        key: key.to_owned(),
        value: Some(AnyValue { value: Some(v) }),
        ..KeyValue::default()
    }
}

pub(crate) fn s(key: &str, v: impl Into<String>) -> KeyValue {
    kv(key, Value::StringValue(v.into()))
}

pub(crate) fn i(key: &str, v: i64) -> KeyValue {
    kv(key, Value::IntValue(v))
}

/// `n` bytes of BLAKE3 over a domain label and a value: the same event
/// gives the same id on every export, so a re-export after a restart
/// repeats ids instead of inventing new ones.
fn derive<const N: usize>(label: &str, value: &[u8]) -> [u8; N] {
    let mut h = blake3::Hasher::new();
    h.update(label.as_bytes());
    h.update(&[0]);
    h.update(value);
    let mut out = [0u8; N];
    h.finalize_xof().fill(&mut out);
    // An all-zero id is invalid in OTLP; 2^-64 odds, but keep it valid.
    if out.iter().all(|b| *b == 0) {
        out[N - 1] = 1;
    }
    out
}

pub(crate) fn span_id(label: &str, value: &[u8]) -> [u8; 8] {
    derive(label, value)
}

pub(crate) fn trace_id(label: &str, value: &[u8]) -> [u8; 16] {
    derive(label, value)
}

pub(crate) fn resource(cfg: &TelemetryConfig) -> Resource {
    Resource {
        attributes: vec![
            s("service.name", cfg.service_name.clone()),
            s("service.version", env!("CARGO_PKG_VERSION")),
            s("telemetry.sdk.name", "agency-telemetry"),
            s("telemetry.sdk.language", "rust"),
            s("telemetry.sdk.version", env!("CARGO_PKG_VERSION")),
        ],
        ..Resource::default()
    }
}

pub(crate) fn scope() -> InstrumentationScope {
    InstrumentationScope {
        name: "agency-telemetry".to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        ..InstrumentationScope::default()
    }
}

/// Milliseconds since the epoch as OTLP's nanoseconds.
pub(crate) fn nanos(ms: i64) -> u64 {
    u64::try_from(ms).unwrap_or(0).saturating_mul(1_000_000)
}
