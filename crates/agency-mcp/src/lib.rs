//! Agency's MCP tools: a thin adapter from the Model Context Protocol to the
//! service layer, served as streamable HTTP inside an [`axum::Router`].
//!
//! Every tool parses and validates its arguments, calls one
//! [`agency_service::Service`] operation as
//! [`Principal::agent`](agency_core::Principal::agent) of the calling agent,
//! and formats the result as JSON. The service decides every permission;
//! nothing here checks or bypasses one.
//!
//! Identity never comes from tool arguments: the daemon's bearer-token
//! middleware puts an [`AgentIdentity`] into the HTTP request's extensions,
//! rmcp hands the request's [`http::request::Parts`] to the tool through the
//! request context, and the tool reads the identity from there (see
//! `server.rs`).

mod args;
mod direct;
mod org_tools;
mod reply;
mod server;
mod tools;
pub mod workspace;

use std::path::PathBuf;
use std::sync::Arc;

use agency_core::{AgentId, HandlerId};
use agency_service::Service;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

pub use org_tools::{OrgToolFailure, OrgToolResult, OrgTools};
pub use tokio_util::sync::CancellationToken;

/// The path the MCP endpoint is served at (POST, GET and DELETE).
pub const MCP_PATH: &str = "/mcp";

/// Who is calling, established by the daemon's bearer-token middleware and put in the
/// HTTP request's extensions before the request reaches the MCP service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentIdentity {
    pub handler: HandlerId,
    pub agent: AgentId,
    /// The agent's workspace directory; tools that take a `path` resolve it
    /// inside this directory and refuse when there is none.
    pub workspace: Option<PathBuf>,
}

/// The tool names, in a stable order (tests and the daemon use it). The
/// list lives in the service, which refuses an organisation tool of one of
/// these names.
pub const TOOL_NAMES: &[&str] = agency_service::AGENCY_MCP_TOOL_NAMES;

/// The daemon's repo cache, as the `repo_clone` and `repo_push` tools see
/// it.
pub trait RepoCache: Send + Sync + std::fmt::Debug {
    /// Clone repo `name` (refreshing its mirror first) into `dest`, a
    /// relative path beneath the agent's `workspace` that does not exist
    /// yet; returns the repo's source. The workspace is the agent's to
    /// change at any moment: the cache must not follow a symlink in it.
    fn clone_repo(
        &self,
        name: &str,
        workspace: &std::path::Path,
        dest: &std::path::Path,
    ) -> Result<String, CloneError>;

    /// Push the commit of branch `req.branch` of the agent's clone to the
    /// repo's origin as `agency/<handler>/<remote_branch>`. `admit` is
    /// called with what would be pushed once the clone has said which
    /// commit its branch names, before any of its objects are read: its
    /// refusal (a denial, an approval still pending) stops the push there.
    /// Once the commit is fetched and before anything is sent to the
    /// origin, `record` is called with the same: its refusal (the
    /// service's last check, which also writes the audit record) stops the
    /// push.
    fn push_repo(
        &self,
        req: &PushRequest<'_>,
        admit: &mut dyn FnMut(&Pushed) -> Result<(), String>,
        record: &mut dyn FnMut(&Pushed) -> Result<(), String>,
    ) -> Result<Pushed, PushError>;
}

/// The daemon's registry of warm agents, as `mail_wait`
/// sees it: an agent waiting there is parked (warm, idle, holding its
/// slot), and the daemon may ask it to give the slot back.
pub trait WarmPool: Send + Sync + std::fmt::Debug {
    /// `caller` starts waiting for mail. The token is cancelled when the
    /// daemon wants the agent's slot back (already cancelled if it asked
    /// before this wait began).
    fn park(&self, caller: &AgentIdentity) -> CancellationToken;
    /// The wait `park` began has ended, however it ended.
    fn unpark(&self, caller: &AgentIdentity);
}

/// Why a push did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PushError {
    /// The request or the clone is not acceptable (no such branch, not a
    /// git clone, borrowed objects…): the agent can fix it.
    #[error("{0}")]
    Invalid(String),
    /// `record` refused (its message is the refusal).
    #[error("{0}")]
    Refused(String),
    /// git failed or timed out.
    #[error("{0}")]
    Failed(String),
}

/// Why a clone did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CloneError {
    /// The destination is not acceptable: the agent can fix it.
    #[error("{0}")]
    Invalid(String),
    /// git failed or timed out, or the repo is unknown.
    #[error("{0}")]
    Failed(String),
}

/// What `repo_push` asks the repo cache to push. Names are checked by the
/// tool ([`agency_core::git_ref::check_branch`]) and again by the cache.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushRequest<'a> {
    /// The repo's name in `[repos]`.
    pub repo: &'a str,
    /// The handler whose prefix the push writes under, and its agent.
    pub handler: HandlerId,
    pub agent: AgentId,
    /// The agent's workspace (canonical) and the clone's directory in it
    /// (canonical, inside the workspace).
    pub workspace: &'a std::path::Path,
    pub clone: &'a std::path::Path,
    /// The local branch whose commit is pushed.
    pub branch: &'a str,
    /// The name under the handler's prefix on the origin.
    pub remote_branch: &'a str,
}

/// A push: the ref written on the origin and the commit it now names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pushed {
    /// `refs/heads/agency/<handler>/<remote_branch>`.
    pub remote_ref: String,
    /// The commit's hex object id.
    pub commit: String,
}

/// Tunables of the MCP endpoint beyond the defaults [`router`] uses; build
/// with `RouterOptions { shutdown: token, ..Default::default() }`.
#[derive(Debug, Clone)]
pub struct RouterOptions {
    /// Cancelled when the daemon shuts down: ends every call still open
    /// (a `mail_wait` can hold its request for minutes), which axum's
    /// graceful shutdown would otherwise wait for.
    pub shutdown: CancellationToken,
    /// `Host` header values accepted (DNS-rebinding protection). Entries
    /// without a port match any port. Default: loopback names only.
    pub allowed_hosts: Vec<String>,
    /// The repo cache behind `repo_clone` and `repo_push` (none: the tools
    /// say so).
    pub repos: Option<Arc<dyn RepoCache>>,
    /// The runner of organisation tools (none: they are not offered).
    pub org_tools: Option<Arc<dyn OrgTools>>,
    /// The daemon's registry of warm agents, which `mail_wait` parks the
    /// caller in (none: waits are never released early).
    pub warm: Option<Arc<dyn WarmPool>>,
}

impl Default for RouterOptions {
    fn default() -> Self {
        RouterOptions {
            shutdown: CancellationToken::new(),
            allowed_hosts: vec!["localhost".into(), "127.0.0.1".into(), "::1".into()],
            repos: None,
            org_tools: None,
            warm: None,
        }
    }
}

/// The axum Router serving MCP streamable HTTP at path "/mcp" (POST, GET, DELETE).
/// It reads AgentIdentity from the request extensions (rmcp exposes the http::request::Parts
/// through the RequestContext extensions); a request without one is answered with an MCP error.
pub fn router(svc: Arc<Service>) -> axum::Router {
    router_with(svc, RouterOptions::default())
}

/// One MCP tool as agents are offered it, for `agency tools`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ToolInfo {
    pub name: String,
    pub description: String,
    /// The JSON Schema of the tool's arguments.
    pub input_schema: serde_json::Value,
}

/// Every tool of the router, by name: the same table the MCP server
/// serves, so the list cannot drift from what agents see.
pub fn tool_list() -> Vec<ToolInfo> {
    let mut list: Vec<ToolInfo> = tools::router()
        .list_all()
        .into_iter()
        .map(|t| ToolInfo {
            name: t.name.to_string(),
            description: t.description.as_deref().unwrap_or_default().to_owned(),
            input_schema: serde_json::Value::Object((*t.input_schema).clone()),
        })
        .collect();
    list.sort_by(|a, b| a.name.cmp(&b.name));
    list
}

/// [`router`] with explicit options (shutdown token, allowed hosts).
///
/// The endpoint is stateless and answers in JSON: every POST
/// carries the agent's token and is served on its own, with no MCP session
/// to keep, no session worker task and no SSE framing between the request
/// and its answer. That is the shape of the 2026-07-28 protocol, which has no
/// sessions at all, and older clients accept it: a server need not assign
/// a session id, and GET (a server-to-client stream) may answer 405. Agency
/// never sends a request or notification of its own to a client, so nothing
/// is lost; a tool that did emit one mid-call would still be answered as an
/// SSE stream (rmcp falls back by itself). Without sessions there is nothing
/// for another agent's token to take over: each request acts as the token
/// it came with, whatever `Mcp-Session-Id` it carries.
pub fn router_with(svc: Arc<Service>, opts: RouterOptions) -> axum::Router {
    // Built once and shared by every request: rmcp's `#[tool_handler]`
    // default would rebuild the router (and re-derive every schema) on each
    // call.
    let (router, direct) = tools::build();
    let tools = Arc::new(router);
    let max_body = max_request_bytes(svc.limits().max_file_bytes);
    let allowed_hosts = Arc::new(opts.allowed_hosts.clone());
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_allowed_hosts(opts.allowed_hosts)
        .with_cancellation_token(opts.shutdown)
        .with_max_request_body_bytes(max_body);
    let repos = opts.repos;
    let org_tools = opts.org_tools;
    let warm = opts.warm;
    let factory_svc = svc.clone();
    let factory_repos = repos.clone();
    let rmcp = StreamableHttpService::new(
        move || {
            Ok(server::AgencyMcp::new(
                factory_svc.clone(),
                tools.clone(),
                factory_repos.clone(),
                org_tools.clone(),
                warm.clone(),
            ))
        },
        // Never used in stateless mode; rmcp's constructor wants one.
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let endpoint = Arc::new(direct::Endpoint {
        svc,
        repos,
        direct: Arc::new(direct),
        allowed_hosts,
        max_body,
        rmcp,
    });
    axum::Router::new().route(
        MCP_PATH,
        axum::routing::any(move |request: http::Request<axum::body::Body>| {
            direct::serve(endpoint.clone(), request)
        }),
    )
}

/// The largest HTTP request body accepted: room for the largest inline
/// content the service accepts, JSON-escaped, so that an oversized file is
/// refused by the service with a message the agent can read rather than by
/// the transport with a bare 413. The daemon's REST API uses the same
/// bound, so one configured limit holds everywhere.
pub fn max_request_bytes(max_file_bytes: usize) -> usize {
    const FLOOR: usize = 4 * 1024 * 1024;
    max_file_bytes
        .saturating_mul(2)
        .saturating_add(1024 * 1024)
        .max(FLOOR)
}
