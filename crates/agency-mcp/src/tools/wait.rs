//! `mail_wait`: a warm agent's long poll for mail. It
//! answers at once when the caller's handler has delivered, unacknowledged
//! mail it does not already know of, else waits — on the service's events,
//! not a blocked thread — until such mail is delivered, the wait times out,
//! or the daemon asks the agent to give its slot back (`released`).
//!
//! Unlike every other tool it is async (a wait must not hold one of the
//! few blocking threads) and it is not charged to the tool-call budget:
//! an agent parked here costs nothing but wall-clock time, which is what
//! a warm agent is for (the wall-clock budget still runs). Identity comes
//! from the token as everywhere: the tool has no handler argument, so an
//! agent can only ever wait on its own handler's inbox.

use std::sync::Arc;
use std::time::Duration;

use agency_api::MailWait;
use agency_core::{MailTarget, MessageId, Principal};
use agency_service::{Event, Service};
use rmcp::ErrorData;
use rmcp::handler::server::router::tool::ToolRoute;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::model::{CallToolResponse, Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde::Deserialize;
use tokio::sync::broadcast;

use crate::reply::{ToolError, ToolResult, into_call_result, json};
use crate::server::AgencyMcp;
use crate::{AgentIdentity, WarmPool, args};

/// The longest one call waits (ms): an MCP request held open longer than a
/// few minutes meets client and proxy timeouts; a warm agent calls again.
pub const MAX_WAIT_MS: u64 = 120_000;
/// The wait when `timeout_ms` is not given.
const DEFAULT_WAIT_MS: u64 = 60_000;
/// Most message headers one answer lists.
const MAX_LISTED: usize = 20;
/// Most ids `ignore` takes.
const MAX_IGNORED: usize = 1000;

const MAIL_WAIT: &str = "Wait for new mail without spending anything but time. Returns at once with {\"status\":\"mail\",\"messages\":[{id,from,subject}]} when your inbox holds delivered, unacknowledged messages (other than those in `ignore`), \
else waits until one is delivered ({\"status\":\"mail\",…}); with `conversation` (an agent_call's `conversation_id`) only that conversation's requests and replies to you count (delegate and wait), `timeout_ms` passes ({\"status\":\"timeout\"}), or Agency needs your slot for other work ({\"status\":\"released\"}: save your state and end your run). \
Read the messages with mail_inbox. Not charged to your tool-call budget. Errors: permission_denied once you are no longer a live agent.";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct WaitArgs {
    /// The longest wait in milliseconds (default 60000, at most 120000).
    timeout_ms: Option<u64>,
    /// UUIDs of messages you already know of: they do not end the wait.
    #[serde(default)]
    ignore: Vec<String>,
    /// UUID of a conversation of typed calls (agent_call's `conversation_id`): wait only for its requests and replies to you.
    conversation: Option<String>,
}

pub(super) fn route() -> ToolRoute<AgencyMcp> {
    let annotations = ToolAnnotations::new()
        .read_only(true)
        .destructive(false)
        .idempotent(true)
        .open_world(false);
    let attr = Tool::new("mail_wait", MAIL_WAIT, super::input_schema::<WaitArgs>())
        .with_annotations(annotations);
    ToolRoute::new_dyn(attr, |ctx| Box::pin(run(ctx)))
}

async fn run(ctx: ToolCallContext<'_, AgencyMcp>) -> Result<CallToolResponse, ErrorData> {
    let identity = ctx.service.identity(&ctx.request_context)?;
    let svc = ctx.service.service();
    let warm = ctx.service.warm();
    let a: WaitArgs = match args::parse(&ctx.name, ctx.arguments) {
        Ok(a) => a,
        Err(e) => return Ok(into_call_result(Err(e)).into()),
    };
    let span = tracing::info_span!(
        "tool",
        name = "mail_wait",
        handler = %identity.handler,
        agent = %identity.agent,
    );
    let outcome = tracing::Instrument::instrument(wait(svc, warm, identity, a), span).await;
    Ok(into_call_result(outcome).into())
}

/// Unparks the agent when the wait ends, however it ends (an answer, an
/// error, or the client going away and the request being dropped).
struct Parked {
    pool: Arc<dyn WarmPool>,
    caller: AgentIdentity,
}

impl Drop for Parked {
    fn drop(&mut self) {
        self.pool.unpark(&self.caller);
    }
}

async fn wait(
    svc: Arc<Service>,
    warm: Option<Arc<dyn WarmPool>>,
    caller: AgentIdentity,
    a: WaitArgs,
) -> ToolResult {
    let timeout = Duration::from_millis(a.timeout_ms.unwrap_or(DEFAULT_WAIT_MS).min(MAX_WAIT_MS));
    if a.ignore.len() > MAX_IGNORED {
        return Err(ToolError::invalid(format!(
            "failed to wait for mail: `ignore` lists {} ids, at most {MAX_IGNORED} are accepted",
            a.ignore.len()
        )));
    }
    let known: Arc<Vec<MessageId>> = Arc::new(args::ids("ignore", &a.ignore)?);
    let conversation =
        args::opt_id::<agency_core::ConversationId>("conversation", a.conversation.as_deref())?;
    let deadline = tokio::time::Instant::now() + timeout;
    // Subscribe before the first look, so a delivery between the look and
    // the wait is not missed.
    let mut events = svc.subscribe();
    let released = warm.as_ref().map(|w| w.park(&caller));
    let _parked = warm.map(|pool| Parked {
        pool,
        caller: caller.clone(),
    });
    let released = released.unwrap_or_default();
    let who = Principal::agent(caller.handler, caller.agent);
    loop {
        // Giving the slot back comes first: new mail then goes to the next
        // agent of the handler, started when a slot is free.
        if released.is_cancelled() {
            return json(&MailWait::Released);
        }
        let (s, k) = (svc.clone(), known.clone());
        let waiting = tokio::task::spawn_blocking(move || match conversation {
            Some(c) => s.mail_waiting_in(who, c, &k, MAX_LISTED),
            None => s.mail_waiting(who, &k, MAX_LISTED),
        })
        .await
        .map_err(|e| ToolError::internal(format!("failed to read the inbox: {e}")))??;
        if !waiting.is_empty() {
            return json(&MailWait::Mail { messages: waiting });
        }
        // Sleep until something that concerns this agent happens.
        loop {
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => {
                    return json(&MailWait::Timeout);
                }
                () = released.cancelled() => break,
                ev = events.recv() => match ev {
                    Ok(Event::MessageDelivered { to: MailTarget::Handler(h), .. })
                        if h == caller.handler => break,
                    // Its token revoked or its handler stopped: the next
                    // look is refused, which ends the wait.
                    Ok(Event::AgentEnded { agent, .. }) if agent == caller.agent => break,
                    Ok(Event::HandlerStopped { handler, .. }) if handler == caller.handler => break,
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(_)) => break,
                    Err(broadcast::error::RecvError::Closed) => {
                        return json(&MailWait::Timeout);
                    }
                },
            }
        }
    }
}
