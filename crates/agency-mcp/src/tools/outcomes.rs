//! Outcome tools: view the DAG around an outcome, create and update
//! outcomes, finish and reopen them, and request completion of one's own
//! root.

use agency_api::{OutcomeChains, OutcomeCreated, OutcomeHistoryPage};
use agency_core::{OutcomeId, OutcomeStatus};
use agency_service::{NewOutcome, OutcomeUpdate};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::args;
use crate::reply::{ToolError, ToolResult, json};
use crate::tools::{Call, Effect, tool};

pub(super) fn routes() -> Vec<super::Declared> {
    vec![
        tool("outcome_view", OUTCOME_VIEW, Effect::Read, outcome_view),
        tool(
            "outcome_ancestors",
            OUTCOME_ANCESTORS,
            Effect::Read,
            outcome_ancestors,
        ),
        tool(
            "outcome_subtree",
            OUTCOME_SUBTREE,
            Effect::Read,
            outcome_subtree,
        ),
        tool(
            "outcome_history",
            OUTCOME_HISTORY,
            Effect::Read,
            outcome_history,
        ),
        tool(
            "outcome_create",
            OUTCOME_CREATE,
            Effect::Write,
            outcome_create,
        ),
        tool(
            "outcome_update",
            OUTCOME_UPDATE,
            Effect::Write,
            outcome_update,
        ),
        tool(
            "outcome_complete",
            OUTCOME_COMPLETE,
            Effect::Destructive,
            outcome_complete,
        ),
        tool(
            "outcome_close",
            OUTCOME_CLOSE,
            Effect::Destructive,
            outcome_close,
        ),
        tool(
            "outcome_request_completion",
            OUTCOME_REQUEST_COMPLETION,
            Effect::Write,
            outcome_request_completion,
        ),
        tool(
            "outcome_reopen",
            OUTCOME_REOPEN,
            Effect::Write,
            outcome_reopen,
        ),
    ]
}

const OUTCOME_HISTORY: &str = "Page through an outcome's whole history, oldest first: who did what and when, with each event's full detail. \
A page holds at most `limit` events and about 256 KiB; pass the returned `next_after` as `after` for the next page (absent on the last). \
Errors: not_found if the outcome does not exist or is outside your area.";

const OUTCOME_VIEW: &str = "Show one outcome: title, description, status (and its reason), priority, responsible handler, what you may do with it, its immediate parents and children that you can see, the handler it was delegated to, and its newest history events (`history_total` counts all; page through them with outcome_history). \
You can see outcomes in your area (your root outcome's descendants and their \"why?\" chain). Errors: not_found if it does not exist or is outside your area.";

const OUTCOME_ANCESTORS: &str = "List every \"why?\" chain from an outcome up to a root, each chain ordered from the outcome upwards (at most 64 chains); only chains made of outcomes you can see are listed. \
Use it to understand why work exists before changing it. Errors: not_found if the outcome does not exist or is outside your area.";

const OUTCOME_SUBTREE: &str = "List an outcome and those of its descendants you can see (how it is being achieved) with the parent-child edges between them; from above your root outcome that is the chain down to your root and your own subtree; `truncated` is true when more exist than `limit`. \
Errors: not_found if the outcome does not exist or is outside your area.";

const OUTCOME_CREATE: &str = "Create an outcome (a result to achieve) under one or more parent outcomes that you are responsible for; you become responsible for it. \
Break your work down this way, then delegate children with `delegate`. Returns the new outcome's UUID (also the UUID of its Markdown KB file). \
Errors: invalid_input (empty or multi-line title, no parents, a parent edge that would make a cycle), permission_denied (you are not responsible for a parent), not_found (unknown parent).";

const OUTCOME_UPDATE: &str = "Change an outcome you may write (one you are responsible for, or the root outcome of your direct underling): title, description, priority, status, or its complete set of parents. \
`status` may only be set to \"open\" or \"blocked\" (blocked needs `reason`); use outcome_complete / outcome_close to finish, and outcome_request_completion for your own root. \
Your own root outcome is your boss's, but you may set its status (only) to \"blocked\" while you wait on an underling — you then get no new agent until mail arrives — and back to \"open\". \
Returns the updated outcome. Errors: permission_denied, not_found, invalid_input (illegal status change, cycle, a finished outcome).";

const OUTCOME_COMPLETE: &str = "Mark an outcome you may write as accomplished, with a rationale. Every capability scoped to it is revoked, and if it is the root outcome of an underling handler, that handler and everything below it are retired and their agents stopped. \
Revoked capabilities and retired handlers stay so, even if the outcome is later reopened (outcome_reopen). \
Your own root outcome cannot be completed by you: use outcome_request_completion. A Process Inbox outcome completes only once every message is acknowledged. \
Errors: permission_denied, not_found, invalid_input (already finished, perpetual root, unacknowledged mail, empty rationale).";

const OUTCOME_CLOSE: &str = "Close an outcome you may write as disproven or abandoned, with a rationale recorded in its file. Same effects as outcome_complete (capabilities revoked, an underling whose root it is retired); outcome_reopen sets it back to open. \
Errors: permission_denied, not_found, invalid_input (already finished, perpetual root, empty rationale).";

const OUTCOME_REQUEST_COMPLETION: &str = "Tell your boss that your root outcome is accomplished: its status becomes awaiting_verification and your boss (or the user) gets a message with your summary to verify it. \
Only your boss can then complete it, or set it back to open with what is missing. Write your state document first. \
Errors: invalid_input (completion already requested, the perpetual root outcome, empty summary).";

const OUTCOME_REOPEN: &str = "Set a completed or closed outcome back to open, with a rationale recorded in its history: one you completed or closed yourself (not your own root), or the root outcome of an underling handler you completed or closed. \
If that underling has retired, you become responsible again for its root and for the open work below it: redo it, or delegate it again (that brings the handler back, with only the capabilities you grant anew). \
Returns the outcome, its status and its responsible handler. Errors: permission_denied, not_found, invalid_input (not finished, a Process Inbox outcome, empty rationale).";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct OutcomeArgs {
    /// UUID of the outcome.
    outcome: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct SubtreeArgs {
    /// UUID of the outcome.
    outcome: String,
    /// Most outcomes to return (default 1000).
    limit: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CreateArgs {
    /// One line saying what result is wanted.
    title: String,
    /// Details: acceptance criteria, context, links (kb://UUID).
    description: Option<String>,
    /// UUIDs of the parent outcomes (why this is wanted); at least one, each one you are responsible for.
    parents: Vec<String>,
    /// Priority; higher is more urgent (default 0).
    priority: Option<i64>,
}

/// The statuses a plain update may set.
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(super) enum SettableStatus {
    Open,
    Blocked,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct UpdateArgs {
    /// UUID of the outcome.
    outcome: String,
    /// New one-line title.
    title: Option<String>,
    /// New description (replaces the old one).
    description: Option<String>,
    /// New priority; higher is more urgent.
    priority: Option<i64>,
    /// "open" or "blocked" ("blocked" needs `reason`).
    status: Option<SettableStatus>,
    /// Why the outcome is blocked.
    reason: Option<String>,
    /// The complete new set of parent outcome UUIDs (replaces the old set).
    parents: Option<Vec<String>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct FinishArgs {
    /// UUID of the outcome.
    outcome: String,
    /// Why it is finished: what was achieved, or why it is abandoned.
    rationale: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ReopenArgs {
    /// UUID of the completed or closed outcome.
    outcome: String,
    /// Why it is not finished after all: what is missing or wrong.
    rationale: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RequestCompletionArgs {
    /// What was achieved and where the results are (kb://UUID links), for your boss to verify.
    summary: String,
}

fn outcome_view(call: &Call, a: OutcomeArgs) -> ToolResult {
    let id: OutcomeId = args::id("outcome", &a.outcome)?;
    json(&call.svc.outcome_view(call.who(), id)?)
}

fn outcome_ancestors(call: &Call, a: OutcomeArgs) -> ToolResult {
    let id: OutcomeId = args::id("outcome", &a.outcome)?;
    let chains = call.svc.outcome_ancestors(call.who(), id)?;
    json(&OutcomeChains {
        outcome: id,
        chains,
    })
}

fn outcome_subtree(call: &Call, a: SubtreeArgs) -> ToolResult {
    let id: OutcomeId = args::id("outcome", &a.outcome)?;
    json(
        &call
            .svc
            .outcome_subtree(call.who(), id, args::limit(a.limit))?,
    )
}

fn outcome_create(call: &Call, a: CreateArgs) -> ToolResult {
    if a.parents.is_empty() {
        return Err(ToolError::invalid(
            "failed to create the outcome: `parents` is empty; name at least one parent outcome you are responsible for (your root outcome's UUID is your handler's UUID)",
        ));
    }
    let new = NewOutcome {
        title: a.title,
        description: a.description.unwrap_or_default(),
        parents: args::ids("parents", &a.parents)?,
        priority: a.priority.unwrap_or(0),
    };
    let id = call.svc.outcome_create(call.who(), &new)?;
    json(&OutcomeCreated { outcome: id })
}

fn outcome_update(call: &Call, a: UpdateArgs) -> ToolResult {
    let id: OutcomeId = args::id("outcome", &a.outcome)?;
    let parents = a
        .parents
        .as_deref()
        .map(|p| args::ids("parents", p))
        .transpose()?;
    let upd = OutcomeUpdate {
        title: a.title,
        description: a.description,
        priority: a.priority,
        status: a.status.map(|s| match s {
            SettableStatus::Open => OutcomeStatus::Open,
            SettableStatus::Blocked => OutcomeStatus::Blocked,
        }),
        reason: a.reason,
        parents,
    };
    json(&call.svc.outcome_update(call.who(), id, &upd)?)
}

fn outcome_complete(call: &Call, a: FinishArgs) -> ToolResult {
    let id: OutcomeId = args::id("outcome", &a.outcome)?;
    json(&call.svc.outcome_complete(call.who(), id, &a.rationale)?)
}

fn outcome_close(call: &Call, a: FinishArgs) -> ToolResult {
    let id: OutcomeId = args::id("outcome", &a.outcome)?;
    json(&call.svc.outcome_close(call.who(), id, &a.rationale)?)
}

fn outcome_request_completion(call: &Call, a: RequestCompletionArgs) -> ToolResult {
    json(
        &call
            .svc
            .outcome_request_completion(call.who(), &a.summary)?,
    )
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct HistoryArgs {
    /// UUID of the outcome.
    outcome: String,
    /// Continue after this event (the `next_after` of the previous page).
    after: Option<i64>,
    /// Most events to return (default 200, at most 1000).
    limit: Option<u32>,
}

fn outcome_history(call: &Call, a: HistoryArgs) -> ToolResult {
    let id: OutcomeId = args::id("outcome", &a.outcome)?;
    let page = call
        .svc
        .outcome_history(call.who(), id, a.after, args::limit(a.limit))?;
    json(&OutcomeHistoryPage {
        outcome: id,
        events: page.items,
        next_after: page.next,
    })
}

fn outcome_reopen(call: &Call, a: ReopenArgs) -> ToolResult {
    let id: OutcomeId = args::id("outcome", &a.outcome)?;
    json(&call.svc.outcome_reopen(call.who(), id, &a.rationale)?)
}
