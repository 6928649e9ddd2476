//! The runtime's errors, each in "failed to …" form naming the file, URL or
//! variable concerned. Messages never carry a secret: values from the
//! environment are named, not shown, and server text passes through the
//! run's redactor before it is recorded.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("failed to read agent configuration {}: {message}", path.display())]
    ReadConfig { path: PathBuf, message: String },
    #[error("failed to validate the agent configuration: {0}")]
    InvalidConfig(#[from] ConfigError),
    #[error("failed to read the {what} from environment variable {var}: {reason}")]
    Env {
        what: &'static str,
        var: String,
        reason: &'static str,
    },
    #[error("failed to build the HTTP client: {0}")]
    HttpClient(String),
    /// The cause is in the message, not a `#[source]`: printed once,
    /// however the error is printed (`{e}` or the chain with `{e:#}`).
    #[error("failed to connect to the MCP server at {url}: {cause}")]
    McpConnect { url: String, cause: McpError },
    #[error("failed to list the tools of the MCP server at {url}: {cause}")]
    McpListTools { url: String, cause: McpError },
    #[error("failed to find the workspace directory: {0}")]
    Workspace(String),
    #[error("failed to offer workspace tool {0}: an MCP server offers a tool of the same name")]
    ToolClash(String),
    #[error("failed to call the model at {url}: {message}")]
    Model { url: String, message: String },
    #[error("failed to finish the run: stopped from outside (signal or shutdown)")]
    Stopped,
    #[error("failed to write transcript {}: {message}", path.display())]
    Transcript { path: PathBuf, message: String },
    #[error("failed to write result {}: {message}", path.display())]
    Result { path: PathBuf, message: String },
}

/// Why an MCP session could not be started, initialized or asked for its
/// tools (Agency's own or an extra server's).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// An extra server's command could not be run.
    #[error("failed to start {command}: {cause}")]
    Start {
        command: String,
        cause: std::io::Error,
    },
    /// The server did not answer within the request timeout.
    #[error("no answer within {} s", .0.as_secs())]
    NoAnswer(std::time::Duration),
    // Boxed: rmcp's errors can hold a whole message, and every
    // `Result<_, AgentError>` would carry that size.
    #[error(transparent)]
    Initialize(Box<rmcp::service::ClientInitializeError>),
    #[error(transparent)]
    Request(Box<rmcp::ServiceError>),
}

impl From<rmcp::service::ClientInitializeError> for McpError {
    fn from(e: rmcp::service::ClientInitializeError) -> McpError {
        McpError::Initialize(Box::new(e))
    }
}

impl From<rmcp::ServiceError> for McpError {
    fn from(e: rmcp::ServiceError) -> McpError {
        McpError::Request(Box::new(e))
    }
}

/// A configuration value serde accepts but the run cannot use; each names
/// its field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("`{0}` must start with http:// or https://")]
    UrlScheme(&'static str),
    #[error("`{0}` has no host")]
    UrlHost(&'static str),
    #[error("`{0}` contains whitespace")]
    UrlWhitespace(&'static str),
    #[error("`{0}` must be an environment variable name (letters, digits, `_`)")]
    EnvName(&'static str),
    #[error("`{0}` is empty")]
    Empty(&'static str),
    #[error("`{0}` must be at least 1")]
    Zero(&'static str),
    #[error("`retry.initial_backoff_ms` exceeds `retry.max_backoff_ms`")]
    BackoffOrder,
    #[error("`workspace_tools`: {tool:?} is not one of {known}")]
    UnknownTool { tool: String, known: String },
    #[error("`workspace_tools`: {0:?} appears twice")]
    ToolTwice(String),
    #[error("`workspace` must be an absolute path")]
    RelativeWorkspace,
    #[error("`mcp_servers`: name {0:?} must be letters, digits, - and _ (without __)")]
    ServerName(String),
    #[error("`mcp_servers`: name {0:?} appears twice")]
    ServerTwice(String),
    #[error("`mcp_servers` {name}: type {transport:?} is not \"stdio\"")]
    ServerType { name: String, transport: String },
    #[error("`mcp_servers` {0}: command is empty")]
    ServerCommand(String),
}

/// Why a model answer could not be assembled: the attempt failed, and is
/// retried.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReplyError {
    #[error(transparent)]
    Stream(#[from] agency_sse::SseError),
    #[error("unreadable `{event}` event ({source})")]
    UnreadableEvent {
        event: String,
        source: serde_json::Error,
    },
    #[error("unreadable chunk ({0})")]
    UnreadableChunk(#[source] serde_json::Error),
    /// An error the server put in the answer: `kind` is its type, or
    /// "an error".
    #[error("the server reported {kind}: {message}")]
    Reported { kind: String, message: String },
    /// The stream ended before the event that says the answer is whole.
    #[error("the stream ended before {0}")]
    Cut(&'static str),
}
