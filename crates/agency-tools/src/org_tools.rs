//! The runner of organisation tools: Agency's MCP
//! server hands it every call of a name that is not one of Agency's own
//! tools (`agency_mcp::OrgTools`). A call goes, in order:
//! 1. the service's `org_tool_check` (the caller's handler holds
//!    `tool:NAME` now; the definition);
//! 2. the arguments against the interface's input schema — a call that
//!    does not match is refused before anything runs or is charged;
//! 3. the service's `tool_call_admit_in` as `tool:NAME` (tool-call budgets,
//!    `policy.toml`, approvals), like every call the daemon admits;
//! 4. the implementation: an HTTP call the daemon makes through the
//!    caller's egress rule (`org_tools/http.rs`), a command run in the
//!    sandbox (`org_tools/command.rs`), or one tool of an MCP server the
//!    daemon calls as its client (`org_tools/mcp.rs`);
//! 5. the output against the interface's output schema — a mismatch is an
//!    error naming the field, never passed on.

pub(crate) mod command;

pub use command::run_root;
pub(crate) mod http;
pub(crate) mod mcp;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use agency_core::Principal;
use agency_mcp::{AgentIdentity, OrgToolFailure, OrgToolResult, OrgTools};
use agency_org::{Tool, ToolImplementation};
use agency_service::{Admission, System, ToolCallRequest};
use serde_json::Value;

use agency_config::secrets::Secrets;
use agency_egress::EgressKeys;
use agency_supervisor::confine::Confiner;

/// What the runner needs of the daemon. Each call's future owns a copy
/// (every part is shared or small), so a call outlives nothing it borrows.
#[derive(Debug, Clone)]
pub struct OrgToolRunner {
    pub svc: Arc<System>,
    /// Confines command tools (and stdio MCP servers) as agents are confined.
    pub confiner: Arc<Confiner>,
    /// Issues the per-run egress keys of command tools.
    pub keys: Arc<EgressKeys>,
    /// The egress proxy (command tools reach the network through it).
    pub egress_proxy: std::net::SocketAddr,
    /// Where each command run gets its private directory (`run/`).
    pub run_root: std::path::PathBuf,
    /// The home's secrets (`[secrets]`), for the `${secret:NAME}`
    /// references of tools' headers and environment variables.
    pub secrets: Arc<Secrets>,
}

impl OrgTools for OrgToolRunner {
    fn call(
        &self,
        caller: AgentIdentity,
        name: String,
        args: Value,
    ) -> Pin<Box<dyn Future<Output = OrgToolResult> + Send + 'static>> {
        let ctx = Arc::new(self.clone());
        Box::pin(async move { run(ctx, caller, name, args).await })
    }
}

/// The runner's parts, owned by one call's future.
pub(crate) type CallCtx = OrgToolRunner;

async fn run(ctx: Arc<CallCtx>, caller: AgentIdentity, name: String, args: Value) -> OrgToolResult {
    let who = Principal::agent(caller.handler, caller.agent);
    let tool = {
        let (svc, name) = (ctx.svc.clone(), name.clone());
        blocking(move || svc.org_tool_check(who, &name))
            .await?
            .map_err(|e| OrgToolFailure::new(e.kind(), e.to_string()))?
    };
    check(&tool, "input", &tool.interface.input_schema, &args)?;
    admit(&ctx.svc, &caller, &tool, &args).await?;
    let output = match &tool.implementation {
        ToolImplementation::Http(h) => http::call(&ctx, who, &tool, h, &args).await?,
        ToolImplementation::Command(c) => command::call(&ctx, who, &tool, c, &args).await?,
        ToolImplementation::Mcp(m) => mcp::call(&ctx, who, &tool, m, &args).await?,
    };
    check(&tool, "output", &tool.interface.output_schema, &output)?;
    Ok(output)
}

/// Admit the call as `tool:NAME`: budgets first, then the policy.
async fn admit(
    svc: &Arc<System>,
    caller: &AgentIdentity,
    tool: &Tool,
    args: &Value,
) -> Result<(), OrgToolFailure> {
    let who = Principal::agent(caller.handler, caller.agent);
    let req = ToolCallRequest {
        tool: format!("tool:{}", tool.name),
        args: args.clone(),
        read_only: None,
    };
    let (svc, ws) = (svc.clone(), caller.workspace.clone());
    match blocking(move || svc.tool_call_admit_in(who, req, ws.as_deref())).await? {
        Ok(Admission::Allow { .. }) => Ok(()),
        Ok(a @ Admission::Pending { .. }) => Err(OrgToolFailure::new("pending", a.message())),
        Ok(a @ Admission::Denied { .. }) => Err(OrgToolFailure::new("denied", a.message())),
        Err(e) => Err(OrgToolFailure::new(e.kind(), e.to_string())),
    }
}

/// Validate `value` against the tool's `what` (`input` or `output`)
/// schema. An input's error quotes it (the agent wrote it); an output's
/// names the places and the rules broken (a missing field by name) without
/// quoting what the tool answered.
pub(crate) fn check(
    tool: &Tool,
    what: &str,
    schema: &Value,
    value: &Value,
) -> Result<(), OrgToolFailure> {
    let validator = agency_config::mcp_manifest::compile(schema).map_err(|e| {
        OrgToolFailure::new(
            "internal",
            format!(
                "failed to check the {what} of tool {}: its {what} schema is {e}; ask the user to fix the .tool file",
                tool.name
            ),
        )
    })?;
    if what == "input" {
        return match agency_config::mcp_manifest::violations(&validator, value) {
            None => Ok(()),
            Some(v) => Err(OrgToolFailure::new(
                "invalid_input",
                format!(
                    "failed to call tool {}: the arguments do not match its inputSchema ({v}); nothing was run; call it again with arguments that match",
                    tool.name
                ),
            )),
        };
    }
    let Some(places) = agency_config::mcp_manifest::violation_places(&validator, value) else {
        return Ok(());
    };
    Err(OrgToolFailure::new(
        "invalid_output",
        format!(
            "failed to use the answer of tool {}: it does not match the declared outputSchema ({}); nothing of it is passed on; tell the user if it persists",
            tool.name, places
        ),
    ))
}

/// `template` (a header's or environment variable's value) with its
/// `${secret:NAME}` references filled in. The error names the secret, never
/// a value; a secret no longer declared (the daemon restarted without it)
/// says so.
pub(crate) fn fill_secrets(
    tool: &Tool,
    what: &str,
    template: &str,
    secrets: &Secrets,
) -> Result<agency_config::secrets::SecretString, OrgToolFailure> {
    agency_config::secrets::interpolate(template, secrets).map_err(|e| {
            OrgToolFailure::new(
                "failed",
                format!(
                    "failed to call tool {}: its {what}: {e}; ask the user to declare it in agency.toml's [secrets] and restart the daemon",
                    tool.name
                ),
            )
        })
}

/// A service call on a blocking thread (its span carried).
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, OrgToolFailure> {
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || span.in_scope(f))
        .await
        .map_err(|e| OrgToolFailure::new("internal", format!("failed to run the tool call: {e}")))
}
