//! The tool table: how one tool is declared (name, description, argument
//! type, blocking body) and how a call runs, plus the router of all tools.
//!
//! Every call takes the same path: read the caller's identity from the
//! request, parse the arguments (a bad argument is a tool error the agent
//! can correct, not a protocol error), run the body, and turn its outcome
//! into an MCP result. Bodies are plain functions of `(&Call, Args)`, so
//! each tool file reads as a list of service calls.
//!
//! Where a body runs: a read is a few SQLite pages and at most
//! one blob from the page cache, tens of microseconds, so it runs inline on
//! the async worker that received the request; handing it to the blocking
//! pool and back cost more than the read itself. Anything that writes
//! (an fsync, milliseconds) or may wait on the network runs on the blocking
//! pool, so it never stalls the workers that serve every other agent.

mod audit;
mod calls;
mod kb;
mod mail;
mod memory;
mod outcomes;
mod permissions;
mod records;
mod repos;
mod runs;
mod wait;

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use agency_core::Principal;
use agency_service::Service;
use rmcp::ErrorData;
use rmcp::handler::server::router::tool::{ToolRoute, ToolRouter};
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{
    CallToolResponse, CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations,
};
use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::de::DeserializeOwned;

use crate::AgentIdentity;
use crate::args;
use crate::reply::{ToolError, ToolResult, into_call_result};
use crate::server::AgencyMcp;

/// One tool call in progress: the service and who is calling.
#[derive(Debug)]
pub(crate) struct Call {
    pub svc: Arc<Service>,
    pub identity: AgentIdentity,
    pub repos: Option<Arc<dyn crate::RepoCache>>,
}

impl Call {
    /// The principal every service call is made as.
    pub fn who(&self) -> Principal {
        Principal::agent(self.identity.handler, self.identity.agent)
    }
}

/// A tool's body: runs inline or on a blocking thread ([`Placement`]).
pub(crate) type Body<A> = fn(&Call, A) -> ToolResult;

/// Where a tool's body runs (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placement {
    /// On the async worker that took the request: short local reads.
    Inline,
    /// On tokio's blocking pool: writes (fsync) and anything that may wait.
    Blocking,
}

impl Placement {
    fn of(name: &str, effect: Effect) -> Placement {
        match effect {
            // memory_search may ask the embeddings endpoint (a network call
            // of up to seconds) when semantic search is configured.
            Effect::Read if name != "memory_search" => Placement::Inline,
            _ => Placement::Blocking,
        }
    }
}

/// What a tool does to Agency's state, for the MCP annotations clients use
/// to decide about confirmation and retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Effect {
    /// Reads only; calling again changes nothing.
    Read,
    /// Adds or changes state without destroying any.
    Write,
    /// Finishes, revokes or stops things that cannot be undone.
    Destructive,
}

/// One declared tool: its route for rmcp and the same call without rmcp's
/// request context, for the endpoint's direct path (`direct.rs`).
pub(crate) struct Declared {
    pub route: ToolRoute<AgencyMcp>,
    pub direct: Option<DirectFn>,
}

/// A tool call made without rmcp: who calls, with which arguments.
pub(crate) struct Invocation {
    pub svc: Arc<Service>,
    pub identity: AgentIdentity,
    pub repos: Option<Arc<dyn crate::RepoCache>>,
    pub arguments: Option<JsonObject>,
}

/// A tool as the direct path calls it.
pub(crate) type DirectFn = Arc<
    dyn Fn(Invocation) -> std::pin::Pin<Box<dyn Future<Output = CallToolResult> + Send>>
        + Send
        + Sync,
>;

/// Declare a tool.
pub(crate) fn tool<A>(
    name: &'static str,
    description: &'static str,
    effect: Effect,
    body: Body<A>,
) -> Declared
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
{
    let annotations = ToolAnnotations::new()
        .read_only(effect == Effect::Read)
        .destructive(effect == Effect::Destructive)
        .idempotent(effect == Effect::Read)
        .open_world(false);
    let attr = Tool::new(name, description, input_schema::<A>()).with_annotations(annotations);
    let placement = Placement::of(name, effect);
    let route = ToolRoute::new_dyn(attr, move |ctx| {
        Box::pin(via_rmcp(ctx, name, body, placement))
    });
    let direct: DirectFn = Arc::new(move |call| Box::pin(execute(name, call, body, placement)));
    Declared {
        route,
        direct: Some(direct),
    }
}

/// A call that came through rmcp's router (`tools.rs` doc; the direct path
/// in `direct.rs` skips this): the same call, with the identity taken from
/// rmcp's request context.
async fn via_rmcp<A>(
    ctx: ToolCallContext<'_, AgencyMcp>,
    name: &'static str,
    body: Body<A>,
    placement: Placement,
) -> Result<CallToolResponse, ErrorData>
where
    A: DeserializeOwned + Send + 'static,
{
    // No identity is a broken deployment, not a mistake the agent can fix:
    // answer with a protocol error.
    let identity = ctx.service.identity(&ctx.request_context)?;
    let call = Invocation {
        svc: ctx.service.service(),
        identity,
        repos: ctx.service.repos(),
        arguments: ctx.arguments,
    };
    Ok(execute(name, call, body, placement).await.into())
}

/// Run one call of tool `name`: parse, charge, run the body where it
/// belongs, and make the MCP result.
async fn execute<A>(
    name: &'static str,
    invocation: Invocation,
    body: Body<A>,
    placement: Placement,
) -> CallToolResult
where
    A: DeserializeOwned + Send + 'static,
{
    let Invocation {
        svc,
        identity,
        repos,
        arguments,
    } = invocation;
    let started = std::time::Instant::now();
    let digest = agency_service::args_digest(&arguments);
    let step = Step {
        svc: svc.clone(),
        who: Principal::agent(identity.handler, identity.agent),
        name,
        digest,
        started,
    };
    let args: A = match args::parse(name, arguments) {
        Ok(a) => a,
        Err(e) => {
            step.done(Some(&e));
            return into_call_result(Err(e));
        }
    };
    // One span per tool call, with who called (ids only: never a token),
    // carried onto the blocking thread so the service's operation spans
    // nest under it in the daemon's log.
    let span = tracing::info_span!(
        "tool",
        name = %name,
        handler = %identity.handler,
        agent = %identity.agent,
    );
    let call = Call {
        svc,
        identity,
        repos,
    };
    // A read goes inline unless the caller's budgets must be charged for it
    // (a durable write); a failure to check goes the charge's way, which
    // answers it.
    let inline = placement == Placement::Inline
        && span
            .in_scope(|| call.svc.tool_call_charge_due(call.who()))
            .is_ok_and(|due| !due);
    let inner = span.clone();
    // Every call is charged to the caller's budgets first (the one place
    // all Agency tools pass): refused at the tool-call limit; an 80%
    // notice due is added to the result, where the agent reads it.
    let run = move |charge: bool| {
        inner.in_scope(|| {
            if !charge {
                return (body(&call, args), None);
            }
            match call.svc.tool_call_charge(call.who()) {
                Err(e) => (Err(ToolError::from(e)), None),
                Ok(notice) => (body(&call, args), notice),
            }
        })
    };
    let (outcome, notice) = match inline {
        // Checked just now: nothing to charge.
        true => run(false),
        false => match tokio::task::spawn_blocking(move || run(true)).await {
            Ok(r) => r,
            Err(e) => (
                Err(ToolError::internal(format!(
                    "failed to run tool {name}: {e}"
                ))),
                None,
            ),
        },
    };
    step.done(outcome.as_ref().err());
    span.in_scope(|| match &outcome {
        Ok(_) => tracing::debug!("tool call succeeded"),
        Err(e) if e.kind == "internal" => tracing::warn!(error = %e.message, "tool call failed"),
        Err(e) => tracing::debug!(kind = e.kind, "tool call refused"),
    });
    let mut result = into_call_result(outcome);
    if let Some(n) = notice {
        result.content.push(ContentBlock::text(n));
    }
    result
}

/// A tool call being made, for the event log: logged once it ended.
struct Step {
    svc: Arc<Service>,
    who: Principal,
    name: &'static str,
    digest: String,
    started: std::time::Instant,
}

impl Step {
    fn done(self, error: Option<&ToolError>) {
        let step = agency_service::ToolStep {
            tool: self.name.to_owned(),
            args_digest: self.digest,
            error_kind: error.map(|e| e.kind.to_owned()),
            error: error.map(|e| e.message.clone()),
            duration_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            call_id: None,
            at_admission: false,
        };
        // Logging never fails the call it describes.
        if let Err(e) = self.svc.record_tool_call(self.who, step) {
            tracing::debug!(error = %e, "failed to log a tool call");
        }
    }
}

/// The JSON Schema of a tool's arguments, with every subschema inlined (no
/// `$ref`/`$defs`) so that simple model servers and strict clients accept
/// it, and without the wrapper type's title and doc (noise to the model).
fn input_schema<A: JsonSchema>() -> Arc<JsonObject> {
    let settings = SchemaSettings::draft2020_12().with(|s| s.inline_subschemas = true);
    let schema = settings.into_generator().into_root_schema_for::<A>();
    let serde_json::Value::Object(mut obj) = schema.to_value() else {
        // Argument types are structs: a non-object schema is a bug here.
        panic!("the argument schema of a tool is not a JSON object");
    };
    for key in ["$schema", "title", "description"] {
        obj.remove(key);
    }
    Arc::new(obj)
}

/// Every tool, built once: rmcp's router, and the direct table of the
/// tools that can be called without rmcp (all but `mail_wait`).
pub(crate) fn build() -> (ToolRouter<AgencyMcp>, HashMap<&'static str, DirectFn>) {
    let mut router = ToolRouter::new();
    let mut direct = HashMap::new();
    for declared in kb::routes()
        .into_iter()
        .chain(outcomes::routes())
        .chain(mail::routes())
        .chain(permissions::routes())
        .chain(audit::routes())
        .chain(repos::routes())
        .chain(records::routes())
        .chain(runs::routes())
        .chain(memory::routes())
        .chain(calls::routes())
        .chain([Declared {
            route: wait::route(),
            direct: None,
        }])
    {
        if let (Some(f), Cow::Borrowed(name)) = (declared.direct, &declared.route.attr.name) {
            direct.insert(*name, f);
        }
        router.add_route(declared.route);
    }
    (router, direct)
}

/// rmcp's router of every tool.
pub(crate) fn router() -> ToolRouter<AgencyMcp> {
    build().0
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::TOOL_NAMES;

    #[test]
    fn router_has_exactly_the_contract_tools() {
        let r = router();
        let mut listed: Vec<String> = r.list_all().iter().map(|t| t.name.to_string()).collect();
        listed.sort();
        let mut want: Vec<String> = TOOL_NAMES.iter().map(|s| s.to_string()).collect();
        want.sort();
        assert_eq!(listed, want);
    }

    #[test]
    fn schemas_are_flat_objects_that_refuse_unknown_fields() {
        for t in router().list_all() {
            let s = &t.input_schema;
            assert_eq!(
                s.get("type"),
                Some(&serde_json::json!("object")),
                "{}",
                t.name
            );
            assert_eq!(
                s.get("additionalProperties"),
                Some(&serde_json::json!(false)),
                "{}",
                t.name
            );
            let text = serde_json::to_string(s.as_ref()).unwrap();
            assert!(!text.contains("$ref"), "{}: {text}", t.name);
            assert!(
                t.description.as_deref().is_some_and(|d| d.len() > 80),
                "{}",
                t.name
            );
        }
    }

    #[test]
    fn every_argument_is_documented() {
        for t in router().list_all() {
            let Some(props) = t.input_schema.get("properties").and_then(|p| p.as_object()) else {
                continue;
            };
            for (name, p) in props {
                assert!(
                    p.get("description").is_some(),
                    "{}.{name} has no description",
                    t.name
                );
            }
        }
    }

    /// Every success is an `agency-api` type serialized by `reply::json`:
    /// JSON built by hand in a tool body would be a wire format no type
    /// states and no golden test of the types would catch.
    #[test]
    fn tool_results_are_wire_types_not_ad_hoc_json() {
        let sources = [
            ("audit.rs", include_str!("tools/audit.rs")),
            ("kb.rs", include_str!("tools/kb.rs")),
            ("mail.rs", include_str!("tools/mail.rs")),
            ("memory.rs", include_str!("tools/memory.rs")),
            ("outcomes.rs", include_str!("tools/outcomes.rs")),
            ("permissions.rs", include_str!("tools/permissions.rs")),
            ("records.rs", include_str!("tools/records.rs")),
            ("repos.rs", include_str!("tools/repos.rs")),
            ("runs.rs", include_str!("tools/runs.rs")),
            ("wait.rs", include_str!("tools/wait.rs")),
        ];
        for (file, src) in sources {
            for bad in ["json!(", "serde_json::Value", "Map::new("] {
                assert!(
                    !src.contains(bad),
                    "tools/{file} builds a result with {bad}: return an agency-api type through reply::json"
                );
            }
        }
    }
}
