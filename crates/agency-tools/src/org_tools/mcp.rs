//! An organisation's MCP tool: one `.tool` of type
//! `mcp` is ONE tool of one MCP server, and the daemon is that server's
//! MCP client for the length of one call: start or connect,
//! `initialize`, `tools/call` (`McpTool::tool`, default the `.tool`'s own
//! name) with the arguments, end the session. No session outlives a call,
//! so no server state leaks from one agent's call into another's.
//!
//! A stdio server (`command`) runs exactly like a command tool
//! (`org_tool_command::confined`: a private `run/tool-<uuid>/`, an empty
//! environment plus `INHERITED_ENV`, confined unless the sandbox is off,
//! its network the egress proxy with a key bound to the calling agent);
//! its process group and cgroup are killed when the call ends, whether it
//! answered, failed or hung. A streamable-HTTP server (`url`) is checked
//! like an HTTP tool's destination (`egress::authorize_agent`: the
//! handler's `egress` capabilities, resolution, the audit record) and
//! reached at exactly the addresses checked, without proxy or redirect.
//!
//! Bounds: `timeoutMs` for the whole session (a server that never answers
//! `initialize` is killed then); 4 MiB of what a stdio server writes, and
//! of each answer of an HTTP server. The answer is the result's
//! `structuredContent`, else its text parsed as JSON, else `{"text": …}`;
//! an `isError` result is the call's error with (a bounded, one-line
//! version of) the server's text.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agency_core::Principal;
use agency_core::egress::{EgressTarget, Host};
use agency_mcp::OrgToolFailure;
use agency_org::{McpTool, Tool};
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::transport::IntoTransport;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::org_tools::CallCtx;
use crate::org_tools::command::{confined, one_line, read_tail};

/// The most a stdio server may write over a call, and the largest answer
/// of an HTTP server (bytes).
const MAX_ANSWER: usize = 4 << 20;
/// How much of a stdio server's stderr is kept (its end).
const STDERR_TAIL: usize = 4 << 10;
/// How much of the server's error text the agent is shown.
const ERROR_CHARS: usize = 500;

/// Call the tool; its output (not yet validated).
pub(crate) async fn call(
    ctx: &CallCtx,
    who: Principal,
    tool: &Tool,
    m: &McpTool,
    args: &Value,
) -> Result<Value, OrgToolFailure> {
    let remote = m.tool.clone().unwrap_or_else(|| tool.name.clone());
    let arguments = args.as_object().cloned().unwrap_or_default();
    let result = match (&m.command, &m.url) {
        (Some(c), None) => stdio(ctx, who, tool, m, c, &remote, arguments).await?,
        (None, Some(u)) => http(ctx, who, tool, m, u, &remote, arguments).await?,
        _ => {
            return Err(OrgToolFailure::new(
                "internal",
                format!(
                    "failed to call tool {}: it needs exactly one of command and url; ask the user to fix the .tool file",
                    tool.name
                ),
            ));
        }
    };
    answer(tool, result)
}

/// The output of a `tools/call` result, or the call's error.
fn answer(tool: &Tool, r: CallToolResult) -> Result<Value, OrgToolFailure> {
    let text: String = r
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.as_str()))
        .collect::<Vec<_>>()
        .join("\n");
    if r.is_error == Some(true) {
        let shown = head(&text);
        return Err(OrgToolFailure::new(
            "failed",
            format!(
                "failed to call tool {}: its MCP server answered with an error: {}",
                tool.name,
                serde_json::to_string(&shown).unwrap_or_default()
            ),
        ));
    }
    if let Some(v) = r.structured_content {
        return Ok(v);
    }
    Ok(serde_json::from_str(&text).unwrap_or_else(|_| json!({ "text": text })))
}

/// The start of a server's text, on one line and bounded: what it says
/// first is what explains it.
fn head(s: &str) -> String {
    s.trim()
        .chars()
        .take(ERROR_CHARS)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// One session: `initialize`, `tools/call`, close. The error says which
/// step failed.
async fn session<T, E, A>(
    transport: T,
    remote: &str,
    arguments: Map<String, Value>,
) -> Result<CallToolResult, String>
where
    T: IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    // The server's words in an error are bounded and on one line.
    let client = ().serve(transport).await.map_err(|e| {
        format!(
            "its MCP server did not initialize: {}",
            head(&e.to_string())
        )
    })?;
    let r = client
        .call_tool(CallToolRequestParams::new(remote.to_owned()).with_arguments(arguments))
        .await
        .map_err(|e| {
            format!(
                "calling {remote:?} on its MCP server failed: {}",
                head(&e.to_string())
            )
        });
    let _ = client.cancel().await;
    r
}

async fn stdio(
    ctx: &CallCtx,
    who: Principal,
    tool: &Tool,
    m: &McpTool,
    command: &[String],
    remote: &str,
    arguments: Map<String, Value>,
) -> Result<CallToolResult, OrgToolFailure> {
    let dir = ctx.run_root.join(format!("tool-{}", uuid::Uuid::new_v4()));
    let key = ctx.keys.issue_tool(who);
    let r = stdio_in(ctx, tool, m, command, remote, arguments, &dir, &key).await;
    ctx.keys.drop_tool(&key);
    let d = dir.clone();
    let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(d)).await;
    r
}

#[allow(clippy::too_many_arguments)]
async fn stdio_in(
    ctx: &CallCtx,
    tool: &Tool,
    m: &McpTool,
    command: &[String],
    remote: &str,
    arguments: Map<String, Value>,
    dir: &std::path::Path,
    key: &str,
) -> Result<CallToolResult, OrgToolFailure> {
    let fail = |kind: &'static str, why: String| {
        OrgToolFailure::new(kind, format!("failed to call tool {}: {why}", tool.name))
    };
    let (mut cmd, cgroup) = confined(ctx, tool, command, dir, key, None, &[]).await?;
    let mut child = cmd
        .spawn()
        .map_err(|e| fail("failed", format!("starting {:?} failed: {e}", command[0])))?;
    let pgid = child.id().unwrap_or(0);
    let (Some(stdin), Some(mut stdout)) = (child.stdin.take(), child.stdout.take()) else {
        agency_sandbox::process_group::kill_group(pgid);
        return Err(fail(
            "internal",
            "its server's pipes are missing".to_owned(),
        ));
    };
    let stderr = tokio::spawn(read_tail(child.stderr.take(), STDERR_TAIL));
    // What the server writes goes through a counter: past MAX_ANSWER the
    // client sees the end of the stream, and the error says why.
    let over = Arc::new(AtomicBool::new(false));
    let (mut tx, rx) = tokio::io::duplex(64 << 10);
    let pump = {
        let over = over.clone();
        tokio::spawn(async move {
            let mut total = 0usize;
            let mut buf = vec![0u8; 16 << 10];
            loop {
                let n = match stdout.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                total += n;
                if total > MAX_ANSWER {
                    over.store(true, Ordering::SeqCst);
                    break;
                }
                if tx.write_all(&buf[..n]).await.is_err() {
                    break;
                }
            }
        })
    };
    let finished = tokio::time::timeout(
        Duration::from_millis(m.timeout_ms),
        session((rx, stdin), remote, arguments),
    )
    .await;
    // Whatever happened, nothing of the server outlives the call: its
    // group (its children included) and its cgroup (what left the group).
    agency_sandbox::process_group::kill_group(pgid);
    let _ = tokio::time::timeout(Duration::from_secs(2), child.wait()).await;
    pump.abort();
    if let Some(cg) = cgroup {
        let _ = tokio::task::spawn_blocking(move || cg.remove()).await;
    }
    let err = tokio::time::timeout(Duration::from_secs(1), stderr)
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let err = String::from_utf8_lossy(&err).into_owned();
    if !err.trim().is_empty() {
        tracing::info!(tool = %tool.name, stderr = %err, "org MCP tool stderr");
    }
    match finished {
        Err(_) => {
            tracing::info!(tool = %tool.name, timeout_ms = m.timeout_ms, "org MCP tool killed at its timeout");
            Err(fail(
                "timeout",
                format!(
                    "its MCP server did not answer within {} ms and was killed",
                    m.timeout_ms
                ),
            ))
        }
        Ok(Err(_)) if over.load(Ordering::SeqCst) => Err(fail(
            "failed",
            format!("its MCP server wrote over {MAX_ANSWER} bytes and was killed"),
        )),
        Ok(Err(why)) => {
            let tail = one_line(&err);
            let why = if tail.is_empty() {
                why
            } else {
                format!("{why}; its stderr ends: {tail}")
            };
            Err(fail("failed", why))
        }
        Ok(Ok(r)) => Ok(r),
    }
}

async fn http(
    ctx: &CallCtx,
    who: Principal,
    tool: &Tool,
    m: &McpTool,
    url: &str,
    remote: &str,
    arguments: Map<String, Value>,
) -> Result<CallToolResult, OrgToolFailure> {
    let fail = |kind: &'static str, why: String| {
        OrgToolFailure::new(kind, format!("failed to call tool {}: {why}", tool.name))
    };
    let parsed = reqwest::Url::parse(url)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some())
        .ok_or_else(|| {
            fail(
                "internal",
                format!("its url {url:?} is not an http(s) URL with a host; ask the user to fix the .tool file"),
            )
        })?;
    let host = parsed.host_str().unwrap_or_default();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let port = parsed.port_or_known_default().unwrap_or(80);
    let target = EgressTarget::new(bare, port)
        .map_err(|e| fail("failed", format!("its url's host is not usable: {e}")))?;
    let addrs = agency_egress::authorize_agent(&ctx.svc, who, &target)
        .await
        .map_err(|refused| fail("permission_denied", refused.to_string()))?;
    let timeout = Duration::from_millis(m.timeout_ms);
    let mut client = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(timeout)
        .user_agent(concat!("agency/", env!("CARGO_PKG_VERSION")));
    if let Host::Name(name) = &target.host {
        // The connection goes to the addresses the egress rule checked.
        client = client.resolve_to_addrs(name, &addrs);
    }
    let client = client
        .build()
        .map_err(|e| fail("internal", format!("building its HTTP client failed: {e}")))?;
    let config = StreamableHttpClientTransportConfig::with_uri(parsed.to_string())
        .max_sse_event_size(MAX_ANSWER);
    let transport = StreamableHttpClientTransport::with_client(client, config);
    match tokio::time::timeout(timeout, session(transport, remote, arguments)).await {
        Err(_) => Err(fail(
            "timeout",
            format!(
                "its MCP server at {target} did not answer within {} ms",
                m.timeout_ms
            ),
        )),
        Ok(Err(why)) => Err(fail("failed", format!("{why} ({target})"))),
        Ok(Ok(r)) => Ok(r),
    }
}
