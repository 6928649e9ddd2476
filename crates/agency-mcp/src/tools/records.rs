//! Record tools: what an agent reads about its own work — the receipt of
//! a message it sent (`mail_status`), a KB file's access log (`kb_audit`)
//! the outcomes it (or a direct underling) is responsible for
//! (`outcome_list`) and the event log of its subtree (`events_read`).

use agency_api::{HandlerOutcomes, KbAuditLog};
use agency_core::{FileId, HandlerId, MessageId, OutcomeStatus};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::args;
use crate::reply::{ToolResult, json};
use crate::tools::{Call, Effect, tool};

pub(super) fn routes() -> Vec<super::Declared> {
    vec![
        tool("mail_status", MAIL_STATUS, Effect::Read, mail_status),
        tool("kb_audit", KB_AUDIT, Effect::Read, kb_audit),
        tool("outcome_list", OUTCOME_LIST, Effect::Read, outcome_list),
        tool("events_read", EVENTS_READ, Effect::Read, events_read),
    ]
}

const MAIL_STATUS: &str = "The receipt of one message you sent or received, by its UUID (from mail_send): when it was sent, when it was (or is due to be) delivered, and whether and when the recipient acknowledged it. \
Use it to see whether your boss or an underling has processed what you sent before you write again. Errors: not_found for a message that is neither from nor to you.";

const KB_AUDIT: &str = "The access log of a Knowledge Base file you may read (UUID or kb://UUID): who read, created and wrote it, with handler, agent, version and time, newest first. \
Errors: not_found if the file does not exist for you; permission_denied without Read access.";

const OUTCOME_LIST: &str = "The outcomes your handler (default) or a direct underling is responsible for, highest priority first: UUID, title, status, priority. \
Finished (completed or closed) outcomes are left out unless `include_finished` is true. Errors: not_found for a handler that is not yours, your boss's or a direct underling's.";

const EVENTS_READ: &str = "What happened in your part of the organisation, oldest first: the event log of your handler and the handlers below it (mail sent and acknowledged, outcomes created and changed, delegations, agents started and ended, model and tool calls, flagged calls, budgets, stalls). \
Each event has a number (`seq`), a time, a kind such as `mail.sent` or `agent.ended`, the handler it is about and a one-line summary. Pass the page's `next` as `after` to read on. \
Filter with `handler` (one of your underlings, with `subtree` for those below it too), `kinds` (kinds or families such as `mail`, `outcome`, `agent`, `tool`) and `limit` (default 100, at most 1000). \
Errors: permission_denied for a handler outside your subtree; invalid_input for an unknown kind.";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct EventsReadArgs {
    /// Only events numbered above this (the `next` of the previous page); default 0.
    after: Option<i64>,
    /// Handler UUID: yours or one below you (default: your whole subtree).
    handler: Option<String>,
    /// With `handler`: also the handlers below it.
    #[serde(default)]
    subtree: bool,
    /// Kinds (`mail.sent`) or families (`mail`); default all.
    #[serde(default)]
    kinds: Vec<String>,
    /// Most events to return (default 100, at most 1000).
    limit: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct MailStatusArgs {
    /// UUID of the message.
    message: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct KbAuditArgs {
    /// UUID (or kb://UUID) of the file.
    file: String,
    /// Most entries to return (default 200, at most 1000).
    limit: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct OutcomeListArgs {
    /// Handler UUID: yours (the default) or a direct underling's.
    handler: Option<String>,
    /// Also list completed and closed outcomes (default false).
    #[serde(default)]
    include_finished: bool,
}

fn events_read(call: &Call, a: EventsReadArgs) -> ToolResult {
    let q = agency_service::EventQuery {
        after: a.after.unwrap_or(0),
        handler: args::opt_id("handler", a.handler.as_deref())?,
        subtree: a.subtree,
        kinds: a.kinds,
        since: None,
        limit: a.limit.map(|l| usize::try_from(l).unwrap_or(usize::MAX)),
    };
    json(&call.svc.events_read(call.who(), &q)?)
}

fn mail_status(call: &Call, a: MailStatusArgs) -> ToolResult {
    let id: MessageId = args::id("message", &a.message)?;
    json(&call.svc.mail_status(call.who(), id)?)
}

fn kb_audit(call: &Call, a: KbAuditArgs) -> ToolResult {
    let file: FileId = args::id("file", &a.file)?;
    let entries = call.svc.kb_audit(call.who(), file, args::limit(a.limit))?;
    json(&KbAuditLog { file, entries })
}

fn outcome_list(call: &Call, a: OutcomeListArgs) -> ToolResult {
    let handler: HandlerId =
        args::opt_id("handler", a.handler.as_deref())?.unwrap_or(call.identity.handler);
    let outcomes: Vec<_> = call
        .svc
        .outcomes_of(call.who(), handler)?
        .into_iter()
        .filter(|o| {
            a.include_finished
                || !matches!(o.status, OutcomeStatus::Completed | OutcomeStatus::Closed)
        })
        .collect();
    json(&HandlerOutcomes { handler, outcomes })
}
