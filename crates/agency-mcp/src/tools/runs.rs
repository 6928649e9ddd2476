//! Run tools: the agent runs of the caller's handler and of its direct
//! underlings (how each ended, usage, prompt version). Transcripts are the
//! user's alone and are not offered here.

use agency_api::RunsPage;
use agency_core::{AgentId, HandlerId, Timestamp};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::args;
use crate::reply::{ToolResult, json};
use crate::tools::{Call, Effect, tool};

pub(super) fn routes() -> Vec<super::Declared> {
    vec![
        tool("run_list", RUN_LIST, Effect::Read, run_list),
        tool("run_view", RUN_VIEW, Effect::Read, run_view),
    ]
}

const RUN_LIST: &str = "List the agent runs of your own handler (default) or of a direct underling, newest first: agent UUID, start and end time, runtime in ms, \
whether it ended normally and if not how (crashed, killed, stalled, reaped after a restart, restarted for new MCP servers), exit status, tool calls and tokens. \
Use it to see why an underling is not progressing. Pages: pass the returned `next_before` as `before`. \
Errors: not_found for a handler that is neither yours nor a direct underling's, invalid_input for a malformed UUID.";

const RUN_VIEW: &str = "One agent run by its agent UUID (from run_list): as run_list reports it, plus the prompt version and hash and whether a transcript was kept. \
Transcripts themselves are for the user only. Errors: not_found for a run that is not your handler's or a direct underling's.";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RunListArgs {
    /// Handler UUID: yours (the default) or a direct underling's.
    handler: Option<String>,
    /// Only runs started before this time (the `next_before` of the previous page, milliseconds since the epoch).
    before: Option<i64>,
    /// Most runs to return (default 200, at most 1000).
    limit: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RunViewArgs {
    /// The run's agent UUID.
    agent: String,
}

fn run_list(call: &Call, a: RunListArgs) -> ToolResult {
    let handler: Option<HandlerId> = args::opt_id("handler", a.handler.as_deref())?;
    let limit = args::limit(a.limit);
    let runs = call
        .svc
        .runs(call.who(), handler, a.before.map(Timestamp), limit)?;
    let full = runs.len() == call.svc.limits().page(limit);
    let next_before = runs.last().filter(|_| full).map(|r| r.started_at);
    json(&RunsPage { runs, next_before })
}

fn run_view(call: &Call, a: RunViewArgs) -> ToolResult {
    let agent: AgentId = args::id("agent", &a.agent)?;
    json(&call.svc.run(call.who(), agent)?)
}
