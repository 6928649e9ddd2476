//! The commands, grouped by area. Each takes the parsed arguments and the
//! context, prints to stdout (data) or stderr (notes), and returns the exit
//! code; errors bubble up to `main`, which prints them and exits 1.

mod approvals;
mod budget;
mod claude_warm;
mod completions;
mod cost;
mod daemon;
mod dashboard;
mod demo;
mod demo_org;
mod demo_pipeline;
mod follow;
mod gc;
mod hook;
mod kb;
mod keep_warm;
mod launch;
mod lessons;
mod logs;
mod mail;
mod mcp;
mod memory;
mod model;
mod org;
pub(crate) mod org_assist;
pub(crate) mod org_compile;
mod org_keys;
mod org_up;
mod pipeline;
mod problems;
mod quickstart;
mod records;
mod reopen;
mod runtime;
mod sandbox_exec;
mod store;
mod tokens;
mod tools;
mod watch;

use std::io::Write;
use std::process::ExitCode;

use agency_config::Home;
use anyhow::{Context, Result};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::cli::{
    BudgetCommand, Cli, Command, HookCommand, KbCommand, KeyCommand, MailCommand, McpCommand,
    MemoryCommand, ModelCommand, OutcomeCommand, PipelineCommand, TokenCommand,
};
use crate::client::{Client, decode};

/// What every command gets: the home and the output mode.
#[derive(Debug)]
pub struct Ctx {
    pub home: Home,
    pub json: bool,
}

impl Ctx {
    /// The REST client for the home's daemon (errors if none is running).
    pub fn client(&self) -> Result<Client> {
        Client::new(&self.home)
    }
}

pub fn run(cli: Cli) -> Result<ExitCode> {
    // `AGENCY_WIDE` is read here, not by clap, so that it never shows in
    // usage messages as if `--wide` had been typed.
    let wide_env = std::env::var("AGENCY_WIDE")
        .is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false" | "no" | "off"));
    crate::output::layout::set(cli.wide || wide_env);
    // The demo must never use the usual home: only an explicit --home.
    if let Command::Demo(a) = &cli.command {
        return demo::demo(cli.home.clone(), a.org, a.pipeline);
    }
    // The launcher needs no home: everything comes from its environment.
    if let Command::McpLaunch(a) = &cli.command {
        return launch::mcp_launch(&a.name);
    }
    // Nor does the organisation compiler (`--assist` reads the home's
    // model upstream, if asked for).
    match &cli.command {
        Command::Compile(a) => return org_compile::compile(a, cli.home.clone()),
        Command::Schema(a) => return org_compile::schema(a),
        Command::Explain(a) => return org_compile::explain(a, cli.home.clone(), cli.json),
        Command::Pipeline(PipelineCommand::Compile(a)) => return pipeline::compile(a, cli.json),
        Command::Pipeline(PipelineCommand::Init(a)) => return pipeline::init(a),
        _ => {}
    }
    // Nor completions and the manual page.
    match &cli.command {
        Command::Completions { shell } => return completions::completions(*shell),
        Command::Man => return completions::man(),
        _ => {}
    }
    // Neither does the tool list, nor the model server.
    if let Command::Tools = &cli.command {
        return tools::tools(cli.json);
    }
    if let Command::ModelServer(a) = &cli.command {
        return runtime::model_server(a);
    }
    // Claude Code's hook: everything comes from the agent's environment.
    if let Command::Hook(HookCommand::PreToolUse { config }) = &cli.command {
        return hook::pre_tool_use(config.as_deref());
    }
    if let Command::Hook(HookCommand::PostToolUse { config }) = &cli.command {
        return Ok(hook::post_tool_use(config.as_deref()));
    }
    // Nor the sandbox, which must run before anything starts a thread.
    if let Command::SandboxExec(a) = &cli.command {
        return sandbox_exec::sandbox_exec(&a.policy, &a.command, a.await_command);
    }
    if let Command::SandboxForward(a) = &cli.command {
        return sandbox_exec::sandbox_forward(a.parent);
    }
    let home = Home::resolve(cli.home)?;
    let ctx = Ctx {
        home,
        json: cli.json,
    };
    match cli.command {
        Command::Init(a) => daemon::init(&ctx, &a),
        Command::CompleteIds { kind } => completions::complete_ids(&ctx, &kind),
        Command::Completions { .. } | Command::Man => {
            unreachable!("handled before the home is resolved")
        }
        Command::Serve => daemon::serve(&ctx),
        Command::Status => daemon::status(&ctx),
        Command::Shutdown => daemon::shutdown(&ctx),
        Command::Reload => daemon::reload(&ctx),
        Command::Send(a) => mail::send(&ctx, None, &a.body, a.subject),
        Command::Tell(a) => mail::send(&ctx, Some(&a.handler), &a.body, a.subject),
        Command::Inbox(a) if a.all => mail::inbox_all(&ctx, a.limit),
        Command::Inbox(a) => mail::inbox(&ctx, a.ack),
        Command::Handlers => org::handlers(&ctx),
        Command::Outcomes(a) => match &a.of {
            Some(h) => records::handler_outcomes(&ctx, h),
            None => org::outcomes(&ctx, a.root.as_deref(), a.limit),
        },
        Command::Outcome(OutcomeCommand::Show { id }) => org::outcome_show(&ctx, &id),
        Command::Reopen(a) => reopen::reopen(&ctx, &a.outcome, &a.rationale),
        Command::Agents(a) => org::agents(&ctx, a.limit),
        Command::Audit(a) => org::audit(&ctx, &a.handler),
        Command::Stop(a) => org::stop(&ctx, &a.handler),
        Command::Grant(a) => org::grant(&ctx, &a),
        Command::Caps(a) => org::caps(&ctx, &a.handler),
        Command::Revoke(a) => org::revoke(&ctx, &a.capability),
        Command::Kb(KbCommand::Ls) => kb::ls(&ctx),
        Command::Kb(KbCommand::Cat { id, version }) => kb::cat(&ctx, &id, version),
        Command::Kb(KbCommand::Log { id }) => kb::log(&ctx, &id),
        Command::Kb(KbCommand::Put {
            source,
            description,
            to,
        }) => kb::put(&ctx, &source, description.as_deref(), to.as_deref()),
        Command::Kb(KbCommand::Audit { id, limit }) => records::kb_audit(&ctx, &id, limit),
        Command::Mail(MailCommand::Status { id }) => records::mail_status(&ctx, &id),
        Command::Runs(a) => records::runs(&ctx, a.handler.as_deref(), a.limit),
        Command::Run(a) if a.prompt => records::run_prompt(&ctx, &a.run),
        Command::Run(a) => records::run(&ctx, &a.run),
        Command::Transcript(a) if a.follow => follow::transcript(&ctx, &a.run),
        Command::Transcript(a) => records::transcript(&ctx, &a.run),
        Command::Fsck => kb::fsck(&ctx),
        Command::Gc(a) => gc::run(&ctx, a.dry_run),
        Command::Token(TokenCommand::Mint { handler, workspace }) => {
            tokens::mint(&ctx, &handler, workspace.as_deref())
        }
        Command::Token(TokenCommand::Revoke { agent }) => tokens::revoke(&ctx, &agent),
        Command::Logs(a) if a.follow => follow::logs(&ctx, &a.run),
        Command::Logs(a) => logs::logs(&ctx, &a.run),
        Command::Watch(a) => watch::watch(&ctx, &a),
        Command::Problems { all } => problems::problems(&ctx, all),
        Command::Dashboard(a) => dashboard::run(&ctx, a.open),
        Command::McpStdio(a) => crate::bridge::run(&ctx.home, &a.token_file),
        Command::Agent(a) => runtime::agent(&a.config),
        Command::ClaudeWarm(a) => claude_warm::run(&a),
        Command::McpLaunch(_) => unreachable!("handled before the home is resolved"),
        Command::ModelServer(_) | Command::Tools => {
            unreachable!("handled before the home is resolved")
        }
        Command::Demo(_) => unreachable!("handled before the home is resolved"),
        Command::Compile(_)
        | Command::Schema(_)
        | Command::Explain(_)
        | Command::Pipeline(PipelineCommand::Compile(_) | PipelineCommand::Init(_)) => {
            unreachable!("handled before the home is resolved")
        }
        Command::SandboxExec(_) => unreachable!("handled before the home is resolved"),
        Command::SandboxForward(_) => unreachable!("handled before the home is resolved"),
        Command::Pipeline(PipelineCommand::Run(a)) => pipeline::run(&ctx, &a),
        Command::Pipeline(PipelineCommand::Runs(a)) => pipeline::runs(&ctx, &a),
        Command::Pipeline(PipelineCommand::Show(a)) => pipeline::show_run(&ctx, &a.run),
        Command::Pipeline(PipelineCommand::Stop(a)) => pipeline::stop_run(&ctx, &a.run),
        Command::Lessons(c) => lessons::run(&ctx, c),
        Command::Store(c) => store::run(&ctx, c),
        Command::Cost(a) => cost::cost(&ctx, a.handler.as_deref()),
        Command::Budget(BudgetCommand::Set { handler, limits }) => {
            budget::set(&ctx, &handler, &limits)
        }
        Command::Pause { handler, note } => budget::pause(&ctx, &handler, note.as_deref()),
        Command::Resume { handler } => budget::resume(&ctx, &handler),
        Command::Budget(BudgetCommand::Show { handler }) => budget::show(&ctx, handler.as_deref()),
        Command::Model(ModelCommand::Set { handler, upstream }) => {
            model::set(&ctx, &handler, Some(&upstream))
        }
        Command::Model(ModelCommand::Clear { handler }) => model::set(&ctx, &handler, None),
        Command::Model(ModelCommand::Show { handler }) => model::show(&ctx, &handler),
        Command::KeepWarm { handler, setting } => {
            keep_warm::run(&ctx, &handler, setting.as_deref())
        }
        Command::Up(a) => org_up::up(&ctx, &a.path, a.plan, &a.assist),
        Command::Down { name } => org_up::down(&ctx, &name),
        Command::Orgs => org_up::orgs(&ctx),
        Command::Approvals(a) => approvals::list(&ctx, a.all),
        // A quarantined MCP tool change has a UUID where an approval
        // request has a number: one `agency approve` decides both.
        Command::Approve(a) if is_pin_change(&a.id) => {
            if a.always {
                anyhow::bail!(
                    "failed to approve MCP tool change {}: --always applies to tool-call requests; a tool change is approved once, for its new definition",
                    a.id
                );
            }
            mcp::decide_id(&ctx, &a.id, false)
        }
        Command::Deny(a) if is_pin_change(&a.id) => mcp::decide_id(&ctx, &a.id, true),
        Command::Approve(a) => approvals::approve(&ctx, &a.id, a.always),
        Command::Deny(a) => approvals::deny(&ctx, &a.id, &a.reason),
        Command::Hook(_) => unreachable!("handled before the home is resolved"),
        Command::Mcp(McpCommand::Pins) => mcp::pins(&ctx),
        Command::Mcp(McpCommand::ApproveTool {
            server,
            tool,
            reject,
        }) => mcp::approve_tool(&ctx, &server, &tool, reject),
        Command::Mcp(McpCommand::Approve { id }) => mcp::decide_id(&ctx, &id, false),
        Command::Mcp(McpCommand::Reject { id }) => mcp::decide_id(&ctx, &id, true),
        Command::Key(KeyCommand::Mint { agency }) => org_keys::mint(&ctx, &agency),
        Command::Key(KeyCommand::List { agency }) => org_keys::list(&ctx, agency.as_deref()),
        Command::Key(KeyCommand::Revoke { id }) => org_keys::revoke(&ctx, &id),
        Command::Ask(a) => org_keys::ask(
            &ctx,
            &a.agency,
            &a.message,
            a.conversation.as_deref(),
            a.wait,
        ),
        Command::Answer { id } => org_keys::answer(&ctx, &id),
        Command::Conversations(a) => org_keys::conversations(&ctx, a.agency.as_deref(), a.limit),
        Command::Memory(MemoryCommand::Search {
            handler,
            words,
            limit,
            kind,
            tag,
            all,
        }) => memory::search(
            &ctx,
            &handler,
            &words.join(" "),
            limit,
            kind.as_deref(),
            tag.as_deref(),
            all,
        ),
        Command::Memory(MemoryCommand::Show { handler, id }) => memory::show(&ctx, &handler, &id),
        Command::Memory(MemoryCommand::Delete { handler, id }) => {
            memory::delete(&ctx, &handler, &id)
        }
        Command::Memory(MemoryCommand::Status { handler }) => memory::status(&ctx, &handler),
        Command::Memory(MemoryCommand::Compactions { handler }) => {
            memory::compactions(&ctx, &handler)
        }
        Command::Memory(MemoryCommand::Undo {
            handler,
            compaction,
        }) => memory::undo(&ctx, &handler, &compaction),
    }
}

/// Write to stdout. Errors (a closed pipe) are returned, not panicked on
/// as `println!` would.
pub fn emit(text: &str) -> Result<()> {
    write_stdout(text.as_bytes())
}

/// Our stdout was closed by its reader (`agency kb ls | head`): the one
/// broken pipe that is not a failure. Only writes to stdout produce it, so
/// a broken pipe anywhere else (the daemon's socket closing in the middle
/// of a request) is still reported as the failure it is (a
/// refused 20 MiB `send` once exited 0 in silence).
#[derive(Debug)]
pub struct StdoutClosed;

impl std::fmt::Display for StdoutClosed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("stdout was closed by its reader")
    }
}

impl std::error::Error for StdoutClosed {}

/// Write all of `bytes` to stdout and flush.
pub fn write_stdout(bytes: &[u8]) -> Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(StdoutClosed.into()),
        Err(e) => Err(e).context("failed to write to stdout"),
    }
}

/// `--json` output: pretty-printed, one document.
pub fn emit_json(v: &impl Serialize) -> Result<()> {
    let text = serde_json::to_string_pretty(v).context("failed to format JSON")?;
    emit(&format!("{}\n", crate::safe_text::json(&text)))
}

/// Print the API's JSON under `--json`, else decode it and render it.
pub fn show<T: DeserializeOwned>(
    ctx: &Ctx,
    v: Value,
    what: &str,
    render: impl Fn(&T) -> String,
) -> Result<()> {
    if ctx.json {
        emit_json(&v)
    } else {
        emit(&render(&decode::<T>(v, what)?))
    }
}

/// Whether `id` names a quarantined MCP tool change (a UUID) rather than
/// an approval request (a number, optionally written `#N`).
fn is_pin_change(id: &str) -> bool {
    uuid::Uuid::parse_str(id).is_ok()
}
