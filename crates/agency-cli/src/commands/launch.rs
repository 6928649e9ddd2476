//! `agency mcp-launch NAME`: how an agent starts an extra MCP server. The
//! agent's MCP configuration runs this (stdio) with the agent's token and
//! the spawn's single-use launch nonce; it asks the daemon for the server's
//! launch specification — which the daemon gives once, and only if the
//! agent's handler holds a capability on `mcp_server:NAME` — then runs a
//! stdio server as its child behind the daemon's guard
//! ([`crate::mcp_relay`]: pins, manifest, rate limits, policy), from an
//! empty environment plus the server's own, or bridges stdio to the
//! daemon's proxy of an HTTP server (which guards it itself). The secrets
//! in the specification reach the server's process and no other. A stdio
//! server whose manifest declares `egress` also gets the egress proxy URL
//! the daemon's answer carries (its own key as the password) as its
//! `HTTP(S)_PROXY`: its only way out, to those hosts only.

use std::process::ExitCode;

use agency_daemon::launch::{EGRESS_PROXY_HEADER, NONCE_HEADER};
use agency_daemon::mcp_guard::SESSION_HEADER;
use agency_daemon::mcp_servers::LaunchSpec;
use anyhow::{Context, Result, bail};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::client::{self, http_client};

/// The variables the launcher reads; none reaches the server (it has no
/// business with Agency's token).
const URL_VAR: &str = "AGENCY_MCP_URL";
const TOKEN_VAR: &str = "AGENCY_TOKEN";
const NONCE_VAR: &str = "AGENCY_LAUNCH_NONCE";

pub fn mcp_launch(name: &str) -> Result<ExitCode> {
    // Before any thread starts (the HTTP client's): see `block_signals`.
    let signals = crate::mcp_relay::block_signals()?;
    let (spec, session, egress) = fetch(name)?;
    if !matches!(spec, LaunchSpec::Stdio { .. }) {
        // A bridge ends on a signal as any process does.
        signals
            .thread_unblock()
            .context("failed to restore the launcher's signals")?;
    }
    match spec {
        LaunchSpec::Stdio { command, args, env } => {
            // Every stdio launch is guarded: the daemon hands a session
            // with the specification, or the server does not start.
            let Some(session) = session else {
                bail!(
                    "failed to launch MCP server {name}: the daemon's answer carried no guard session; is the daemon older than this launcher?"
                );
            };
            let var = |v: &str| std::env::var(v).unwrap_or_default();
            let guard = crate::mcp_relay::link(name, &var(URL_VAR), &var(TOKEN_VAR), session)?;
            let server = crate::mcp_relay::Server {
                command: &command,
                args: &args,
                env: &env,
                egress_proxy: egress.as_deref(),
            };
            crate::mcp_relay::run(name, &server, guard, signals)
        }
        LaunchSpec::Http { url, headers } => {
            let mut map = HeaderMap::new();
            for (k, v) in &headers {
                let key = HeaderName::from_bytes(k.as_bytes())
                    .with_context(|| format!("failed to use header {k:?} of MCP server {name}"))?;
                // The value may be a secret: not in the message.
                let value = HeaderValue::from_str(v).map_err(|_| {
                    anyhow::anyhow!(
                        "failed to use header {k:?} of MCP server {name}: its value is not a valid header value"
                    )
                })?;
                map.insert(key, value);
            }
            crate::bridge::run_remote(name, &url, map)
        }
        LaunchSpec::Proxy { url } => {
            // The daemon adds the server's headers; the agent's token
            // authenticates this bridge to the daemon.
            let token = std::env::var(TOKEN_VAR).unwrap_or_default();
            let mut map = HeaderMap::new();
            let value = HeaderValue::from_str(&format!("Bearer {}", token.trim()))
                .context("failed to use the agent's token as a header")?;
            map.insert(reqwest::header::AUTHORIZATION, value);
            crate::bridge::run_remote(name, &url, map)
        }
    }
}

/// Ask the daemon for the launch specification of server `name`, the
/// guard session of a stdio server, and its egress proxy URL (only when
/// its manifest declares egress).
fn fetch(name: &str) -> Result<(LaunchSpec, Option<String>, Option<String>)> {
    let var = |v: &str| {
        std::env::var(v).with_context(|| {
            format!("failed to launch MCP server {name}: {v} is not set (agency mcp-launch is run by an agent's MCP configuration)")
        })
    };
    let mcp_url = var(URL_VAR)?;
    let token = var(TOKEN_VAR)?;
    // Without a nonce the daemon refuses; its answer says why.
    let nonce = std::env::var(NONCE_VAR).unwrap_or_default();
    let url = reqwest::Url::parse(&mcp_url)
        .and_then(|u| u.join(&format!("/launch/{name}")))
        .with_context(|| format!("failed to make the launch URL from {URL_VAR}={mcp_url}"))?;
    let resp = http_client()?
        .post(url.clone())
        .bearer_auth(token.trim())
        .header(NONCE_HEADER, nonce.trim())
        .send()
        .with_context(|| format!("failed to reach the Agency daemon at {url}"))?;
    let status = resp.status();
    let header = |h: &str| {
        resp.headers()
            .get(h)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let (session, egress) = (header(SESSION_HEADER), header(EGRESS_PROXY_HEADER));
    let body = resp
        .bytes()
        .with_context(|| format!("failed to read the daemon's answer from {url}"))?;
    if !status.is_success() {
        let why = client::api_error(status.as_u16(), &String::from_utf8_lossy(&body));
        bail!("failed to launch MCP server {name}: {why}");
    }
    let spec = serde_json::from_slice(&body)
        .with_context(|| format!("failed to parse the launch of MCP server {name}"))?;
    Ok((spec, session, egress))
}
