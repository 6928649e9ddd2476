//! REST routes for records the user reads about the organisation's work:
//! agent runs and their transcripts, mail receipts, a KB file's access log
//! the outcomes of one handler, and model usage and cost as a tree
//! (`agency cost`), and budgets against spend (`agency budget`). Each route is one service call as the
//! user (`rest.rs` holds the shared plumbing).

use std::sync::Arc;

use agency_core::{AgentId, FileId, HandlerId, MessageId, Timestamp};
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::routing::{get, post};
use serde::Deserialize;

use crate::rest::USER;
use crate::server::AppState;
use agency_http::{Answer, call, parse};
use agency_service::wire;

pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/v1/runs", get(runs))
        .route("/v1/runs/{agent}", get(run))
        .route("/v1/runs/{agent}/transcript", get(transcript))
        .route("/v1/runs/{agent}/prompt", get(prompt))
        .route("/v1/mail/{id}", get(mail_status))
        .route("/v1/kb/{id}/audit", get(kb_audit))
        .route("/v1/handlers/{id}/outcomes", get(handler_outcomes))
        .route("/v1/cost", get(cost_all))
        .route("/v1/cost/{id}", get(cost_of))
        .route("/v1/budgets", get(budgets_all))
        .route("/v1/budgets/{id}", get(budgets_of).post(budget_set))
        .route("/v1/budgets/{id}/resume", post(budget_resume))
        .route("/v1/budgets/{id}/pause", post(budget_pause))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunsQuery {
    handler: Option<String>,
    /// Milliseconds since the epoch: only runs started before.
    before: Option<i64>,
    limit: Option<usize>,
}

async fn runs(State(st): State<Arc<AppState>>, Query(q): Query<RunsQuery>) -> Answer {
    let handler: Option<HandlerId> = q
        .handler
        .as_deref()
        .map(|h| parse("handler", h))
        .transpose()?;
    Ok(call(&st.svc, move |svc| {
        svc.runs(USER, handler, q.before.map(Timestamp), q.limit)
    })
    .await)
}

async fn run(State(st): State<Arc<AppState>>, Path(agent): Path<String>) -> Answer {
    let agent: AgentId = parse("agent", &agent)?;
    Ok(call(&st.svc, move |svc| svc.run(USER, agent)).await)
}

/// The transcript as JSON: `{"agent", "bytes", "events": [...]}`, one
/// event per line of the runtime's JSONL (a line that is not JSON comes
/// back as `{"unparsed": "<line>"}`, so nothing is dropped).
/// What a run was told when it started (`agency run AGENT --prompt`).
async fn prompt(State(st): State<Arc<AppState>>, Path(agent): Path<String>) -> Answer {
    let agent: AgentId = parse("agent", &agent)?;
    Ok(call(&st.svc, move |svc| svc.run_prompt(USER, agent)).await)
}

async fn transcript(State(st): State<Arc<AppState>>, Path(agent): Path<String>) -> Answer {
    let agent: AgentId = parse("agent", &agent)?;
    Ok(call(&st.svc, move |svc| svc.run_transcript_events(USER, agent)).await)
}

async fn mail_status(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Answer {
    let id: MessageId = parse("message", &id)?;
    Ok(call(&st.svc, move |svc| svc.mail_status(USER, id)).await)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitQuery {
    limit: Option<usize>,
}

async fn kb_audit(
    State(st): State<Arc<AppState>>,
    Path(id): Path<String>,
    Query(q): Query<LimitQuery>,
) -> Answer {
    let id: FileId = parse("KB file", &id)?;
    Ok(call(&st.svc, move |svc| svc.kb_audit(USER, id, q.limit)).await)
}

async fn handler_outcomes(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Answer {
    let id: HandlerId = parse("handler", &id)?;
    Ok(call(&st.svc, move |svc| svc.outcomes_of(USER, id)).await)
}

/// [`call`] for a read of spend: costs and budgets count the calls that
/// have ended, not their reservations, so the gateway's metering queue is
/// flushed first.
async fn spend<T: serde::Serialize + Send + 'static>(
    st: &AppState,
    f: impl FnOnce(&agency_service::System) -> agency_service::Result<T> + Send + 'static,
) -> axum::response::Response {
    let metering = st.metering.clone();
    call(&st.svc, move |svc| {
        metering.flush();
        f(svc)
    })
    .await
}

async fn cost_all(State(st): State<Arc<AppState>>) -> Answer {
    Ok(spend(&st, move |svc| svc.cost_tree(USER, None)).await)
}

async fn cost_of(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Answer {
    let id: HandlerId = parse("handler", &id)?;
    Ok(spend(&st, move |svc| svc.cost_tree(USER, Some(id))).await)
}

async fn budgets_all(State(st): State<Arc<AppState>>) -> Answer {
    Ok(spend(&st, move |svc| svc.budget_show(USER, None)).await)
}

async fn budgets_of(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Answer {
    let id: HandlerId = parse("handler", &id)?;
    Ok(spend(&st, move |svc| svc.budget_show(USER, Some(id))).await)
}

/// The limits of `agency budget set`; a limit left out is no limit.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BudgetBody {
    tokens: Option<i64>,
    micro_usd: Option<i64>,
    calls: Option<i64>,
    tool_calls: Option<i64>,
    spawns: Option<i64>,
    live_agents: Option<i64>,
    handlers: Option<i64>,
    depth: Option<i64>,
    wall_clock_ms: Option<i64>,
}

async fn budget_set(
    State(st): State<Arc<AppState>>,
    Path(id): Path<String>,
    axum::Json(b): axum::Json<BudgetBody>,
) -> Answer {
    let id: HandlerId = parse("handler", &id)?;
    let limits = agency_service::BudgetLimits {
        tokens: b.tokens,
        micro_usd: b.micro_usd,
        calls: b.calls,
        tool_calls: b.tool_calls,
        spawns: b.spawns,
        live_agents: b.live_agents,
        handlers: b.handlers,
        depth: b.depth,
        wall_clock_ms: b.wall_clock_ms,
    };
    Ok(call(&st.svc, move |svc| {
        svc.budget_set(USER, id, limits).map(|b| wire::budget(&b))
    })
    .await)
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PauseBody {
    #[serde(default)]
    note: Option<String>,
}

/// `agency pause`: pause a subtree by hand until `agency resume`.
async fn budget_pause(
    State(st): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Option<axum::Json<PauseBody>>,
) -> Answer {
    let id: HandlerId = parse("handler", &id)?;
    let note = body.and_then(|b| b.0.note);
    Ok(call(&st.svc, move |svc| {
        svc.budget_pause(USER, id, note.as_deref())
    })
    .await)
}

/// `agency resume`: continue a subtree its budget paused.
async fn budget_resume(State(st): State<Arc<AppState>>, Path(id): Path<String>) -> Answer {
    let id: HandlerId = parse("handler", &id)?;
    Ok(call(&st.svc, move |svc| svc.budget_resume(USER, id)).await)
}
