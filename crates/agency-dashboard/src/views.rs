//! The dashboard's JSON reads (`GET /dashboard/api/…`): each one or a few
//! service calls as the user, composed into what one page shows. The page
//! re-fetches a view when an event of the log says it changed.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use agency_api::{
    CostBreakdown, CostRow, Event, HandlerTitle, HandlerView, NeedsYou, OrgCard, OrgPage,
    PausedSubtree, RunDetail, StalledHandler,
};
use agency_core::status::{LessonState, PipelineRunStatus};
use agency_core::{AgentId, FileId, HandlerId, OutcomeId, Timestamp};
use agency_service::{EventQuery, Result, ServiceError, System, wire};
use axum::Extension;
use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::get;
use futures_util::StreamExt;
use serde::Deserialize;

use crate::auth::SessionId;
use crate::{Dashboard, USER};
use agency_http::{Answer, call, parse};

/// Handlers the Organisation page shows at most (the rest is counted as
/// truncated, never silently dropped).
const MAX_CARDS: usize = 2000;
/// Events read back for "last activity" and the cost breakdown.
const RECENT_EVENTS: i64 = 5000;
/// Runs searched for ones that failed.
const RECENT_RUNS: usize = 50;
/// Failed runs stay in "needs you" this long.
const FAILED_RUN_WINDOW_MS: i64 = 24 * 3600 * 1000;

pub(crate) fn routes() -> Router<Arc<Dashboard>> {
    Router::new()
        .route("/dashboard/api/needs-you", get(needs_you))
        .route("/dashboard/api/org", get(org))
        .route("/dashboard/api/outcomes", get(outcomes))
        .route("/dashboard/api/outcomes/{id}", get(outcome))
        .route("/dashboard/api/runs", get(runs))
        .route("/dashboard/api/runs/{agent}", get(run))
        .route("/dashboard/api/runs/{agent}/transcript", get(transcript))
        .route("/dashboard/api/runs/{agent}/log", get(run_log))
        .route("/dashboard/api/costs", get(costs))
        .route("/dashboard/api/kb", get(kb_list))
        .route("/dashboard/api/kb/{id}/history", get(kb_history))
        .route("/dashboard/api/kb/{id}/versions/{v}", get(kb_version))
        .route("/dashboard/api/mail", get(mail))
        .route("/dashboard/api/orgs", get(orgs))
        .route("/dashboard/api/approvals", get(approvals))
        .route("/dashboard/api/events/stream", get(events_stream))
}

/// Every handler, in pages, up to `max`; whether more exist.
fn all_handlers(s: &System, max: usize) -> Result<(Vec<HandlerView>, bool)> {
    let mut all = Vec::new();
    let mut after = None;
    loop {
        let page = s.handlers(USER, after, None)?;
        let Some(last) = page.last() else {
            return Ok((all, false));
        };
        after = Some(last.id);
        all.extend(page);
        if all.len() >= max {
            let more = !s.handlers(USER, after, Some(1))?.is_empty();
            all.truncate(max);
            return Ok((all, more));
        }
    }
}

/// The open problems (stuck signals: `agency problems`), for "needs you".
pub fn problems(s: &System) -> Result<Vec<agency_api::Problem>> {
    s.problems(USER, false)
}

fn title_of(s: &System, h: HandlerId) -> String {
    s.handler_view(USER, h).map(|v| v.title).unwrap_or_default()
}

/// Everything that waits for the user.
pub fn needs_you_view(s: &System) -> Result<NeedsYou> {
    let mut approvals = s.approvals_list(USER, false)?;
    approvals.reverse(); // oldest first: the longest wait on top
    // Stalled handlers are found by reading every handler, so only when
    // the store counts one (the common case reads nothing).
    let handlers = if s.counts()?.handlers_stalled > 0 {
        all_handlers(s, usize::MAX)?.0
    } else {
        Vec::new()
    };
    let stalled = handlers
        .iter()
        .filter(|h| h.status == agency_core::status::HandlerStatus::Active)
        .filter_map(|h| {
            h.stalled.as_ref().map(|r| StalledHandler {
                handler: h.id,
                title: h.title.clone(),
                reason: r.clone(),
            })
        })
        .collect();
    let mut paused: Vec<PausedSubtree> = Vec::new();
    for p in s.budget_pauses()? {
        if paused.iter().any(|q| q.handler == p.by) {
            continue;
        }
        // Not `budget_show`: that walks the whole subtree.
        let limits = s
            .handler_costs(USER, &[p.by])
            .ok()
            .and_then(|c| c.into_iter().next())
            .and_then(|c| c.limits);
        paused.push(PausedSubtree {
            handler: p.by,
            title: title_of(s, p.by),
            pause: p,
            limits,
        });
    }
    let now = now_ms();
    let failed_runs = s
        .runs(USER, None, None, Some(RECENT_RUNS))?
        .into_iter()
        .filter(|r| r.normal == Some(false))
        .filter(|r| r.ended_at.is_some_and(|t| now - t.0 < FAILED_RUN_WINDOW_MS))
        .collect::<Vec<_>>();
    let stopped_pipelines = s
        .pipeline_runs(USER, false, Some(RECENT_RUNS))?
        .into_iter()
        .filter(|r| match r.status {
            PipelineRunStatus::Paused => true,
            PipelineRunStatus::Failed => {
                r.ended_at.is_some_and(|t| now - t.0 < FAILED_RUN_WINDOW_MS)
            }
            _ => false,
        })
        .collect::<Vec<_>>();
    let mcp_changes = s.mcp_pins(USER)?.pending;
    // Newest changed first as listed: reversed, the longest wait on top.
    let mut lessons = s.lessons(
        USER,
        None,
        &[LessonState::AwaitingUser],
        Some(crate::lessons::MAX_WAITING),
    )?;
    lessons.reverse();
    let named: std::collections::BTreeSet<HandlerId> = approvals
        .iter()
        .map(|a| a.handler)
        .chain(failed_runs.iter().map(|r| r.handler))
        .chain(stopped_pipelines.iter().map(|r| r.id))
        .chain(mcp_changes.iter().filter_map(|c| c.seen_by))
        .collect();
    Ok(NeedsYou {
        approvals,
        stalled,
        paused,
        failed_runs,
        stopped_pipelines,
        mcp_changes,
        lessons,
        problems: problems(s)?,
        titles: named
            .into_iter()
            .map(|handler| HandlerTitle {
                handler,
                title: title_of(s, handler),
            })
            .collect(),
    })
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

async fn needs_you(State(d): State<Arc<Dashboard>>) -> Response {
    call(&d.svc, needs_you_view).await
}

/// The newest events (at most [`RECENT_EVENTS`]), oldest first.
fn recent_events(s: &System, kinds: Vec<String>) -> Result<Vec<Event>> {
    let end = s.events_end(USER)?;
    let mut q = EventQuery {
        after: (end - RECENT_EVENTS).max(0),
        kinds,
        limit: Some(1000),
        ..EventQuery::default()
    };
    let mut out = Vec::new();
    loop {
        let page = s.events_read(USER, &q)?;
        let n = page.events.len();
        out.extend(page.events);
        if n < 1000 || page.next <= q.after {
            return Ok(out);
        }
        q.after = page.next;
    }
}

/// The Organisation page.
pub fn org_view(s: &System) -> Result<OrgPage> {
    let (handlers, truncated) = all_handlers(s, MAX_CARDS)?;
    let live: HashMap<HandlerId, Timestamp> = s
        .agents_live(USER)?
        .iter()
        .map(wire::agent)
        .map(|a| (a.handler, a.started_at))
        .collect();
    // Only the cards shown, from the ledger's running subtree totals: the
    // page costs the same on a tree of any size.
    let ids: Vec<HandlerId> = handlers.iter().map(|h| h.id).collect();
    let mut cost = HashMap::new();
    for chunk in ids.chunks(agency_service::MAX_COST_HANDLERS) {
        for c in s.handler_costs(USER, chunk)? {
            cost.insert(c.handler, c);
        }
    }
    let mut last: HashMap<HandlerId, Timestamp> = HashMap::new();
    for e in recent_events(s, Vec::new())? {
        if let Some(h) = e.handler {
            last.insert(h, e.at);
        }
    }
    let cards = handlers
        .into_iter()
        .map(|h| {
            let c = cost.remove(&h.id);
            OrgCard {
                live_since: live.get(&h.id).copied(),
                last_activity: last.get(&h.id).copied(),
                own: c.as_ref().map(|c| c.own).unwrap_or_default(),
                subtree: c.as_ref().map(|c| c.subtree).unwrap_or_default(),
                limits: c.and_then(|c| c.limits),
                model: s.model_show(USER, h.id).ok().and_then(|m| m.effective),
                handler: h,
            }
        })
        .collect();
    Ok(OrgPage { cards, truncated })
}

async fn org(State(d): State<Arc<Dashboard>>) -> Response {
    call(&d.svc, org_view).await
}

async fn outcomes(State(d): State<Arc<Dashboard>>) -> Response {
    call(&d.svc, |s| {
        let root = s
            .root_handler()?
            .ok_or_else(|| ServiceError::invalid("failed to list outcomes: no root handler"))?;
        s.outcome_subtree(USER, root.root(), Some(10_000))
    })
    .await
}

async fn outcome(State(d): State<Arc<Dashboard>>, Path(id): Path<String>) -> Answer {
    let id: OutcomeId = parse("outcome", &id)?;
    Ok(call(&d.svc, move |s| s.outcome_view(USER, id)).await)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunsQuery {
    handler: Option<String>,
    before: Option<i64>,
}

async fn runs(State(d): State<Arc<Dashboard>>, Query(q): Query<RunsQuery>) -> Answer {
    let h: Option<HandlerId> = q
        .handler
        .as_deref()
        .map(|h| parse("handler", h))
        .transpose()?;
    Ok(call(&d.svc, move |s| {
        s.runs(USER, h, q.before.map(Timestamp), Some(100))
    })
    .await)
}

/// One run and its timeline: the events of its handler from its start
/// (to its end), those its agent made or that are about its handler
/// without an agent (mail arriving, outcome changes).
pub fn run_detail(s: &System, agent: AgentId) -> Result<RunDetail> {
    let run = s.run(USER, agent)?;
    let mut q = EventQuery {
        handler: Some(run.handler),
        since: Some(run.started_at),
        limit: Some(1000),
        ..EventQuery::default()
    };
    let mut timeline = Vec::new();
    'pages: loop {
        let page = s.events_read(USER, &q)?;
        let n = page.events.len();
        for e in page.events {
            if run.ended_at.is_some_and(|end| e.at > end) || timeline.len() >= 2000 {
                break 'pages;
            }
            if e.agent.is_none_or(|a| a == agent) {
                timeline.push(e);
            }
        }
        if n < 1000 || page.next <= q.after {
            break;
        }
        q.after = page.next;
    }
    Ok(RunDetail { run, timeline })
}

async fn run(State(d): State<Arc<Dashboard>>, Path(agent): Path<String>) -> Answer {
    let a: AgentId = parse("agent", &agent)?;
    Ok(call(&d.svc, move |s| run_detail(s, a)).await)
}

async fn transcript(State(d): State<Arc<Dashboard>>, Path(agent): Path<String>) -> Answer {
    let agent: AgentId = parse("agent", &agent)?;
    Ok(call(&d.svc, move |s| s.run_transcript_events(USER, agent)).await)
}

async fn run_log(State(d): State<Arc<Dashboard>>, Path(agent): Path<String>) -> Answer {
    let a: AgentId = parse("agent", &agent)?;
    Ok(call(&d.svc, move |s| s.agent_run_log(USER, a)).await)
}

/// Per model and per day, from the newest metered calls' events.
pub fn cost_breakdown(s: &System) -> Result<CostBreakdown> {
    let mut by_model: BTreeMap<String, CostRow> = BTreeMap::new();
    let mut by_day: BTreeMap<String, CostRow> = BTreeMap::new();
    let mut calls = 0;
    for e in recent_events(s, vec!["model_call.ended".into()])? {
        calls += 1;
        let n = |k: &str| {
            e.data
                .get(k)
                .and_then(serde_json::Value::as_i64)
                .unwrap_or(0)
        };
        let model = e
            .data
            .get("model")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("?")
            .to_owned();
        let day = e.at.to_rfc3339().chars().take(10).collect::<String>();
        for (map, key) in [(&mut by_model, model), (&mut by_day, day)] {
            let row = map.entry(key.clone()).or_insert_with(|| CostRow {
                key,
                calls: 0,
                input_tokens: 0,
                output_tokens: 0,
                cost_micro_usd: 0,
            });
            row.calls += 1;
            row.input_tokens += n("input_tokens");
            row.output_tokens += n("output_tokens");
            row.cost_micro_usd += n("cost_micro_usd");
        }
    }
    Ok(CostBreakdown {
        by_model: by_model.into_values().collect(),
        by_day: by_day.into_values().collect(),
        calls,
    })
}

async fn costs(State(d): State<Arc<Dashboard>>) -> Response {
    call(&d.svc, |s| {
        Ok(serde_json::json!({
            "tree": s.cost_tree(USER, None)?,
            "breakdown": cost_breakdown(s)?,
        }))
    })
    .await
}

async fn kb_list(State(d): State<Arc<Dashboard>>) -> Response {
    call(&d.svc, |s| s.kb_list(USER, None, Some(1000))).await
}

async fn kb_history(State(d): State<Arc<Dashboard>>, Path(id): Path<String>) -> Answer {
    let id: FileId = parse("KB file", &id)?;
    Ok(call(&d.svc, move |s| {
        Ok(s.kb_history_page(USER, id, None, Some(1000))?.items)
    })
    .await)
}

async fn kb_version(State(d): State<Arc<Dashboard>>, Path((id, v)): Path<(String, i64)>) -> Answer {
    let id: FileId = parse("KB file", &id)?;
    Ok(call(&d.svc, move |s| {
        Ok(wire::file_text(&s.kb_read_version(USER, id, v)?))
    })
    .await)
}

async fn mail(State(d): State<Arc<Dashboard>>) -> Response {
    call(&d.svc, |s| s.mail_received(USER, Some(200))).await
}

async fn orgs(State(d): State<Arc<Dashboard>>) -> Response {
    call(&d.svc, |s| s.orgs(USER)).await
}

async fn approvals(State(d): State<Arc<Dashboard>>) -> Response {
    call(&d.svc, |s| s.approvals_list(USER, true)).await
}

/// The event log, live, as the user: from `Last-Event-ID` when the page's
/// `EventSource` reconnects, else from now on. The stream ends at its next
/// event or keep-alive once the session is over (logged out, idle).
async fn events_stream(
    State(d): State<Arc<Dashboard>>,
    Extension(SessionId(key)): Extension<SessionId>,
    headers: HeaderMap,
) -> Answer {
    let resume = agency_http::events::last_event_id(&headers)?;
    let q = EventQuery {
        after: resume.unwrap_or(0),
        ..EventQuery::default()
    };
    let resp =
        agency_http::events::stream(d.svc.service().clone(), USER, q, resume.is_none()).await;
    let (parts, body) = resp.into_parts();
    let chunks = body
        .into_data_stream()
        .take_while(move |_| std::future::ready(d.auth.alive(&key)));
    Ok(Response::from_parts(parts, Body::from_stream(chunks)))
}
