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
    InvalidConfig(String),
    #[error("failed to read the {what} from environment variable {var}: {reason}")]
    Env {
        what: &'static str,
        var: String,
        reason: &'static str,
    },
    #[error("failed to build the HTTP client: {0}")]
    HttpClient(String),
    #[error("failed to connect to the MCP server at {url}: {message}")]
    McpConnect { url: String, message: String },
    #[error("failed to list the tools of the MCP server at {url}: {message}")]
    McpListTools { url: String, message: String },
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
