//! `agency tools`: the tools agents are offered, with their arguments —
//! Agency's MCP tools, from the same table the daemon's MCP server serves,
//! and the built-in runtime's workspace tools (shell, files, search), from
//! the same table its loop gives the model — no daemon needed.

use std::process::ExitCode;

use agency_mcp::ToolInfo;
use anyhow::Result;
use serde::Serialize;

use super::{emit, emit_json};
use crate::output;

/// One tool in `agency tools --json`: the definition and where it runs.
#[derive(Debug, Serialize)]
struct ToolEntry {
    #[serde(flatten)]
    tool: ToolInfo,
    /// `mcp`: one of Agency's MCP tools (every runtime); `workspace`: run
    /// by the built-in runtime itself in the agent's workspace.
    source: &'static str,
}

pub fn tools(json: bool) -> Result<ExitCode> {
    let mcp = agency_mcp::tool_list();
    let workspace: Vec<ToolInfo> = agency_agent::workspace_tool_list()
        .into_iter()
        .map(|t| ToolInfo {
            name: t.name,
            description: t.description,
            input_schema: t.input_schema,
        })
        .collect();
    if json {
        let all: Vec<ToolEntry> = mcp
            .into_iter()
            .map(|tool| ToolEntry {
                tool,
                source: "mcp",
            })
            .chain(workspace.into_iter().map(|tool| ToolEntry {
                tool,
                source: "workspace",
            }))
            .collect();
        emit_json(&all)?;
    } else {
        let mut out = String::from("Agency's MCP tools (every runtime):\n\n");
        out.push_str(&output::tools(&mcp));
        out.push_str(
            "\nWorkspace tools of the built-in runtime (run by `agency agent` in the agent's\n\
             workspace, inside its sandbox; `[agents.builtin] tools` chooses which):\n\n",
        );
        out.push_str(&output::tools(&workspace));
        emit(&out)?;
    }
    Ok(ExitCode::SUCCESS)
}
