//! Arguments of the commands that put spending and risky actions under
//! the user's control: approvals, the Claude Code hook, models
//! per handler, extra MCP servers' pins and budgets.

use std::path::PathBuf;

use clap::builder::NonEmptyStringValueParser;
use clap::{Args, Subcommand};

use super::parse_duration_ms;

#[derive(Debug, Args)]
pub struct ApprovalsArgs {
    /// Every request, decided and used ones too.
    #[arg(long)]
    pub all: bool,
}

#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// The request's number (from `agency approvals`).
    #[arg(value_parser = NonEmptyStringValueParser::new())]
    pub id: String,
    /// Approve every identical call of this handler, not just the next.
    #[arg(long)]
    pub always: bool,
}

#[derive(Debug, Args)]
pub struct DenyArgs {
    /// The request's number (from `agency approvals`).
    #[arg(value_parser = NonEmptyStringValueParser::new())]
    pub id: String,
    /// Why (the agent reads it).
    #[arg(long, value_parser = NonEmptyStringValueParser::new())]
    pub reason: String,
}

#[derive(Debug, Subcommand)]
pub enum HookCommand {
    /// Claude Code's PreToolUse hook: the hook's JSON on stdin, the
    /// decision JSON on stdout; any failure refuses the call.
    PreToolUse {
        /// A JSON file `{"url": MCP_URL, "token": TOKEN}` written by the
        /// daemon (default: AGENCY_MCP_URL and AGENCY_TOKEN).
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Claude Code's PostToolUse hook: reports how the call ended to the
    /// daemon's event log; never fails the run, prints nothing.
    PostToolUse {
        /// As for `pre-tool-use`.
        #[arg(long)]
        config: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum ModelCommand {
    /// Give a handler (and its underlings without their own) an upstream.
    Set {
        /// Handler id or unique prefix.
        #[arg(value_parser = NonEmptyStringValueParser::new())]
        handler: String,
        /// A `[models.NAME]` the daemon's runtime can use.
        #[arg(value_parser = NonEmptyStringValueParser::new())]
        upstream: String,
    },
    /// Remove a handler's own upstream: it inherits again.
    Clear {
        /// Handler id or unique prefix.
        #[arg(value_parser = NonEmptyStringValueParser::new())]
        handler: String,
    },
    /// A handler's upstream: its own or where it is inherited from.
    Show {
        /// Handler id or unique prefix.
        #[arg(value_parser = NonEmptyStringValueParser::new())]
        handler: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Every pinned tool (approved or quarantined) and the changes
    /// waiting for a decision, with their ids.
    Pins,
    /// Show the diff of a quarantined tool's definition against the
    /// approved one, and approve it (or reject it with --reject).
    ApproveTool {
        /// The server's name in `[mcp_servers]`.
        server: String,
        /// The tool's name.
        tool: String,
        /// Reject the new definition instead: the tool stays quarantined
        /// while the server presents it.
        #[arg(long)]
        reject: bool,
    },
    /// Approve a change by its id (from `agency mcp pins`), showing its diff.
    Approve {
        #[arg(value_parser = NonEmptyStringValueParser::new())]
        id: String,
    },
    /// Reject a change by its id, showing its diff.
    Reject {
        #[arg(value_parser = NonEmptyStringValueParser::new())]
        id: String,
    },
}

#[derive(Debug, Subcommand)]
pub enum BudgetCommand {
    /// Set (replace) the limits on a handler's subtree; a limit not given
    /// is no limit, and none given removes the budget.
    Set {
        /// Handler id or unique prefix.
        #[arg(value_parser = NonEmptyStringValueParser::new())]
        handler: String,
        #[command(flatten)]
        limits: BudgetLimitArgs,
    },
    /// Spend against limit, as a tree of handlers (default: everything).
    Show {
        /// Only this handler's subtree (id or unique prefix).
        handler: Option<String>,
    },
}

#[derive(Debug, Clone, Default, Args)]
pub struct BudgetLimitArgs {
    /// Tokens of every kind (input, output, cache read and write).
    #[arg(long)]
    pub tokens: Option<i64>,
    /// Cost in US dollars (from the price table).
    #[arg(long)]
    pub usd: Option<f64>,
    /// Model calls.
    #[arg(long)]
    pub calls: Option<i64>,
    /// Tool calls (Agency's tools and every tool the daemon admits).
    #[arg(long)]
    pub tool_calls: Option<i64>,
    /// Agent starts.
    #[arg(long)]
    pub spawns: Option<i64>,
    /// Agents live at once.
    #[arg(long)]
    pub live_agents: Option<i64>,
    /// Delegations to handlers below it.
    #[arg(long)]
    pub handlers: Option<i64>,
    /// Levels of handlers below it.
    #[arg(long)]
    pub depth: Option<i64>,
    /// Wall-clock time from when the budget was first set, e.g. 90s, 30m,
    /// 2h, 1d, 1h30m.
    #[arg(long, value_parser = parse_duration_ms)]
    pub wall_clock: Option<i64>,
}
