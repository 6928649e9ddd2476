//! `agency mcp-launch NAME`: how an agent reaches an extra MCP server. The
//! agent's MCP configuration runs this (stdio) with the agent's token and
//! the spawn's single-use launch nonce; it asks the daemon where the
//! server is — which the daemon answers once, and only if the agent's
//! handler holds a capability on `mcp_server:NAME` — and bridges stdio to
//! the daemon's `/mcp-proxy/NAME`, which runs a stdio server itself (out
//! of the agent's reach) or forwards to an HTTP one, and guards every
//! message. No secret passes through here.

use std::process::ExitCode;

use agency_config::mcp_servers::LaunchSpec;
use agency_tools::launch::NONCE_HEADER;
use anyhow::{Context, Result, bail};
use reqwest::header::{HeaderMap, HeaderValue};

use crate::client::{self, http_client};

/// The variables the launcher reads.
const URL_VAR: &str = "AGENCY_MCP_URL";
const TOKEN_VAR: &str = "AGENCY_TOKEN";
const NONCE_VAR: &str = "AGENCY_LAUNCH_NONCE";

pub fn mcp_launch(name: &str) -> Result<ExitCode> {
    let LaunchSpec::Proxy { url } = fetch(name)? else {
        bail!(
            "failed to launch MCP server {name}: the daemon did not answer with its proxy; is the daemon older than this launcher?"
        );
    };
    // The agent's token authenticates this bridge to the daemon, which
    // adds whatever the server needs.
    let token = std::env::var(TOKEN_VAR).unwrap_or_default();
    let mut map = HeaderMap::new();
    let value = HeaderValue::from_str(&format!("Bearer {}", token.trim()))
        .context("failed to use the agent's token as a header")?;
    map.insert(reqwest::header::AUTHORIZATION, value);
    crate::bridge::run_remote(name, &url, map)
}

/// Ask the daemon where server `name` is reached.
fn fetch(name: &str) -> Result<LaunchSpec> {
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
    let body = resp
        .bytes()
        .with_context(|| format!("failed to read the daemon's answer from {url}"))?;
    if !status.is_success() {
        let why = client::api_error(status.as_u16(), &String::from_utf8_lossy(&body));
        bail!("failed to launch MCP server {name}: {why}");
    }
    serde_json::from_slice(&body)
        .with_context(|| format!("failed to parse the launch of MCP server {name}"))
}
