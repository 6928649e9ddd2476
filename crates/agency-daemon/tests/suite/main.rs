//! Every integration test of the daemon library, gathered into one test
//! binary: one link of the daemon and its dependencies instead of one per
//! file. Each file is a module; the shared fixtures live in `common/` and
//! are declared here once.

// Test code panics on what it did not expect; every fixture module shares
// the allowance the test files give themselves.
#![allow(clippy::unwrap_used)]

#[path = "common/fixture.rs"]
mod fixture;
#[path = "common/org_client.rs"]
mod org_client;

mod agency_messages;
mod agency_messages_limits;
mod agent_end;
mod budget_pause;
mod daemon;
mod dashboard;
mod dashboard_lessons;
mod egress;
mod gateway;
mod gateway_budget;
mod gateway_metering;
mod gateway_models;
mod golden;
mod launch;
mod org_tools;
mod org_tools_mcp;
mod pipeline_agent;
mod prompt_runs;
mod reap;
mod spawn;
mod supervisor;
mod telemetry;
