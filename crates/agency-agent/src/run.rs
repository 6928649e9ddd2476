//! The loop that runs one agent: connect to MCP, offer every tool to the
//! model (MCP tools and the workspace tools), execute the tool calls of each answer in order, and stop when an
//! answer has none, or a limit has been reached and the model was given
//! its chance to save its state, or the daemon's model gateway refused a
//! call by a budget (the runtime records why in the audit log and stops:
//! retrying cannot help, and the model cannot be asked to save anything).
//!
//! Everything the run does is appended to the transcript as it happens;
//! the summary goes to `result_path` at the end, whatever the ending.

use serde_json::{Value, json};

use crate::client::{CallError, ModelClient};
use crate::config::AgentConfig;
use crate::error::AgentError;
use crate::mcp::{Mcp, Sessions};
use crate::model::{Message, Reply, Request, ToolCall, ToolResult, ToolSpec};
use crate::summary::{Ended, RunSummary, now_rfc3339};
use crate::tools::Workspace;
use crate::transcript::{MAX_RECORDED_RESULT, Redactor, Transcript, truncate};

/// The user message sent once a limit is reached.
pub const LIMIT_NOTICE: &str = "You have reached your turn/token limit. Save your state now with state_write (and submit an audit summary with audit_submit), then stop.";

/// Model calls allowed after the limit notice.
pub const CALLS_AFTER_LIMIT: u32 = 3;

/// `final_text` is cut to this many bytes in the summary.
const MAX_FINAL_TEXT: usize = 16 * 1024;

/// The run's secrets. They are used for the API and MCP requests and
/// nowhere else; everything recorded is redacted against them.
#[derive(Clone)]
pub struct Secrets {
    /// The LLM API key (`None`: the server needs none).
    pub api_key: Option<String>,
    /// The agent's bearer token for the MCP endpoint.
    pub mcp_token: String,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secrets")
            .field("api_key", &self.api_key.as_ref().map(|_| "…"))
            .finish_non_exhaustive()
    }
}

impl Secrets {
    /// Read the variables `api_key_env` (if set) and `mcp_token_env` name.
    /// Surrounding whitespace is dropped (a `$(cat keyfile)` newline would
    /// make an invalid header).
    pub fn from_env(cfg: &AgentConfig) -> Result<Secrets, AgentError> {
        let api_key = match &cfg.api_key_env {
            Some(var) => Some(read_env("API key", var)?),
            None => None,
        };
        let mcp_token = read_env("MCP token", &cfg.mcp_token_env)?;
        Ok(Secrets { api_key, mcp_token })
    }
}

fn read_env(what: &'static str, var: &str) -> Result<String, AgentError> {
    let fail = |reason| AgentError::Env {
        what,
        var: var.to_owned(),
        reason,
    };
    match std::env::var(var) {
        Ok(v) if v.trim().is_empty() => Err(fail("it is empty")),
        Ok(v) => Ok(v.trim().to_owned()),
        Err(std::env::VarError::NotPresent) => Err(fail("it is not set")),
        Err(std::env::VarError::NotUnicode(_)) => Err(fail("it is not valid UTF-8")),
    }
}

/// Run one agent to its end, with the secrets read from the environment
/// variables the configuration names. The transcript and the result file
/// are written as configured. A failure of the run itself (unreachable
/// model or MCP server, missing secret, …) is an `Ok` summary whose `ended`
/// is [`Ended::Error`]; `Err` means the result file could not be written.
pub async fn run(cfg: &AgentConfig) -> Result<RunSummary, AgentError> {
    run_with(cfg, None, std::future::pending()).await
}

/// [`run`] with the secrets handed over directly (for a caller that holds
/// them in memory, such as an in-process runtime or a test).
pub async fn run_with_secrets(
    cfg: &AgentConfig,
    secrets: Secrets,
) -> Result<RunSummary, AgentError> {
    run_with(cfg, Some(secrets), std::future::pending()).await
}

/// The general form: `secrets` (`None`: read from the environment), and a
/// `stop` future (e.g. SIGTERM) that ends the run at once, abandoning any
/// call in flight, with `ended` = `error: stopped …`, the transcript closed
/// and the result still written.
pub async fn run_with(
    cfg: &AgentConfig,
    secrets: Option<Secrets>,
    stop: impl Future<Output = ()>,
) -> Result<RunSummary, AgentError> {
    let secrets = match secrets {
        Some(s) => Ok(s),
        None => Secrets::from_env(cfg),
    };
    let mut summary = RunSummary {
        ended: Ended::Completed,
        turns: 0,
        tool_calls: 0,
        tool_errors: 0,
        retries: 0,
        input_tokens: 0,
        output_tokens: 0,
        usage_estimated: false,
        api: cfg.api,
        model: cfg.model.clone(),
        final_text: String::new(),
        started_at: now_rfc3339(),
        ended_at: String::new(),
    };
    // The redactor knows the secrets before the first line is recorded.
    let redactor = match &secrets {
        Ok(s) => Redactor::new([s.api_key.as_deref(), Some(s.mcp_token.as_str())]),
        Err(_) => Redactor::default(),
    };
    let mut transcript = match Transcript::open(cfg.transcript_path.as_deref(), redactor.clone()) {
        Ok(t) => Some(t),
        Err(e) => {
            summary.ended = Ended::Error(redactor.redact(&e.to_string()));
            None
        }
    };
    if let Some(t) = &mut transcript {
        let outcome = match (cfg.validate(), secrets) {
            (Err(m), _) => Err(AgentError::InvalidConfig(m)),
            (Ok(()), Err(e)) => Err(e),
            (Ok(()), Ok(secrets)) => {
                let work = drive(cfg, secrets, t, &mut summary);
                tokio::pin!(work);
                tokio::select! {
                    r = &mut work => r,
                    () = stop => Err(AgentError::Stopped),
                }
            }
        };
        match outcome {
            Ok(ended) => summary.ended = ended,
            Err(e) => {
                let message = redactor.redact(&e.to_string());
                t.event("error", json!({ "message": message }));
                summary.ended = Ended::Error(message);
            }
        }
        t.sync();
        if let Some(e) = t.take_failure()
            && !summary.ended.is_error()
        {
            summary.ended = Ended::Error(redactor.redact(&e.to_string()));
        }
    }
    summary.ended_at = now_rfc3339();
    summary.final_text = redactor.redact(&summary.final_text);
    if let Some(t) = &mut transcript {
        t.event(
            "run_end",
            serde_json::to_value(&summary).unwrap_or(Value::Null),
        );
        t.sync();
    }
    if let Some(p) = &cfg.result_path {
        summary.write_to(p)?;
    }
    Ok(summary)
}

/// Which limit put the run into its wind-down.
#[derive(Debug, Clone, Copy)]
enum Limit {
    Turns,
    Tokens,
}

impl Limit {
    fn ended(self) -> Ended {
        match self {
            Limit::Turns => Ended::TurnLimit,
            Limit::Tokens => Ended::TokenLimit,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Limit::Turns => "turn_limit",
            Limit::Tokens => "token_limit",
        }
    }
}

/// The conversation proper; returns how it ended.
async fn drive(
    cfg: &AgentConfig,
    secrets: Secrets,
    t: &mut Transcript,
    s: &mut RunSummary,
) -> Result<Ended, AgentError> {
    let client = ModelClient::new(cfg, secrets.api_key)?;
    t.event(
        "run_start",
        json!({
            "api": cfg.api.as_str(),
            "model": cfg.model,
            "url": client.url(),
            "mcp_url": cfg.mcp_url,
            "max_turns": cfg.max_turns,
            "max_total_tokens": cfg.max_total_tokens,
            "max_output_tokens": cfg.max_output_tokens,
            "pid": std::process::id(),
        }),
    );
    let (agency, mut tools) =
        Mcp::connect(&cfg.mcp_url, &secrets.mcp_token, cfg.request_timeout()).await?;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    t.event(
        "mcp_connected",
        json!({ "url": cfg.mcp_url, "tools": names }),
    );
    let mut mcp = Sessions::new(agency);
    // An extra server that fails to start is recorded, not fatal: the
    // agent can still do its work with Agency's tools and report.
    for server in &cfg.mcp_servers {
        match Mcp::spawn_stdio(server, cfg.request_timeout()).await {
            Ok((session, specs)) => {
                let specs = mcp.add(&server.name, session, specs);
                let names: Vec<&str> = specs.iter().map(|t| t.name.as_str()).collect();
                t.event(
                    "mcp_server_connected",
                    json!({ "name": server.name, "tools": names }),
                );
                tools.extend(specs);
            }
            Err(e) => {
                tracing::warn!(server = %server.name, error = %e, "failed to start an MCP server");
                t.event(
                    "mcp_server_failed",
                    json!({ "name": server.name, "error": e.to_string() }),
                );
            }
        }
    }
    // Every workspace tool call is admitted by the daemon first (fail closed).
    let check = crate::tools::ToolCheck::new(&cfg.mcp_url, &secrets.mcp_token);
    let result = match workspace(cfg, &tools).map(|ws| ws.with_check(check)) {
        Ok(ws) => {
            t.event(
                "workspace_tools",
                json!({ "workspace": ws.root(), "tools": ws.names() }),
            );
            tools.extend(ws.specs());
            converse(cfg, &client, &mcp, &ws, &tools, t, s).await
        }
        Err(e) => Err(e),
    };
    mcp.close().await;
    result
}

/// The workspace tools of the run, refused if an MCP tool has the name of
/// one: the model would not know which it calls.
fn workspace(cfg: &AgentConfig, mcp_tools: &[ToolSpec]) -> Result<Workspace, AgentError> {
    let root = match &cfg.workspace {
        Some(w) => w.clone(),
        None => std::env::current_dir().map_err(|e| AgentError::Workspace(e.to_string()))?,
    };
    // Commands must not see the run's secrets.
    let hidden = cfg
        .api_key_env
        .iter()
        .chain([&cfg.mcp_token_env])
        .cloned()
        .collect();
    let ws = Workspace::new(root, &cfg.workspace_tools, hidden);
    if let Some(clash) = mcp_tools.iter().find(|t| ws.offers(&t.name)) {
        return Err(AgentError::ToolClash(clash.name.clone()));
    }
    Ok(ws)
}

async fn converse(
    cfg: &AgentConfig,
    client: &ModelClient,
    mcp: &Sessions,
    ws: &Workspace,
    tools: &[ToolSpec],
    t: &mut Transcript,
    s: &mut RunSummary,
) -> Result<Ended, AgentError> {
    let mut history = vec![Message::User(cfg.initial_message.clone())];
    // Set once a limit is reached: which one, and the calls still allowed.
    let mut wind_down: Option<(Limit, u32)> = None;
    // Mail a warm wait already announced (it does not wake the run again).
    let mut known: Vec<String> = Vec::new();
    loop {
        if wind_down.is_none() {
            let limit = if s.turns >= cfg.max_turns {
                Some(Limit::Turns)
            } else if s.input_tokens + s.output_tokens >= cfg.max_total_tokens {
                Some(Limit::Tokens)
            } else {
                None
            };
            if let Some(limit) = limit {
                t.event(
                    "limit",
                    json!({
                        "limit": limit.name(),
                        "turns": s.turns,
                        "total_tokens": s.input_tokens + s.output_tokens,
                        "notice": LIMIT_NOTICE,
                    }),
                );
                add_notice(&mut history);
                wind_down = Some((limit, CALLS_AFTER_LIMIT));
            }
        }
        if let Some((limit, left)) = &mut wind_down {
            if *left == 0 {
                return Ok(limit.ended());
            }
            *left -= 1;
        }
        s.turns += 1;
        let reply = match call_model(cfg, client, tools, &history, t, s).await? {
            Ok(reply) => reply,
            // The gateway refused by a budget: no model call can follow
            // until the user acts, so the run stops here, as at the end
            // of a turn, after recording why.
            Err(message) => return Ok(budget_stop(mcp, &message, t).await),
        };
        s.final_text = truncate(&reply.text, MAX_FINAL_TEXT).0.to_owned();
        history.push(Message::Assistant {
            text: reply.text.clone(),
            tool_calls: reply.tool_calls.clone(),
        });
        if reply.tool_calls.is_empty() {
            // Work done. Warm: wait for mail with no
            // model call; new mail continues this conversation. The turn
            // and token counters are the run's, not reset per wake, so the
            // limit check above still bounds the whole run: at a limit the
            // run winds down and ends, and the next mail starts a new agent.
            if wind_down.is_none()
                && cfg.keep_warm_ms > 0
                && let Some(news) = crate::warm::park(
                    mcp,
                    cfg.keep_warm_ms,
                    &mut known,
                    &mut |e: &str, v: Value| {
                        t.event(e, v);
                        // On disk before a long wait, for whoever reads it.
                        t.sync();
                    },
                )
                .await
            {
                history.push(Message::User(news));
                continue;
            }
            return Ok(wind_down.map_or(Ended::Completed, |(l, _)| l.ended()));
        }
        let mut results = Vec::with_capacity(reply.tool_calls.len());
        for call in &reply.tool_calls {
            results.push(call_tool(mcp, ws, tools, call, s.turns, t, s).await);
        }
        history.push(Message::ToolResults {
            results,
            then: None,
        });
        if let Some(e) = t.take_failure() {
            return Err(e);
        }
    }
}

/// Put the limit notice after the last tool results (same user turn), or
/// as a user message of its own.
fn add_notice(history: &mut Vec<Message>) {
    if let Some(Message::ToolResults { then, .. }) = history.last_mut()
        && then.is_none()
    {
        *then = Some(LIMIT_NOTICE.to_owned());
        return;
    }
    history.push(Message::User(LIMIT_NOTICE.to_owned()));
}

/// What the audit log gets when the gateway refused a model call by a
/// budget: the agent cannot write it (it needs a model call to), so the
/// runtime does, and the next agent reads why this one stopped.
pub const BUDGET_AUDIT: &str = "(written by the runtime) Stopped: the model gateway refused a model call by a budget. The work so far is kept (state document, KB, this run's transcript); a new agent continues once the user raises the limit or resumes the subtree. The gateway said: ";

/// Stop after a budget refusal: record it in the transcript and in the
/// handler's audit log (best effort: a failure is recorded, not fatal;
/// tool calls are not stopped by a paused budget, so it normally lands).
async fn budget_stop(mcp: &Sessions, message: &str, t: &mut Transcript) -> Ended {
    t.event("budget", json!({ "message": message }));
    let summary = format!("{BUDGET_AUDIT}{message}");
    let outcome = mcp
        .call("audit_submit", &json!({ "summary": summary }))
        .await;
    t.event(
        "budget_audit",
        json!({ "is_error": outcome.is_error, "content": truncate(&outcome.content, MAX_RECORDED_RESULT).0 }),
    );
    Ended::Budget(t.redact(message))
}

/// One model call. `Ok(Err(message))`: the gateway refused it by a budget.
async fn call_model(
    cfg: &AgentConfig,
    client: &ModelClient,
    tools: &[ToolSpec],
    history: &[Message],
    t: &mut Transcript,
    s: &mut RunSummary,
) -> Result<Result<Reply, String>, AgentError> {
    let turn = s.turns;
    t.event(
        "model_request",
        json!({
            "turn": turn,
            "model": cfg.model,
            "url": client.url(),
            "messages": history.len(),
            "tools": tools.len(),
            "max_tokens": cfg.max_output_tokens,
        }),
    );
    let req = Request {
        model: &cfg.model,
        system: &cfg.system_prompt,
        messages: history,
        tools,
        max_tokens: cfg.max_output_tokens,
    };
    let mut retries = 0;
    let result = client
        .call(&req, &mut |note| {
            retries += 1;
            t.event(
                "retry",
                json!({
                    "turn": turn,
                    "attempt": note.attempt,
                    "status": note.status,
                    "error": note.error,
                    "wait_ms": note.wait.as_millis() as u64,
                }),
            );
        })
        .await;
    s.retries += retries;
    let reply = match result {
        Ok(reply) => reply,
        Err(CallError::Budget(message)) => return Ok(Err(message)),
        Err(CallError::Failed(message)) => {
            return Err(AgentError::Model {
                url: client.url().to_owned(),
                message,
            });
        }
    };
    let usage = reply.usage.unwrap_or_default();
    s.input_tokens += usage.input_tokens;
    s.output_tokens += usage.output_tokens;
    s.usage_estimated |= usage.estimated;
    let calls: Vec<Value> = reply
        .tool_calls
        .iter()
        .map(|c| json!({"id": c.id, "name": c.name, "input": recorded_input(c)}))
        .collect();
    t.event(
        "model_reply",
        json!({
            "turn": turn,
            "text": reply.text,
            "tool_calls": calls,
            "stop_reason": reply.stop_reason,
            "input_tokens": usage.input_tokens,
            "output_tokens": usage.output_tokens,
            "usage_estimated": usage.estimated,
        }),
    );
    Ok(Ok(reply))
}

/// The arguments as parsed, or the model's raw text when unparseable.
fn recorded_input(c: &ToolCall) -> Value {
    if c.invalid.is_some() {
        Value::String(c.raw_arguments.clone())
    } else {
        c.input.clone()
    }
}

async fn call_tool(
    mcp: &Sessions,
    ws: &Workspace,
    tools: &[ToolSpec],
    call: &ToolCall,
    turn: u32,
    t: &mut Transcript,
    s: &mut RunSummary,
) -> ToolResult {
    s.tool_calls += 1;
    t.event(
        "tool_call",
        json!({"turn": turn, "id": call.id, "name": call.name, "input": recorded_input(call)}),
    );
    let started = std::time::Instant::now();
    let outcome = if let Some(why) = &call.invalid {
        crate::mcp::ToolOutcome {
            content: format!(
                "[invalid_input] failed to call tool {}: {why}; send the arguments as one JSON object",
                call.name
            ),
            is_error: true,
        }
    } else if !tools.iter().any(|t| t.name == call.name) {
        crate::mcp::ToolOutcome {
            content: format!(
                "[not_found] failed to call tool {:?}: there is no such tool; use one of the tools offered",
                call.name
            ),
            is_error: true,
        }
    } else if ws.offers(&call.name) {
        let mut outcome = ws.call(&call.name, &call.input).await;
        // A command can print what the run's secrets protect (a parent's
        // environment under /proc): the model gets the redacted text.
        outcome.content = t.redact(&outcome.content);
        outcome
    } else {
        mcp.call(&call.name, &call.input).await
    };
    if outcome.is_error {
        s.tool_errors += 1;
    }
    let (recorded, truncated) = truncate(&outcome.content, MAX_RECORDED_RESULT);
    t.event(
        "tool_result",
        json!({
            "turn": turn,
            "id": call.id,
            "name": call.name,
            "is_error": outcome.is_error,
            "content": recorded,
            "truncated": truncated,
            "bytes": outcome.content.len(),
            "ms": started.elapsed().as_millis() as u64,
        }),
    );
    ToolResult {
        call_id: call.id.clone(),
        content: outcome.content,
        is_error: outcome.is_error,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_notice_joins_the_last_tool_results() {
        let mut h = vec![
            Message::User("go".into()),
            Message::ToolResults {
                results: vec![],
                then: None,
            },
        ];
        add_notice(&mut h);
        assert_eq!(
            h[1],
            Message::ToolResults {
                results: vec![],
                then: Some(LIMIT_NOTICE.into())
            }
        );
        // Otherwise it is a user message of its own.
        let mut h = vec![Message::User("go".into())];
        add_notice(&mut h);
        assert_eq!(h[1], Message::User(LIMIT_NOTICE.into()));
    }

    #[test]
    fn a_workspace_tool_named_like_an_mcp_tool_stops_the_run() {
        let cfg: AgentConfig = serde_json::from_value(json!({
            "api": "anthropic", "base_url": "http://127.0.0.1:9", "model": "m",
            "api_key_env": "KEY", "max_turns": 1, "max_total_tokens": 1,
            "mcp_url": "http://127.0.0.1:9/mcp", "mcp_token_env": "TOKEN",
            "system_prompt": "", "initial_message": "go", "workspace": "/w",
        }))
        .unwrap();
        let mcp = |name: &str| ToolSpec {
            name: name.into(),
            description: String::new(),
            input_schema: json!({}),
        };
        let ws = workspace(&cfg, &[mcp("kb_read"), mcp("x__bash")]).unwrap();
        assert_eq!(ws.root(), std::path::Path::new("/w"));
        assert_eq!(ws.names().len(), crate::WORKSPACE_TOOLS.len());
        assert_eq!(ws.hidden_env(), ["KEY", "TOKEN"]);
        let e = workspace(&cfg, &[mcp("kb_read"), mcp("grep")]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "failed to offer workspace tool grep: an MCP server offers a tool of the same name"
        );
        // Fewer tools offered, fewer possible clashes.
        let cfg = AgentConfig {
            workspace_tools: vec!["bash".into()],
            ..cfg
        };
        assert!(workspace(&cfg, &[mcp("grep")]).is_ok());
    }

    #[test]
    fn environment_secrets_are_named_never_shown() {
        assert!(!read_env("API key", "PATH").unwrap().is_empty());
        let e = read_env("MCP token", "AGENCY_AGENT_UNIT_SURELY_UNSET").unwrap_err();
        assert_eq!(
            e.to_string(),
            "failed to read the MCP token from environment variable AGENCY_AGENT_UNIT_SURELY_UNSET: it is not set"
        );
        let s = Secrets {
            api_key: Some("sk-visible?".into()),
            mcp_token: "agency_tok".into(),
        };
        let dbg = format!("{s:?}");
        assert!(
            !dbg.contains("sk-visible") && !dbg.contains("agency_tok"),
            "{dbg}"
        );
    }
}
