//! The workspace tools `agency agent` runs itself (shell, files, search),
//! offered to the model beside the MCP tools. One file per tool group;
//! `registry` names them, describes them to the model and routes calls.

mod admission;
mod common;
mod files;
mod globs;
mod registry;
mod search;
mod shell;

pub(crate) use admission::ToolCheck;
pub(crate) use registry::Workspace;
pub use registry::{WORKSPACE_TOOLS, WorkspaceTool, workspace_tool_list};
