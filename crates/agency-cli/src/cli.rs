//! The command line, as clap definitions. Only the shape of the arguments
//! lives here; what each command does is in `commands/`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

const AFTER_HELP: &str = "\
Ids of handlers, outcomes, KB files and agents may be abbreviated to any
unique prefix (e.g. the first 8 hex digits).

Every command except `init` and `serve` talks to the running daemon of the
home; start one with `agency serve`.

Exit status: 0 on success, 1 on failure (including `status` when no daemon
is running and `fsck` when it finds problems), 2 on usage errors.";

/// Agency: an organisation of LLM agents with durable handlers, outcomes,
/// mail and a shared Knowledge Base.
#[derive(Debug, Parser)]
#[command(name = "agency", version, after_help = AFTER_HELP)]
pub struct Cli {
    /// The Agency home directory [default: $AGENCY_HOME, else ~/.agency].
    #[arg(long, global = true, value_name = "DIR")]
    pub home: Option<PathBuf>,

    /// Print the API's JSON instead of tables and text.
    #[arg(long, global = true)]
    pub json: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create the home (configuration, admin token, store, root handler).
    /// An existing home is left unchanged.
    Init,

    /// Run the daemon in the foreground until SIGINT or SIGTERM.
    Serve,

    /// Whether a daemon is running, where, and what it holds.
    ///
    /// Exits 0 when the daemon answers; prints "not running" and exits 1
    /// when no daemon is running for the home.
    Status,

    /// Send a message to the root handler.
    Send(SendArgs),

    /// Send a message to any handler.
    Tell(TellArgs),

    /// Show your inbox (delivered, unacknowledged messages).
    Inbox(InboxArgs),

    /// The handler tree, indented by boss.
    Handlers,

    /// The outcome DAG as an indented tree (an outcome with several
    /// parents appears under each; repeats are marked and not expanded).
    Outcomes(OutcomesArgs),

    /// One outcome.
    #[command(subcommand)]
    Outcome(OutcomeCommand),

    /// Live and recent agents.
    Agents(AgentsArgs),

    /// The Knowledge Base.
    #[command(subcommand)]
    Kb(KbCommand),

    /// Re-hash every stored blob; exits 1 if any version's content is
    /// missing or corrupt.
    Fsck,

    /// A handler's audit log, oldest first.
    Audit(HandlerArg),

    /// Force-stop a handler and its subtree; its boss reclaims their
    /// outcomes. Prints the report.
    Stop(HandlerArg),

    /// Grant a handler a capability, e.g. `agency grant <handler>
    /// mcp_server:github read` (an extra MCP server from agency.toml),
    /// `repo:site read`, or `kb:<file-id> write`. Prints its id.
    Grant(GrantArgs),

    /// List a handler's live capabilities.
    Caps(HandlerArg),

    /// Revoke a capability (its number, from `agency caps`) and every
    /// capability derived from it. An agent whose MCP servers change is
    /// told to save its state and is restarted with the new set.
    Revoke(RevokeArgs),

    /// Mail receipts: `agency mail status <message>`.
    #[command(subcommand)]
    Mail(MailCommand),

    /// Agent runs, newest first: when each started and ended, how it
    /// ended (abnormal ends are named), exit status, tool calls, tokens.
    Runs(RunsArgs),

    /// One agent run in full (runtime, prompt version and hash, usage).
    Run(RunArg),

    /// A readable replay of a run's transcript: turns, the model's text,
    /// tool calls with their arguments, results cut short. With `--json`,
    /// the raw events, one JSON object per line.
    Transcript(RunArg),

    /// Bearer tokens for external MCP clients.
    #[command(subcommand)]
    Token(TokenCommand),

    /// Bridge stdio to the daemon's MCP endpoint, for MCP clients that only
    /// speak stdio: newline-delimited JSON-RPC on stdin and stdout.
    ///
    /// Exits 0 at the end of stdin (after ending the MCP session), 1 when
    /// the daemon refuses the token or cannot be reached.
    McpStdio(McpStdioArgs),

    /// Start the extra MCP server NAME for an agent (run by agents' MCP
    /// configurations, with AGENCY_MCP_URL and AGENCY_TOKEN set): the
    /// daemon checks the agent's capability and hands over the server's
    /// command or URL with its secrets, which go to the server only.
    McpLaunch(McpLaunchArgs),

    /// Run one built-in agent (used by the daemon's `builtin` runtime): an
    /// LLM conversation whose tools are Agency's MCP tools. Exits 0 when it
    /// ended normally or at a limit, 1 on error.
    Agent(AgentArgs),

    /// Agency's main job, offline: a fresh home, the real daemon and
    /// built-in agents against the scripted model server play a
    /// three-level story, then the handler tree, the outcome DAG and your
    /// inbox are printed.
    /// Runs in a fresh temporary home unless `--home` names a new
    /// directory; it never touches your usual home.
    Demo,

    /// Serve the scripted model server (Anthropic Messages and
    /// OpenAI-compatible chat completions) on 127.0.0.1, for offline runs
    /// and tests, until SIGINT or SIGTERM.
    ModelServer(ModelServerArgs),
}

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// The agent's JSON configuration (see the agency-agent crate docs).
    #[arg(long)]
    pub config: PathBuf,
}

#[derive(Debug, Args)]
pub struct ModelServerArgs {
    /// The JSON script of scenarios (see the agency-testkit crate docs).
    #[arg(long)]
    pub script: PathBuf,
    /// Port on 127.0.0.1; 0 picks a free one (printed on stdout).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
}

#[derive(Debug, Args)]
pub struct SendArgs {
    /// The message text.
    pub text: String,
    /// A subject line (default: derived from the text).
    #[arg(long)]
    pub subject: Option<String>,
}

#[derive(Debug, Args)]
pub struct TellArgs {
    /// Handler id or unique prefix.
    pub handler: String,
    /// The message text.
    pub text: String,
    /// A subject line (default: derived from the text).
    #[arg(long)]
    pub subject: Option<String>,
}

#[derive(Debug, Args)]
pub struct InboxArgs {
    /// Acknowledge every message shown.
    #[arg(long)]
    pub ack: bool,
}

#[derive(Debug, Args)]
pub struct OutcomesArgs {
    /// Start from this outcome instead of the root handler's root.
    #[arg(long, value_name = "OUTCOME")]
    pub root: Option<String>,
    /// At most this many outcomes.
    #[arg(long, default_value_t = 10_000)]
    pub limit: usize,
    /// Instead of the tree, list the outcomes this handler is
    /// responsible for (id or unique prefix).
    #[arg(long, value_name = "HANDLER", conflicts_with = "root")]
    pub of: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum OutcomeCommand {
    /// An outcome's details, parents, children and history.
    Show {
        /// Outcome id or unique prefix.
        id: String,
    },
}

#[derive(Debug, Args)]
pub struct AgentsArgs {
    /// How many recent agents to list besides the live ones.
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
}

#[derive(Debug, Subcommand)]
pub enum KbCommand {
    /// Every file you can read.
    Ls,
    /// Print a file's content.
    Cat {
        /// File id or unique prefix.
        id: String,
        /// This version instead of the latest.
        #[arg(long)]
        version: Option<i64>,
    },
    /// A file's version history, newest first.
    Log {
        /// File id or unique prefix.
        id: String,
    },
    /// A file's access log: who read, created and wrote it, and when,
    /// newest first.
    Audit {
        /// File id or unique prefix (or kb://UUID).
        id: String,
        /// At most this many entries.
        #[arg(long, default_value_t = 200)]
        limit: usize,
    },
}

#[derive(Debug, Subcommand)]
pub enum MailCommand {
    /// A message's receipt: sent, delivered (or when due), acknowledged.
    Status {
        /// Message id or unique prefix.
        id: String,
    },
}

#[derive(Debug, Args)]
pub struct RunsArgs {
    /// Only this handler's runs (id or unique prefix).
    pub handler: Option<String>,
    /// At most this many runs.
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
}

#[derive(Debug, Args)]
pub struct RunArg {
    /// The run's agent id or unique prefix.
    pub run: String,
}

#[derive(Debug, Args)]
pub struct HandlerArg {
    /// Handler id or unique prefix.
    pub handler: String,
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Mint a token that makes an MCP client a live agent of a handler.
    /// The token is printed once, alone on stdout.
    Mint {
        /// Handler id or unique prefix.
        #[arg(long)]
        handler: String,
        /// The client's working directory, where the `path` arguments of
        /// MCP tools resolve (made absolute; must exist).
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
    },
    /// Revoke an agent's token; the agent ends with it.
    Revoke {
        /// Agent id or unique prefix.
        agent: String,
    },
}

#[derive(Debug, Args)]
pub struct GrantArgs {
    /// The handler (id or unique prefix).
    pub handler: String,
    /// KIND:KEY, where KIND is kb, mcp_server or repo.
    pub resource: String,
    /// none, read or write.
    pub level: String,
    /// Whether the handler may pass it on to its underlings.
    #[arg(long)]
    pub delegatable: bool,
}

#[derive(Debug, Args)]
pub struct RevokeArgs {
    /// The capability's number.
    pub capability: String,
}

#[derive(Debug, Args)]
pub struct McpLaunchArgs {
    /// The server's name in `[mcp_servers]` of agency.toml.
    pub name: String,
}

#[derive(Debug, Args)]
pub struct McpStdioArgs {
    /// File holding the agent's bearer token (from `agency token mint`).
    #[arg(long, value_name = "FILE")]
    pub token_file: PathBuf,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    #[test]
    fn definitions_are_consistent() {
        Cli::command().debug_assert();
    }
}
