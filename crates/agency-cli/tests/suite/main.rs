//! Every integration test of the `agency` command, gathered into one test
//! binary: one link of the daemon and its dependencies instead of one per
//! file, which is most of the suite's build time. Each file is a module and
//! keeps its own fixtures; the shared ones live in `common/` and are
//! declared here once.

// Test code panics on what it did not expect; every fixture module shares
// the allowance the test files give themselves.
#![allow(clippy::unwrap_used)]

#[path = "common/agent_story.rs"]
mod agent_story;
#[path = "common/git_repo.rs"]
mod git_repo;
#[path = "common/home.rs"]
mod home;
#[path = "common/home_cli.rs"]
mod home_cli;
#[path = "common/mcp_stdio.rs"]
mod mcp_stdio;
#[path = "common/probe.rs"]
mod probe;
#[path = "common/sandbox_run.rs"]
mod sandbox_run;

mod agency_ask;
mod agent_env;
mod approvals;
mod approvals_runtimes;
mod approvals_wake;
mod bounded_inbox;
mod budget;
mod budget_agents;
mod budget_pause;
mod budget_refusal;
mod builtin;
mod claude_code;
mod cli;
mod cli_extras;
mod cli_layout;
mod daemon_walls;
mod daemons_three;
mod demo;
mod dev_story_builtin;
mod dev_story_claude;
mod first_hour;
mod follow;
mod gateway_runtimes;
mod gc;
mod issue28_daemon;
mod issue28_keep_warm;
mod kill9;
mod logging;
mod mcp_egress;
mod mcp_guard;
mod mcp_http_proxy;
mod mcp_servers;
mod memory;
mod memory_recall;
mod model_per_handler;
mod notices_conversations;
mod org_assist;
mod org_compile;
mod org_tool_sandbox;
mod org_tool_secrets;
mod org_toolchain;
mod org_up;
mod org_weather;
mod org_wiring;
mod pipeline_compile;
mod pipeline_judge;
mod pipeline_lessons;
mod pipeline_live;
mod pipeline_run;
mod policy_names;
mod provider_key;
mod quickstart;
mod records;
mod repo_push;
mod sandbox_agents;
mod sandbox_exec;
mod sandbox_memory;
mod sandbox_netns;
mod sandbox_standby;
mod store_postgres;
mod warm;
mod watch;
