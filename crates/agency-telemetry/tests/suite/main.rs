//! agency-telemetry's integration tests: the exporter against a receiver
//! that speaks real OTLP/HTTP (protobuf bodies decoded with
//! `opentelemetry-proto`).

// Tests state their expectations with unwrap: a panic is the failure report.
#![allow(clippy::unwrap_used)]

mod otlp;
