//! Organisation tools as Agency's MCP server shows them:
//! each tool whose `tool:NAME` the caller's handler holds is listed after
//! Agency's own tools (name, description, the interface's schemas), and a
//! call of such a name goes to the daemon's [`OrgTools`] runner, which
//! checks the capability (the service's `org_tool_check`), validates the
//! input, admits the call (budgets, `policy.toml`), runs the tool and
//! validates its output. Nothing here decides anything: the list is the
//! service's `org_tools_for`, the call the runner's.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use agency_core::Principal;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::Value;

use crate::AgentIdentity;

/// Why an organisation tool call failed, as the agent reads it
/// (`[kind] message`, like Agency's own tools).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrgToolFailure {
    /// `permission_denied`, `invalid_input`, `pending`, `denied`,
    /// `timeout`, `failed`, `invalid_output` or `internal`.
    pub kind: &'static str,
    pub message: String,
}

impl OrgToolFailure {
    pub fn new(kind: &'static str, message: impl Into<String>) -> Self {
        OrgToolFailure {
            kind,
            message: message.into(),
        }
    }
}

/// The output of a call: the tool's JSON output, or why there is none.
pub type OrgToolResult = Result<Value, OrgToolFailure>;

/// The daemon's runner of organisation tools.
pub trait OrgTools: Send + Sync + std::fmt::Debug {
    /// Run tool `name` for `caller` with `args` (the call's `arguments`):
    /// every check is the runner's (and the service's it asks).
    fn call(
        &self,
        caller: AgentIdentity,
        name: String,
        args: Value,
    ) -> Pin<Box<dyn Future<Output = OrgToolResult> + Send + 'static>>;
}

/// The MCP definitions of the tools `caller` may call (none if the
/// service refuses, e.g. an agent that just ended: it is told nothing).
pub(crate) async fn listed(svc: Arc<agency_service::Service>, caller: &AgentIdentity) -> Vec<Tool> {
    let who = Principal::agent(caller.handler, caller.agent);
    let span = tracing::Span::current();
    let found = tokio::task::spawn_blocking(move || span.in_scope(|| svc.org_tools_for(who))).await;
    let tools = match found {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "organisation tools not listed");
            return Vec::new();
        }
        Err(_) => return Vec::new(),
    };
    tools.iter().filter_map(definition).collect()
}

/// One tool as MCP shows it. Its annotations say it reaches outside
/// Agency (`openWorld`) and claim nothing else: the `.tool` file does not
/// say whether it changes anything.
fn definition(t: &agency_org::Tool) -> Option<Tool> {
    let Value::Object(input) = &t.interface.input_schema else {
        return None;
    };
    let mut tool = Tool::new(
        t.name.clone(),
        t.description.clone(),
        Arc::new(input.clone()),
    )
    .with_annotations(ToolAnnotations::new().open_world(true));
    if let Value::Object(output) = &t.interface.output_schema {
        tool.output_schema = Some(Arc::new(output.clone() as JsonObject));
    }
    Some(tool)
}

/// The MCP result of a call: the output as text and as
/// `structuredContent` (the tool declares an output schema), or an
/// `isError` result with `[kind] message`.
pub(crate) fn result(r: OrgToolResult) -> CallToolResult {
    match r {
        Ok(v) => CallToolResult::structured(v),
        Err(f) => CallToolResult::error(vec![ContentBlock::text(format!(
            "[{}] {}",
            f.kind, f.message
        ))]),
    }
}
