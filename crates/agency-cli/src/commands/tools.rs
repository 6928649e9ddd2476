//! `agency tools`: the MCP tools agents are offered, with their arguments,
//! from the same table the daemon's MCP server serves (no daemon needed).

use std::process::ExitCode;

use anyhow::Result;

use super::{emit, emit_json};
use crate::output;

pub fn tools(json: bool) -> Result<ExitCode> {
    let list = agency_mcp::tool_list();
    if json {
        emit_json(&list)?;
    } else {
        emit(&output::tools(&list))?;
    }
    Ok(ExitCode::SUCCESS)
}
