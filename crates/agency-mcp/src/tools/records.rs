//! Record tools: what an agent reads about its own work — the receipt of
//! a message it sent (`mail_status`), a KB file's access log (`kb_audit`)
//! and the outcomes it (or a direct underling) is responsible for
//! (`outcome_list`).

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
    ]
}

const MAIL_STATUS: &str = "The receipt of one message you sent or received, by its UUID (from mail_send): when it was sent, when it was (or is due to be) delivered, and whether and when the recipient acknowledged it. \
Use it to see whether your boss or an underling has processed what you sent before you write again. Errors: not_found for a message that is neither from nor to you.";

const KB_AUDIT: &str = "The access log of a Knowledge Base file you may read (UUID or kb://UUID): who read, created and wrote it, with handler, agent, version and time, newest first. \
Errors: not_found if the file does not exist for you; permission_denied without Read access.";

const OUTCOME_LIST: &str = "The outcomes your handler (default) or a direct underling is responsible for, highest priority first: UUID, title, status, priority. \
Finished (completed or closed) outcomes are left out unless `include_finished` is true. Errors: not_found for a handler that is not yours, your boss's or a direct underling's.";

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
