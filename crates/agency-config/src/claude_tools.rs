//! Claude Code's built-in tools as `agents.claude_code.tools` names them:
//! the default an agent gets, the names this version knows, and the check
//! of the setting. Here rather than beside the runtime so that reading the
//! configuration needs no runtime.

/// The built-in tools an agent gets by default: what a developer needs to
/// read, search and change files and run commands (`TaskOutput`/`TaskStop`
/// read and stop `Bash` commands run in the background). Left out:
/// `WebFetch` and `WebSearch` (egress is the daemon's proxy's to grant, and
/// `WebSearch` runs at the model provider, past it), `Task` (sub-agents that
/// Agency neither schedules nor counts), and the session tools (cron,
/// worktrees, skills, messages to other sessions) that make no sense in a
/// one-shot `-p` run.
pub const DEFAULT_TOOLS: &[&str] = &[
    "Bash",
    "Read",
    "Edit",
    "Write",
    "Glob",
    "Grep",
    "NotebookEdit",
    "TaskOutput",
    "TaskStop",
];

/// The built-in tool names Claude Code 2.1 accepts in `--tools` (measured:
/// the `tools` of its `init` event; `Agent` is an alias of `Task`). A name
/// outside this list is allowed, since newer versions add tools, but the
/// daemon warns about it at start: `--tools` drops names it does not know
/// without a word.
pub const KNOWN_TOOLS: &[&str] = &[
    "Agent",
    "Bash",
    "CronCreate",
    "CronDelete",
    "CronList",
    "Edit",
    "EnterWorktree",
    "ExitWorktree",
    "Glob",
    "Grep",
    "NotebookEdit",
    "Read",
    "ReportFindings",
    "ScheduleWakeup",
    "SendMessage",
    "Skill",
    "Task",
    "TaskCreate",
    "TaskGet",
    "TaskList",
    "TaskOutput",
    "TaskStop",
    "TaskUpdate",
    "WebFetch",
    "WebSearch",
    "Workflow",
    "Write",
];

/// A name `agents.claude_code.tools` may not hold; the message names it
/// and says what to give instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolNameError {
    #[error(
        "agents.claude_code.tools: {0:?} is an MCP tool; Agency's tools are always allowed and other servers' come from [mcp_servers]"
    )]
    McpTool(String),
    #[error(
        "agents.claude_code.tools: {0:?} is not a tool name (give names such as \"Bash\", without rules; known: {known})",
        known = KNOWN_TOOLS.join(", ")
    )]
    NotAName(String),
    #[error(
        "agents.claude_code.tools: {given:?} is not a tool name; tool names are case-sensitive: did you mean {meant:?}?"
    )]
    WrongCase { given: String, meant: &'static str },
}

/// Checks `agents.claude_code.tools`: plain tool names only (no permission
/// rules such as `Bash(git *)`, which `--tools` does not take), no MCP
/// tools (Agency's are always there, other servers come from
/// `[mcp_servers]` and their capabilities), and no known name in the wrong
/// case (`--tools bash` would silently give no tool at all).
pub fn check_tools(tools: &[String]) -> Result<(), ToolNameError> {
    for name in tools {
        if name.starts_with("mcp__") {
            return Err(ToolNameError::McpTool(name.clone()));
        }
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(ToolNameError::NotAName(name.clone()));
        }
        if let Some(k) = KNOWN_TOOLS
            .iter()
            .find(|k| k.eq_ignore_ascii_case(name) && **k != name)
        {
            return Err(ToolNameError::WrongCase {
                given: name.clone(),
                meant: k,
            });
        }
    }
    Ok(())
}

/// The names of `tools` this version of Agency does not know as Claude
/// Code tools (warned about at start: a typo, or a newer tool).
pub fn unknown_tools(tools: &[String]) -> Vec<&str> {
    tools
        .iter()
        .map(String::as_str)
        .filter(|t| !KNOWN_TOOLS.contains(t))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_are_checked() {
        let names = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(check_tools(&names(DEFAULT_TOOLS)), Ok(()));
        assert_eq!(check_tools(&names(KNOWN_TOOLS)), Ok(()));
        assert_eq!(check_tools(&[]), Ok(()));
        for (bad, says) in [
            ("bash", "did you mean \"Bash\""),
            ("Bash(git *)", "without rules"),
            ("Read,Write", "is not a tool name"),
            ("", "is not a tool name"),
            ("mcp__agency__mail_send", "is an MCP tool"),
            ("mcp__other", "is an MCP tool"),
        ] {
            let e = check_tools(&names(&["Read", bad])).unwrap_err().to_string();
            assert!(e.starts_with("agents.claude_code.tools: "), "{e}");
            assert!(e.contains(says), "{bad:?}: {e}");
        }
        // A tool of a newer Claude Code is allowed, with a warning at start.
        let newer = names(&["Read", "FutureTool"]);
        assert_eq!(check_tools(&newer), Ok(()));
        assert_eq!(unknown_tools(&newer), ["FutureTool"]);
        assert!(unknown_tools(&names(DEFAULT_TOOLS)).is_empty());
    }
}
