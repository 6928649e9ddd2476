//! The command line, as clap definitions. Only the shape of the arguments
//! lives here; what each command does is in `commands/`.

use std::path::PathBuf;

use clap::builder::NonEmptyStringValueParser;
use clap::{Args, Parser, Subcommand};

mod control;
mod groups;
mod kb;
mod lessons;
mod memory;
mod org;
mod pipeline;
mod store;

pub use control::*;
pub use kb::*;
pub use lessons::*;
pub use memory::*;
pub use org::*;
pub use pipeline::*;
pub use store::*;

const AFTER_HELP: &str = "\
Ids of handlers, outcomes, KB files and agents may be abbreviated to any
unique prefix (e.g. the first 8 hex digits). Tables show ids so: the first
8 hex digits, more where two ids shown share them; `--wide` (or
AGENCY_WIDE=1) shows full ids, uncut cells and absolute times.

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

    /// Show tables whole: full ids, uncut cells, RFC 3339 times (by
    /// default they fit the terminal, 100 columns for a pipe). AGENCY_WIDE=1
    /// in the environment does the same.
    #[arg(long, global = true)]
    pub wide: bool,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create the home (configuration, admin token, store, root handler).
    /// An existing home is left unchanged.
    ///
    /// A new root handler gets a budget: the limits given here, or the
    /// default ($25, 1000 agent spawns, 200 handlers) when none is given;
    /// `--no-budget` for none. Change it later with `agency budget set`.
    Init(InitArgs),

    /// Run the daemon in the foreground until SIGINT or SIGTERM.
    Serve,

    /// Whether a daemon is running, where, and what it holds.
    ///
    /// Exits 0 when the daemon answers; prints "not running" and exits 1
    /// when no daemon is running for the home.
    Status,

    /// Stop the running daemon gracefully and wait until it has stopped.
    ///
    /// Its agents get their grace period (kill_grace_ms) to save state,
    /// in-flight requests finish, then it exits 0. SIGTERM or SIGINT to
    /// `agency serve` does the same; `agency stop` stops a handler, not
    /// the daemon.
    Shutdown,

    /// Re-read agency.toml and policy.toml and apply what can change while
    /// the daemon runs; says, per changed setting, "applied" or "needs a
    /// restart" (docs/configuration.md lists which are which).
    ///
    /// A file that does not parse or validate changes nothing (exit 1,
    /// naming the file and line). SIGHUP to `agency serve` does the same.
    Reload,

    /// The tools agents use, with their arguments (JSON Schema with
    /// `--json`): Agency's MCP tools, and the built-in runtime's workspace
    /// tools (shell, files, search). Needs no daemon.
    Tools,

    /// Compile an organisation's sources (.agency/.agent/.tool files or
    /// agents.json) into the Agency Model JSON; every problem is printed as
    /// `file:line:col: error|warning: …`. Exits 1 on any error. Needs no daemon.
    Compile(crate::commands::org_compile::CompileArgs),

    /// The JSON Schema of the Agency Model (`--sources`: of the sources'
    /// frontmatter; `agency schema pipeline [--sources]`: of the Pipeline
    /// Model, or of a .pipeline file's frontmatter).
    /// Needs no daemon.
    Schema(crate::commands::org_compile::SchemaArgs),

    /// Pipelines of checked stages (`.pipeline` files): compile one, or
    /// write a built-in one (AgencyCore) as editable sources.
    #[command(subcommand)]
    Pipeline(PipelineCommand),

    /// What pipelines learned: lessons admitted on evidence and recalled
    /// by later runs; list, show, approve, reject, retire, roll back,
    /// export.
    #[command(subcommand)]
    Lessons(LessonsCommand),

    /// The store itself: copy a SQLite home's store into PostgreSQL
    /// (`migrate --to postgres://…`). Needs no daemon.
    #[command(subcommand)]
    Store(StoreCommand),

    /// An agent's effective definition after inheritance, and the file
    /// and line each field came from. Needs no daemon.
    Explain(crate::commands::org_compile::ExplainArgs),

    /// Send a message to the root handler.
    Send(SendArgs),

    /// Send a message to any handler.
    Tell(TellArgs),

    /// Show your inbox (delivered, unacknowledged messages; replies to
    /// outside callers are in `agency conversations`).
    Inbox(InboxArgs),

    /// The handler tree, indented by boss.
    Handlers,

    /// The outcome DAG as an indented tree (an outcome with several
    /// parents appears under each; repeats are marked and not expanded).
    Outcomes(OutcomesArgs),

    /// One outcome.
    #[command(subcommand)]
    Outcome(OutcomeCommand),

    /// Set a completed or closed outcome back to open, with a rationale
    /// kept in its history. Its responsible handler is told by mail; if
    /// that handler has retired, the nearest active boss above it becomes
    /// responsible again (the retired handler is not revived).
    Reopen(ReopenArgs),

    /// Live and recent agents.
    Agents(AgentsArgs),

    /// The Knowledge Base.
    #[command(subcommand)]
    Kb(KbCommand),

    /// Re-hash every stored blob; exits 1 if any version's content is
    /// missing or corrupt.
    Fsck,

    /// Apply the retention policy now (`[retention]` in agency.toml; the
    /// daemon also does it every `gc_interval_hours`): remove acknowledged
    /// mail past `acked_mail_days` with bodies nothing else needs, and
    /// blobs no version points at. Never removes anything a live
    /// capability or a file version needs. Prints what it removed.
    Gc(GcArgs),

    /// A handler's audit log, oldest first.
    Audit(HandlerArg),

    /// Force-stop a handler and its subtree; its boss reclaims their
    /// outcomes. Prints the report.
    Stop(HandlerArg),

    /// Grant a handler a capability, e.g. `agency grant <handler>
    /// mcp_server:github read` (an extra MCP server from agency.toml),
    /// `repo:site read`, `kb:<file-id> write`, or `egress:api.github.com
    /// read` (network access through Agency's proxy: HOST, `*.DOMAIN` for
    /// its subdomains, `:PORT` for another port than 80 and 443). Prints
    /// its id.
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

    /// One agent run in full (runtime, prompt version and hash, usage);
    /// `--prompt`: the system prompt and first message it was given.
    Run(RunShowArgs),

    /// A readable replay of a run's transcript: turns, the model's text,
    /// tool calls with their arguments, results cut short. With `--json`,
    /// the raw events, one JSON object per line. `--follow`: a live run's,
    /// as it is written, until the run ends (exit 0).
    Transcript(RunFollowArgs),

    /// Bearer tokens for external MCP clients.
    #[command(subcommand)]
    Token(TokenCommand),

    /// The captured stdout/stderr of an agent run (the agent's id, or a
    /// prefix of it, from `agency agents`), kept bounded: the first and
    /// the last part, the cut marked. Control characters are shown
    /// escaped, never sent to the terminal. `--follow`: a live run's, as
    /// it is printed, until the run ends (exit 0).
    Logs(RunFollowArgs),

    /// Follow the organisation live: one line per event of the event log
    /// (time, handler, what happened), coloured on a terminal. With
    /// `--json`, one event per line as JSON (schema: docs/events.md).
    /// Runs until Ctrl-C (exit 0); reconnects if the daemon restarts,
    /// resuming after the last event shown.
    Watch(WatchArgs),

    /// What needs you: stuck signals Agency found (a handler with work and
    /// no progress, a tool called in a loop, a retry storm, a budget at
    /// 80%, an approval left waiting, a run whose process is gone, mail
    /// refused for lack of a connection), each with what to do. Open ones
    /// by default; `--all`: the latest episodes, cleared ones too.
    Problems {
        #[arg(long)]
        all: bool,
    },
    /// Open the web dashboard: prints a one-time login URL (it works once,
    /// for two minutes) for the page the daemon serves on 127.0.0.1; with
    /// `--open`, opens it in the browser too.
    Dashboard(DashboardArgs),

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
    #[command(hide = true)]
    McpLaunch(McpLaunchArgs),

    /// Run one built-in agent (used by the daemon's `builtin` runtime): an
    /// LLM conversation whose tools are Agency's MCP tools. Exits 0 when it
    /// ended normally or at a limit, 1 on error.
    #[command(hide = true)]
    Agent(AgentArgs),

    /// Run Claude Code warm for the daemon's `claude-code` runtime: its
    /// stream-json input mode, the next message written when mail comes.
    /// Started by the daemon, not by hand.
    #[command(hide = true)]
    ClaudeWarm(ClaudeWarmArgs),

    /// Agency's main job, offline: a fresh home, the real daemon and
    /// built-in agents against the scripted model server play a
    /// three-level story, then the handler tree, the outcome DAG and your
    /// inbox are printed.
    /// Runs in a fresh temporary home unless `--home` names a new
    /// directory; it never touches your usual home. With `--org`, seed
    /// 002's WeatherAgency is stood up from its source files instead and
    /// answers "What is the weather in New York?".
    Demo(DemoArgs),

    /// Serve the scripted model server (Anthropic Messages and
    /// OpenAI-compatible chat completions) on 127.0.0.1, for offline runs
    /// and tests, until SIGINT or SIGTERM. `--help-format` explains the
    /// script.
    ModelServer(ModelServerArgs),

    /// Apply the sandbox policy FILE to this process, then run PROGRAM in
    /// it with the same environment and working directory (how the daemon
    /// starts agents). Exits 125 without running PROGRAM if the sandbox
    /// cannot be applied.
    #[command(hide = true)]
    SandboxExec(SandboxExecArgs),

    /// The forwarder of an agent in its own network namespace, started by
    /// `sandbox-exec` itself (the listeners arrive on stdin); not for use
    /// by hand.
    #[command(hide = true)]
    SandboxForward(SandboxForwardArgs),

    /// Model usage and cost, as a tree of handlers: each handler's own
    /// calls (through the model gateway) and its subtree's, in tokens
    /// (input, output, cache read, cache write) and US dollars from the
    /// price table (`[prices]` over the defaults). Calls of a model
    /// without a price are counted as unpriced (cost unknown, not $0).
    /// Default: the whole organisation.
    Cost(CostArgs),

    /// Budgets on handlers: limits on a subtree's tokens, cost, model
    /// calls, tool calls, agent spawns, live agents, handlers, delegation
    /// depth and wall-clock time, enforced by the daemon before each model
    /// call, spawn, delegation and tool call.
    #[command(subcommand)]
    Budget(BudgetCommand),

    /// Pause a handler's subtree by hand: no new model calls, agent starts
    /// or delegations (calls in flight finish) until `agency resume`.
    Pause {
        /// Handler id or unique prefix.
        #[arg(value_parser = NonEmptyStringValueParser::new())]
        handler: String,
        /// Why, for the event log and the listings (one line).
        #[arg(long)]
        note: Option<String>,
    },

    /// Continue a handler's subtree that a reached budget or `agency pause`
    /// paused, with the limits as they are (raising a limit with `agency
    /// budget set` also continues a reached budget).
    Resume {
        /// Handler id or unique prefix.
        #[arg(value_parser = NonEmptyStringValueParser::new())]
        handler: String,
    },

    /// The model upstream (a `[models.NAME]` of agency.toml) a handler's
    /// agents use; its underlings inherit it unless they have their own.
    /// Without one, the runtime's `upstream`.
    #[command(subcommand)]
    Model(ModelCommand),

    /// How long a handler's agent stays alive after its work is done,
    /// waiting for mail without a model call, so that new mail reaches it
    /// at once (a warm agent holds a slot, and gives it up when another
    /// handler waits for one). Your setting wins over the organisation's
    /// `memory.keepWarm`, which wins over `[agents] keep_warm_ms` (or
    /// `keep_warm_executive_ms` for an organisation's executive).
    KeepWarm {
        /// Handler id or unique prefix.
        #[arg(value_parser = NonEmptyStringValueParser::new())]
        handler: String,
        /// A duration (`90s`, `5m`, `1h30m`, at most `24h`), `off`, or
        /// `default` (remove yours); omitted: show the settings.
        setting: Option<String>,
    },

    /// Stand up an organisation: each agent of its Agency
    /// Model becomes a standing handler under the root handler, with its
    /// standing instructions, tools, capabilities, connections, model and
    /// budget. Applying a changed model again updates it in place: agents
    /// unchanged keep their state, removed ones retire. `--plan` shows
    /// what would change and writes nothing. Takes a compiled model
    /// (`.json`) or a folder of sources.
    Up(UpArgs),

    /// Retire an organisation (its agents' handlers and what they
    /// delegated to; state is kept). `agency up` brings it back.
    Down {
        /// The organisation's name (its top agency's).
        name: String,
    },

    /// The applied organisations and their agents' handlers.
    Orgs,

    /// Approval requests: tool calls of agents that the policy
    /// (`policy.toml` in the home, or its defaults) or an `each_use`
    /// capability says to ask you about, with who asked, the tool, the
    /// exact arguments and why. Pending ones by default, newest first.
    Approvals(ApprovalsArgs),

    /// Approve a request: the same call (same handler, tool and
    /// arguments) runs once when the agent makes it again; with
    /// `--always`, every time. Also approves a quarantined MCP tool
    /// change (its id, a UUID, from `agency mcp pins`).
    Approve(ApproveArgs),

    /// Refuse a request; the agent is told the reason when it makes the
    /// same call again. Also rejects a quarantined MCP tool change.
    Deny(DenyArgs),

    /// Extra MCP servers' pinned tool definitions: list them, and approve
    /// or reject the quarantined changes (a tool whose definition changed,
    /// or that appeared, after the server's first listing).
    #[command(subcommand)]
    Mcp(McpCommand),

    /// Hooks for agent runtimes (Claude Code's `PreToolUse`); run by the
    /// agent, not by hand.
    #[command(subcommand, hide = true)]
    Hook(HookCommand),

    /// API keys that let an outside party talk to one agency: send it
    /// messages (`POST /v1/agency/messages` on the daemon's TCP address)
    /// and read their replies, nothing else.
    #[command(subcommand)]
    Key(KeyCommand),

    /// Send a message to an agency's executive handler, as an outside
    /// party would, and print its reply if it comes within --wait (exit 1
    /// if none does).
    Ask(AskArgs),

    /// Conversations with outside callers (the agency API's messages and
    /// their replies), newest first; their replies stay out of your inbox.
    Conversations(ConversationsArgs),

    /// Where a message sent with `agency ask` stands: its reply once the
    /// agency answered.
    Answer {
        /// The message id `agency ask` printed, or a unique prefix of it.
        #[arg(value_parser = NonEmptyStringValueParser::new())]
        id: String,
    },

    /// Shell completions: `source <(agency completions bash)` (zsh: into a
    /// file named `_agency` on your fpath; fish: `agency completions fish |
    /// source`). Bash and fish also complete handler, outcome, agent and
    /// KB file ids from the running daemon. Needs no daemon.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },

    /// The manual page (roff), from the same text as `--help`: `agency man
    /// | man -l -`. Needs no daemon.
    Man,

    /// The ids of a kind (handler, outcome, agent, file) the running daemon
    /// knows, one a line, for the completion scripts; nothing (and exit 0)
    /// without a daemon.
    #[command(name = "__complete-ids", hide = true)]
    CompleteIds { kind: String },

    /// Each handler's memory (the notes its agents store with
    /// memory_store): search, show, delete, status, and condensations
    /// (list and undo).
    #[command(subcommand)]
    Memory(MemoryCommand),
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// Configure the new home for the offline quickstart: the built-in
    /// runtime, its model the scripted model server at URL (what `agency
    /// model-server --script FILE` printed), no API key.
    #[arg(long, value_name = "URL")]
    pub model_server: Option<String>,
    /// Set no budget on the root handler.
    #[arg(long, conflicts_with_all = ["tokens", "usd", "calls", "tool_calls", "spawns", "live_agents", "handlers", "depth", "wall_clock"])]
    pub no_budget: bool,
    #[command(flatten)]
    pub budget: BudgetLimitArgs,
}

/// The limits of `agency budget set` (and of `agency init`'s root budget).
/// A text that is not a duration `parse_duration_ms` reads (or one too
/// long to count in milliseconds); holds the text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a duration such as 90s, 30m, 2h, 1d or 1h30m")]
pub struct NotADuration(pub String);

/// "2h", "30m", "90s", "1d", "1h30m", "500ms" as milliseconds.
pub fn parse_duration_ms(s: &str) -> Result<i64, NotADuration> {
    let bad = || NotADuration(s.to_owned());
    let mut total: i64 = 0;
    let mut rest = s.trim();
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err(bad());
        }
        let n: i64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let ms = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        total = n
            .checked_mul(ms)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(bad)?;
    }
    Ok(total)
}

#[derive(Debug, Args)]
pub struct CostArgs {
    /// Only this handler's subtree (id or unique prefix).
    pub handler: Option<String>,
}

#[derive(Debug, Args)]
pub struct ClaudeWarmArgs {
    /// How long to wait for mail after a turn ends.
    #[arg(long)]
    pub keep_warm_ms: u64,
    /// The first user message (a private file).
    #[arg(long)]
    pub message: PathBuf,
    /// Where Claude Code's stream-json output is appended.
    #[arg(long)]
    pub transcript: PathBuf,
    /// Agency's MCP endpoint (the token is in AGENCY_TOKEN).
    #[arg(long)]
    pub mcp_url: String,
    /// Claude Code's command line, after `--`.
    #[arg(last = true, required = true)]
    pub command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// The agent's JSON configuration (see the agency-agent crate docs).
    #[arg(long)]
    pub config: PathBuf,
}

#[derive(Debug, Args)]
pub struct ModelServerArgs {
    /// The JSON script of scenarios (`--help-format` describes it).
    #[arg(long, required_unless_present = "help_format")]
    pub script: Option<PathBuf>,
    /// Print the script format with an example, and exit.
    #[arg(long)]
    pub help_format: bool,
    /// Port on 127.0.0.1; 0 picks a free one (printed on stdout).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
}

#[derive(Debug, Args)]
pub struct SendArgs {
    #[command(flatten)]
    pub body: TextArgs,
    /// A subject line (default: derived from the text).
    #[arg(long)]
    pub subject: Option<String>,
}

#[derive(Debug, Args)]
pub struct TellArgs {
    /// Handler id or unique prefix.
    #[arg(value_parser = NonEmptyStringValueParser::new())]
    pub handler: String,
    #[command(flatten)]
    pub body: TextArgs,
    /// A subject line (default: derived from the text).
    #[arg(long)]
    pub subject: Option<String>,
}

/// A message's text: an argument, standard input (`-`), or a file (the
/// OS limits one argument to 128 KiB; a file or a pipe has no such limit).
#[derive(Debug, Args)]
pub struct TextArgs {
    /// The message text; `-` reads it from standard input.
    #[arg(required_unless_present = "file", conflicts_with = "file")]
    pub text: Option<String>,
    /// Read the message text from this file instead.
    #[arg(long, value_name = "PATH")]
    pub file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct InboxArgs {
    /// Acknowledge every message shown.
    #[arg(long)]
    pub ack: bool,
    /// Every message delivered to you: acknowledged ones too, and replies
    /// to outside callers (`agency conversations`). The latest 200 unless
    /// --limit (`--json`: newest first).
    #[arg(long, conflicts_with = "ack")]
    pub all: bool,
    /// With --all: at most this many messages.
    #[arg(long, requires = "all")]
    pub limit: Option<usize>,
}

#[derive(Debug, Args)]
pub struct OutcomesArgs {
    /// Start from this outcome instead of the root handler's root.
    #[arg(long, value_name = "OUTCOME", value_parser = NonEmptyStringValueParser::new())]
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
        #[arg(value_parser = NonEmptyStringValueParser::new())]
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
pub struct RunFollowArgs {
    /// The run's agent id or unique prefix.
    pub run: String,
    /// Follow a live run as it goes, until it ends (exit 0; Ctrl-C also
    /// exits 0); a run that has ended is printed whole.
    #[arg(short, long)]
    pub follow: bool,
}

#[derive(Debug, Args)]
pub struct RunShowArgs {
    /// The run's agent id or unique prefix.
    pub run: String,
    /// Show the system prompt and the first message the agent received.
    #[arg(long)]
    pub prompt: bool,
}

#[derive(Debug, Args)]
pub struct HandlerArg {
    /// Handler id or unique prefix.
    #[arg(value_parser = NonEmptyStringValueParser::new())]
    pub handler: String,
}

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Mint a token that makes an MCP client a live agent of a handler.
    /// The token is printed once, alone on stdout.
    Mint {
        /// Handler id or unique prefix.
        #[arg(long, value_parser = NonEmptyStringValueParser::new())]
        handler: String,
        /// The client's working directory, where the `path` arguments of
        /// MCP tools resolve (made absolute; must exist).
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
    },
    /// Revoke an agent's token; the agent ends with it.
    Revoke {
        /// Agent id or unique prefix.
        #[arg(value_parser = NonEmptyStringValueParser::new())]
        agent: String,
    },
}

#[derive(Debug, Args)]
pub struct GrantArgs {
    /// The handler (id or unique prefix).
    #[arg(value_parser = NonEmptyStringValueParser::new())]
    pub handler: String,
    /// KIND:KEY, where KIND is kb, mcp_server, repo, egress or tool.
    #[arg(value_parser = NonEmptyStringValueParser::new())]
    pub resource: String,
    /// none, read or write.
    pub level: String,
    /// Whether the handler may pass it on to its underlings.
    #[arg(long)]
    pub delegatable: bool,
    /// The outcome the grant is for (id or unique prefix): the handler's
    /// root outcome by default, or one below it; the grant ends when that
    /// outcome finishes.
    #[arg(long)]
    pub outcome: Option<String>,
    /// `each_use`: every call that uses the capability (e.g. each tool
    /// call to an MCP server) waits for your approval.
    #[arg(long, value_parser = ["each_use"])]
    pub approval: Option<String>,
}

#[derive(Debug, Args)]
pub struct DashboardArgs {
    /// Open the URL in the default browser (xdg-open, or open on macOS).
    #[arg(long)]
    pub open: bool,
}

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Only events about this handler (id or unique prefix).
    #[arg(long)]
    pub handler: Option<String>,
    /// With --handler: also the handlers below it.
    #[arg(long, requires = "handler")]
    pub subtree: bool,
    /// Only these kinds (`mail.sent`) or families (`mail`, `agent`,
    /// `tool`, `model_call`, …); repeat or separate with commas.
    #[arg(long, value_delimiter = ',')]
    pub kind: Vec<String>,
    /// Start with the events of this long ago (`10m`, `2h`, `1d`);
    /// without it, only what happens from now on.
    #[arg(long, value_parser = parse_duration_ms)]
    pub since: Option<i64>,
    /// Print the events recorded so far (with --since, or the latest 100)
    /// and exit instead of following.
    #[arg(long)]
    pub no_follow: bool,
}

#[derive(Debug, Args)]
pub struct RevokeArgs {
    /// The capability's number.
    #[arg(value_parser = NonEmptyStringValueParser::new())]
    pub capability: String,
}

#[derive(Debug, Args)]
pub struct McpLaunchArgs {
    /// The server's name in `[mcp_servers]` of agency.toml.
    pub name: String,
}

#[derive(Debug, Args)]
pub struct ReopenArgs {
    /// Outcome id or unique prefix.
    pub outcome: String,
    /// Why it is not finished after all (recorded in its history).
    #[arg(long)]
    pub rationale: String,
}

#[derive(Debug, Args)]
pub struct McpStdioArgs {
    /// File holding the agent's bearer token (from `agency token mint`).
    #[arg(long, value_name = "FILE")]
    pub token_file: PathBuf,
}

/// Subcommands for which the global `--home` or `--json` mean nothing:
/// hidden from their help, and refused if given (see [`parse`]).
const NO_HOME: &[&str] = &[
    "completions",
    "man",
    "model-server",
    "agent",
    "mcp-launch",
    "tools",
    "sandbox-exec",
    "sandbox-forward",
];
const NO_JSON: &[&str] = &[
    "completions",
    "man",
    "__complete-ids",
    "model-server",
    "agent",
    "mcp-launch",
    "mcp-stdio",
    "serve",
    "demo",
    "sandbox-exec",
    "sandbox-forward",
];

/// The command line as clap builds it, its commands listed in groups
/// (see [`groups`]), with the global options hidden
/// where they mean nothing and the demo's `--home` described as what it
/// is (a new directory, not `$AGENCY_HOME`). A subcommand that already has
/// an argument with a global's id does not get the global copied in, so
/// each gets its own (hidden, or reworded) copy here, in place.
pub fn command() -> clap::Command {
    use clap::CommandFactory;
    let cmd = Cli::command();
    let global = |id: &str| {
        cmd.get_arguments()
            .find(|a| a.get_id() == id)
            .cloned()
            .map(|a| a.global(false))
    };
    let (Some(home), Some(json)) = (global("home"), global("json")) else {
        return cmd;
    };
    let cmd = cmd.mut_subcommands(|c| {
        let name = c.get_name().to_owned();
        let mut c = c;
        if NO_HOME.contains(&name.as_str()) {
            c = c.arg(home.clone().hide(true));
        } else if name == "demo" {
            c = c.arg(home.clone().help(
                "A new directory to play the demo in [default: a fresh temporary directory; never $AGENCY_HOME]",
            ));
        }
        if NO_JSON.contains(&name.as_str()) {
            c = c.arg(json.clone().hide(true));
        }
        c
    });
    let template = groups::template(&cmd);
    cmd.help_template(template)
}

/// Parse the process's arguments; a global option given to a subcommand
/// where it means nothing is a usage error (exit 2).
pub fn parse() -> Cli {
    use clap::FromArgMatches;
    let mut cmd = command();
    let matches = cmd.get_matches_mut();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    if let Some((name, _)) = matches.subcommand() {
        for (flag, set, list) in [
            ("--home", cli.home.is_some(), NO_HOME),
            ("--json", cli.json, NO_JSON),
        ] {
            if set && list.contains(&name) {
                cmd.error(
                    clap::error::ErrorKind::ArgumentConflict,
                    format!("{flag} means nothing for `agency {name}`; leave it out"),
                )
                .exit();
            }
        }
    }
    cli
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    #[test]
    fn definitions_are_consistent() {
        Cli::command().debug_assert();
        super::command().debug_assert();
    }
}

#[derive(Debug, Args)]
pub struct GcArgs {
    /// Change nothing; report what would be removed now.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Args)]
pub struct SandboxExecArgs {
    /// The sandbox policy (JSON, see the agency-sandbox crate's `Policy`).
    #[arg(long, value_name = "FILE")]
    pub policy: PathBuf,
    /// Apply the policy, then read the program to run (with its arguments,
    /// environment and working directory) from stdin: how the daemon
    /// keeps a standby sandbox ready for the next agent.
    #[arg(long, conflicts_with = "command")]
    pub await_command: bool,
    /// The program to run and its arguments, after `--`.
    #[arg(
        last = true,
        required_unless_present = "await_command",
        value_name = "PROGRAM"
    )]
    pub command: Vec<std::ffi::OsString>,
}

#[derive(Debug, Args)]
pub struct SandboxForwardArgs {
    /// The process id of the `sandbox-exec` that started this forwarder;
    /// the forwarder ends when it does.
    #[arg(long, value_name = "PID")]
    pub parent: u32,
}
