//! Typed calls between agents: `agent_call` calls a verb of
//! another organisation agent with a JSON input and, with `wait`, waits
//! for the answer; `agent_reply` answers a call. Checking the input and the
//! output against the verb's schemas, permissions and budgets are the
//! service's (`calls/`); this file parses arguments and, for `wait`, waits
//! on the service's events (not a blocked thread) like `mail_wait`.

use std::sync::Arc;
use std::time::Duration;

use agency_core::{CallId, MailTarget, Principal};
use agency_service::{CallAnswer, CallRequest, Event, Service};
use rmcp::ErrorData;
use rmcp::handler::server::router::tool::ToolRoute;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{CallToolResponse, CallToolResult, Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::wait::MAX_WAIT_MS;
use super::{Call, Declared, DirectFn, Effect, Invocation, Placement, execute, input_schema, tool};
use crate::args;
use crate::reply::{ToolError, ToolResult, into_call_result, json};
use crate::server::AgencyMcp;

const AGENT_CALL: &str = "Call a verb of another agent of your organisation as a tool: `target` is its agent name (or handler UUID), `verb` one of the verbs it declares, `input` a JSON value matching the verb's input schema. \
You may call only agents you may mail (your boss, your underlings, your connections). The input is checked before anything is sent: a mismatch is refused as [schema_violation] with its issues (instancePath, keyword, message); fix the input and call again. \
The call travels as mail to the callee; returns {request_id, conversation_id, message, callee, hops, steps_left}. Then either carry on (the reply arrives as mail in your inbox) or wait: give `wait` (milliseconds, at most 120000) to wait here for the answer, or later call mail_wait with `conversation`. \
A call you make while serving a call made to you is nested: it shares that call tree's step budget (`steps` of the top-level call, default 8) and is refused as [quota] once the budget is spent. \
Errors: permission_denied (you may not mail that agent), not_found (no such agent or verb), schema_violation, quota (step budget or hop limit).";

const AGENT_REPLY: &str = "Answer a typed call made to you (its mail says `request_id` and the verb's `output_schema`): give `output`, a JSON value matching the verb's output schema, or `error`, a short text saying why it cannot be done (exactly one). \
An output that does not match is refused as [schema_violation] with its issues (instancePath, keyword, message) and nothing is sent: fix it and call agent_reply again. \
A valid answer is delivered to the caller as mail in the call's conversation. A call is answered once; only its callee may answer. \
Returns {request_id, conversation_id, message, type}. Errors: not_found (no call of that id made to you), invalid_input (already answered, or both/neither of output and error), schema_violation.";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CallArgs {
    /// The callee: an agent name of your organisation, or a handler UUID.
    target: String,
    /// The verb to call, as the callee declares it.
    verb: String,
    /// The input: a JSON value matching the verb's input schema.
    input: Value,
    /// Milliseconds to wait for the answer here (absent or 0: return once sent; at most 120000).
    wait: Option<u64>,
    /// For a top-level call, how many nested calls its whole call tree may make (default 8, at most 64).
    steps: Option<u32>,
    /// UUID of the call you are serving, if this call is made for it (default: the newest call still open to you).
    within: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ReplyArgs {
    /// The call's UUID, from the request mail's envelope.
    request_id: String,
    /// The answer: a JSON value matching the verb's output schema. Give this or `error`.
    output: Option<Value>,
    /// Why the call cannot be done. Give this or `output`.
    error: Option<String>,
}

pub(super) fn routes() -> Vec<Declared> {
    vec![
        call_tool(),
        tool("agent_reply", AGENT_REPLY, Effect::Write, agent_reply),
    ]
}

/// `agent_call` is declared by hand: it is charged and logged like any
/// tool (`execute`), then may wait asynchronously for the answer.
fn call_tool() -> Declared {
    let annotations = ToolAnnotations::new()
        .read_only(false)
        .destructive(false)
        .idempotent(false)
        .open_world(false);
    let attr = Tool::new("agent_call", AGENT_CALL, input_schema::<CallArgs>())
        .with_annotations(annotations);
    let route = ToolRoute::new_dyn(attr, |ctx| Box::pin(via_rmcp(ctx)));
    let direct: DirectFn = Arc::new(|invocation| Box::pin(call_and_wait(invocation)));
    Declared {
        route,
        direct: Some(direct),
    }
}

async fn via_rmcp(ctx: ToolCallContext<'_, AgencyMcp>) -> Result<CallToolResponse, ErrorData> {
    let identity = ctx.service.identity(&ctx.request_context)?;
    let invocation = Invocation {
        svc: ctx.service.service(),
        identity,
        repos: ctx.service.repos(),
        arguments: ctx.arguments,
    };
    Ok(call_and_wait(invocation).await.into())
}

fn agent_call(c: &Call, a: CallArgs) -> ToolResult {
    let within = args::opt_id::<CallId>("within", a.within.as_deref())?;
    if a.wait.is_some_and(|w| w > MAX_WAIT_MS) {
        return Err(ToolError::invalid(format!(
            "failed to call verb `{}`: `wait` is at most {MAX_WAIT_MS} ms; call mail_wait with the conversation to wait longer",
            a.verb
        )));
    }
    let sent = c.svc.agent_call(
        c.who(),
        &CallRequest {
            target: a.target.trim(),
            verb: a.verb.trim(),
            input: &a.input,
            steps: a.steps,
            within,
        },
    )?;
    json(&sent)
}

fn agent_reply(c: &Call, a: ReplyArgs) -> ToolResult {
    let id = args::id::<CallId>("request_id", &a.request_id)?;
    let answer = match (&a.output, &a.error) {
        (Some(o), None) => CallAnswer::Output(o),
        (None, Some(e)) => CallAnswer::Error(e),
        _ => {
            return Err(ToolError::invalid(format!(
                "failed to answer call {id}: give exactly one of `output` and `error`"
            )));
        }
    };
    json(&c.svc.agent_reply(c.who(), id, answer)?)
}

/// Send the call; with `wait`, wait for its answer and return both.
async fn call_and_wait(invocation: Invocation) -> CallToolResult {
    let wait_ms = invocation
        .arguments
        .as_ref()
        .and_then(|a| a.get("wait"))
        .and_then(Value::as_u64)
        .unwrap_or(0)
        .min(MAX_WAIT_MS);
    let (svc, identity) = (invocation.svc.clone(), invocation.identity.clone());
    let sent = execute("agent_call", invocation, agent_call, Placement::Blocking).await;
    if wait_ms == 0 || sent.is_error == Some(true) {
        return sent;
    }
    let Some(sent_json) = sent.structured_content.clone() else {
        return sent;
    };
    let Some(id) = sent_json
        .get("request_id")
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<CallId>().ok())
    else {
        return sent;
    };
    let who = Principal::agent(identity.handler, identity.agent);
    let outcome = wait_for_answer(svc, who, identity.handler, id, wait_ms)
        .await
        .map(|view| match view {
            Some(v) => json!({ "status": "answered", "sent": sent_json, "call": v }),
            None => json!({ "status": "timeout", "sent": sent_json }),
        });
    into_call_result(outcome)
}

/// The call once it is no longer pending, or `None` at the timeout.
async fn wait_for_answer(
    svc: Arc<Service>,
    who: Principal,
    handler: agency_core::HandlerId,
    id: CallId,
    wait_ms: u64,
) -> Result<Option<agency_api::CallView>, ToolError> {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(wait_ms);
    // Subscribe before the first look, so an answer between the look and
    // the wait is not missed.
    let mut events = svc.subscribe();
    loop {
        let s = svc.clone();
        let view = tokio::task::spawn_blocking(move || s.call_view(who, id))
            .await
            .map_err(|e| ToolError::internal(format!("failed to read call {id}: {e}")))??;
        if view.status != "pending" {
            return Ok(Some(view));
        }
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => return Ok(None),
                ev = events.recv() => match ev {
                    Ok(Event::MessageDelivered { to: MailTarget::Handler(h), .. }) if h == handler => break,
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(_)) => break,
                    Err(broadcast::error::RecvError::Closed) => return Ok(None),
                },
            }
        }
    }
}
