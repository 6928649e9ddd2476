//! State document and audit log tools: the continuity an agent leaves for
//! the next agent of its handler, and the record its boss reviews.

use agency_core::HandlerId;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::args;
use crate::reply::{ToolResult, json};
use crate::tools::kb::file_content;
use crate::tools::{Call, Effect, tool};

pub(super) fn routes() -> Vec<super::Declared> {
    vec![
        tool("state_read", STATE_READ, Effect::Read, state_read),
        tool("state_write", STATE_WRITE, Effect::Write, state_write),
        tool("audit_read", AUDIT_READ, Effect::Read, audit_read_paged),
        tool("audit_submit", AUDIT_SUBMIT, Effect::Write, audit_submit),
    ]
}

const STATE_READ: &str = "Read a handler's state document: your own by default (read it first when you start: it is what earlier agents of your handler left you), or a direct underling's. \
Returns content, version and hash like kb_read; keep version and hash for state_write. \
Errors: not_found for a handler that is neither you nor your underling.";

const STATE_WRITE: &str = "Replace your own state document: what the next agent of your handler needs to continue (goals, progress, decisions, open questions, kb:// links). \
Compare-and-set like kb_write: pass the `base_version` and `base_hash` from state_read or your last state_write; on a conflict re-read, merge and write again. \
Content is exactly one of `content` (inline text) or `path` (a file in your workspace). Errors: conflict, invalid_input, invalid_path.";

const AUDIT_READ: &str = "Read a handler's audit log entries, oldest first: your own by default, or a direct underling's (to review its work). \
A page holds at most `limit` entries and about 256 KiB; pass the returned `next_after` as `after` for the next page (absent on the last). The audit log file shows only the newest entries. \
Errors: not_found for a handler whose log you may not read.";

const AUDIT_SUBMIT: &str = "Append a summary of what you did in this session to your handler's audit log (your boss reads it). \
Submit one before you finish or exit: what you did, what changed, what is left. Errors: invalid_input for an empty or over-long summary.";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct OptionalHandlerArgs {
    /// UUID of the handler (default: your own).
    handler: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct StateWriteArgs {
    /// The version your new state is based on (from state_read or your last state_write).
    base_version: i64,
    /// The hash of that version (blake3:...).
    base_hash: String,
    /// The new state document as inline text. Give this or `path`, not both.
    content: Option<String>,
    /// A file in your workspace holding the new state document. Give this or `content`, not both.
    path: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SubmitArgs {
    /// What you did, what changed, and what is left.
    summary: String,
}

fn state_read(call: &Call, a: OptionalHandlerArgs) -> ToolResult {
    let handler: Option<HandlerId> = args::opt_id("handler", a.handler.as_deref())?;
    file_content(call.svc.state_read(call.who(), handler)?)
}

fn state_write(call: &Call, a: StateWriteArgs) -> ToolResult {
    let content = args::content(call, a.content, a.path.as_deref())?;
    json(
        &call
            .svc
            .state_write(call.who(), &content, a.base_version, a.base_hash.trim())?,
    )
}

fn audit_submit(call: &Call, a: SubmitArgs) -> ToolResult {
    call.svc.audit_submit(call.who(), &a.summary)?;
    json(&agency_api::AuditSubmitted { submitted: true })
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct AuditReadArgs {
    /// UUID of the handler (default: your own).
    handler: Option<String>,
    /// Continue after this entry (the `next_after` of the previous page).
    after: Option<i64>,
    /// Most entries to return (default 200, at most 1000).
    limit: Option<u32>,
}

fn audit_read_paged(call: &Call, a: AuditReadArgs) -> ToolResult {
    let handler: Option<HandlerId> = args::opt_id("handler", a.handler.as_deref())?;
    let page = call
        .svc
        .audit_read_page(call.who(), handler, a.after, args::limit(a.limit))?;
    json(&agency_api::AuditPage {
        handler: handler.unwrap_or(call.identity.handler),
        entries: page.items,
        next_after: page.next,
    })
}
