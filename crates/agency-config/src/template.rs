//! The commented `agency.toml` that `agency init` writes: every key with
//! its default and what it is for (a test checks that it parses to the
//! defaults).

/// The commented configuration `agency init` writes.
pub const TEMPLATE: &str = r#"# Agency configuration. Every key is optional; the values shown are the
# defaults. Unknown keys are refused.

[server]
# TCP port on 127.0.0.1 (Agency never listens on other interfaces): agents
# and outside callers of the agency API reach the daemon there. `agency
# init` pins a port that was free, so that restarts keep it; 0 picks a free
# one at each start. The address is written to daemon.json in this
# directory for the CLI to find.
port = 0

[limits]
# Largest Knowledge Base file or message body accepted, in bytes.
max_file_bytes = 8388608
# Quotas per handler, so that a runaway agent cannot fill the store or grow
# the organisation without bound (the user is not bound by them). A refused
# call fails with kind "quota" and names the key to raise here.
# Deferred messages a handler has scheduled that are not yet delivered.
max_pending_deferred_per_handler = 1000
# Outcomes and KB documents a handler may create (ever).
max_outcomes_per_handler = 10000
max_kb_files_per_handler = 10000
# Active handlers in any subtree (the root handler's subtree is the whole
# organisation), and how many levels below the root a handler may be.
max_handlers_per_subtree = 1000
max_delegation_depth = 32
# Bounded loops: hand-offs (a message from one handler to another, or a
# delegation) in one chain of work. The user's message starts a chain at 0;
# each hand-off is one hop more than the hop count of the handler making it
# (the hop count of the last message or delegation it received).
max_handoffs = 500

[retention]
# `agency gc` and the daemon's automatic collection remove acknowledged mail
# this many days after acknowledgement (0: keep it forever), with its body
# unless something else still needs it, and blobs no version points at.
acked_mail_days = 30
# An unreferenced blob is removed only this long after it was written.
blob_grace_minutes = 60
# Events of the event log (`agency watch`, the dashboard) are removed this
# many days after they happened (0: keep them forever).
event_days = 30
# Collect after the daemon starts and then every this many hours (0: only
# when `agency gc` is run).
gc_interval_hours = 24

[agents]
# "none": agents are not started (attach MCP clients with `agency token
# mint`); "command": run [agents.command] for each agent, with its token,
# MCP URL, prompt and first message in AGENCY_TOKEN, AGENCY_MCP_URL,
# AGENCY_PROMPT_FILE, AGENCY_MESSAGE_FILE (MCP configuration: AGENCY_MCP_CONFIG);
# "builtin": [agents.builtin]; "claude-code": [agents.claude_code].
# Every agent starts from an empty environment: PATH, LANG, LC_*, TZ, a
# HOME and TMPDIR of its own, and what its runtime needs (below); nothing
# else of the daemon's environment reaches it.
runtime = "none"
# Most agents alive at once; waiting handlers are served first come, first served.
max_concurrent = 4
# Exits in a row without progress before a handler is marked stalled.
stall_after_exits = 3
# Respawn delay after an exit without progress (doubles, up to the maximum).
respawn_backoff_ms = 500
max_backoff_ms = 60000
# Between SIGTERM and SIGKILL when an agent's process group is stopped.
kill_grace_ms = 3000
# An agent that makes no MCP call for this long is stopped as stalled (0: never).
idle_timeout_ms = 900000
# An agent told that its MCP servers changed has this long to save its
# state and exit before it is stopped (the next agent gets the new servers).
config_restart_grace_ms = 120000
# The agency binary for agents' helper processes (the builtin loop, the
# launcher of extra MCP servers); empty = this executable.
agency_program = ""
# "on": every agent process (and extra MCP server) runs confined, see
# [sandbox]; if the sandbox cannot be applied the agent does not start.
# "off" runs agents UNCONFINED, as the daemon's user: they can then read
# this home (admin.token, agency.db, other agents' tokens), and
# `agency status` warns on every call. Only for a machine that cannot
# confine, and agents you would trust with your account.
sandbox = "on"
# How long an agent stays alive after its work is done, waiting for mail
# without a model call, so that new mail reaches it at once (0: it exits).
# A warm agent holds one of max_concurrent's slots and gives it up when
# another handler waits for one. `agency keep-warm HANDLER` and an
# organisation's memory.keepWarm set it per handler.
keep_warm_ms = 0
# The same for an organisation's executive handler (5 minutes).
keep_warm_executive_ms = 300000

[agents.command]
program = ""
args = []
# A [models.NAME] its agents reach through the daemon's model gateway: they
# get ANTHROPIC_BASE_URL + ANTHROPIC_API_KEY (or OPENAI_BASE_URL +
# OPENAI_API_KEY) naming the gateway and their own token, and
# AGENCY_MODEL_URL; "" = no model.
upstream = ""

# runtime = "builtin": our own agent loop (`agency agent`). Every agent of
# every runtime reaches its model only through the daemon's model gateway
# ([models.NAME] below), with its own token: no provider key reaches it.
[agents.builtin]
upstream = ""              # a [models.NAME] (a handler's own, `agency model set`, wins)
model = ""
# Deprecated: base_url (+ api, api_key_env, the daemon's variable holding
# the key) become the implicit upstream [models.default], with a warning.
api = "anthropic"
base_url = ""
api_key_env = ""
max_turns = 50
max_total_tokens = 1000000
max_output_tokens = 8192
# The workspace tools it runs itself (in the agent's workspace); [] = none.
tools = ["bash", "read_file", "write_file", "edit_file", "glob", "grep"]

# runtime = "claude-code": the Claude Code CLI, headless (`claude -p`), with
# Agency's MCP server as its only MCP server. It runs with HOME set to a
# private directory and reaches its model only through the daemon's model
# gateway (ANTHROPIC_BASE_URL, its own token as ANTHROPIC_AUTH_TOKEN).
[agents.claude_code]
program = "claude"
model = ""                 # passed as --model when set
max_turns = 50             # passed as --max-turns when above 0
upstream = ""              # an "anthropic" [models.NAME]
# Deprecated: without upstream, api_key_env (the daemon's variable holding
# the key) and env.ANTHROPIC_BASE_URL / env.ANTHROPIC_API_KEY become the
# implicit upstream [models.default] (default https://api.anthropic.com).
api_key_env = ""
# Claude Code's own tools the agent gets besides Agency's (exact names, as
# Claude Code spells them); every other built-in tool is unavailable. Not
# in the default: WebFetch and WebSearch (WebSearch runs at the model
# provider, past Agency's egress rules), Task/Agent (sub-agents Agency does
# not schedule or count). The tools are confined by the agent's sandbox.
tools = ["Bash", "Read", "Edit", "Write", "Glob", "Grep", "NotebookEdit", "TaskOutput", "TaskStop"]
[agents.claude_code.env]   # extra environment, e.g.
# CLAUDE_CODE_MAX_RETRIES = "1"

[log]
# The daemon's log, logs/daemon.log in this home: a tracing filter such as
# "info", "debug" or "info,agency_supervisor=debug" (RUST_LOG overrides it).
level = "info"
# daemon.log is rotated to daemon.log.1, .2, … past this size; files kept:
file_max_bytes = 10485760
files_kept = 3
# Each agent run's stdout/stderr is kept with its run (`agency logs RUN`):
# the first and the last bytes, the middle cut and marked.
agent_log_head_bytes = 65536
agent_log_tail_bytes = 1048576

[repos_cache]
# A git fetch of a mirror (repo_clone) still running after this long is
# killed and the clone fails.
fetch_timeout_secs = 300
# A mirror fetched less than this long ago is used as it is (0: always fetch).
refresh_interval_secs = 60

[sandbox]
# With agents.sandbox = "on", an agent (and every process it starts, extra
# MCP servers included) may write only its own directory (workspace, HOME,
# TMPDIR), read the system directories (/usr, /bin, /lib, /etc but its
# secrets), its runtime's program and these toolchains, and open TCP
# connections only to the daemon's ports. Nothing of this home is readable.
# Extra directories to read and execute (absolute; not this home nor a
# directory holding it), e.g. ["/root/.cargo", "/root/.pyenv"]:
toolchains = []
# Extra directories every agent may write (shared by all agents):
read_write = []
# Limits per agent; 0 = none. Processes and memory count the agent and all
# its descendants together; CPU time, file size and open files are per
# process. `agency status` lists the limits in force and what keeps each.
max_processes = 512
# memory_mb, in MiB: unset, 8192 per agent tree where the machine has a
# cgroup memory controller (v2, or v1's memory hierarchy), and per process
# (RLIMIT_DATA) everywhere. Set, it must be kept per tree: without a memory
# controller the daemon refuses to start.
# memory_mb = 8192
cpu_seconds = 3600
file_size_mb = 4096
open_files = 4096

[agency_api]
# Outside callers of POST /v1/agency/messages, per agency API key (the
# user's admin token is not bound): messages per minute on average, and at
# once after a quiet spell; messages not yet answered, at most. Past each,
# 429 with Retry-After. 0 is refused: revoke a key to stop its caller.
messages_per_minute = 30
burst = 10
max_pending_per_key = 20

# Secrets, read once when the daemon starts and kept in memory only (never
# written to the store, logs or agents' files). Exactly one source each:
# [secrets]
# github = { env = "GITHUB_TOKEN" }                  # the daemon's environment
# gmail = { file = "secrets/gmail" }                 # relative to this home
# slack = { command = ["op", "read", "op://vault/slack/token"] }

# Extra MCP servers. An agent gets one only if its handler holds a
# capability on mcp_server:NAME (granted by the user or a boss). Secrets are
# referenced as ${secret:NAME} in env and headers, and reach only the
# server's process, through `agency mcp-launch`:
# [mcp_servers.files]
# command = "mcp-server-filesystem"
# args = ["/srv/shared"]
# env = { API_TOKEN = "${secret:github}" }
# [mcp_servers.github]
# url = "https://api.githubcopilot.com/mcp/"
# headers = { Authorization = "Bearer ${secret:github}" }

# Model upstreams of the daemon's model gateway (/model/NAME on the agents'
# listener), the only way agents reach a model: the runtime's upstream =
# "NAME" (or a handler's own, `agency model set HANDLER NAME`, inherited by
# its underlings) names one; agents use their own token, the key stays in
# the daemon. Every call is metered (`agency cost`) and budgeted. No model
# host is reachable through the egress proxy without a capability.
# [models.main]
# api = "anthropic"                                  # or "openai"
# base_url = "https://api.anthropic.com"
# api_key = "${secret:anthropic}"
# [models.cheap]
# api = "anthropic"
# base_url = "https://api.anthropic.com"
# api_key = "${secret:anthropic}"
# model = "claude-haiku-4-5"   # every call through it uses this model
# reserve_output_tokens = 8192  # reserved for a call without max_tokens (x n)
# request_timeout_secs = 60     # a request body must arrive within it (408)
# agent_request_bytes = 67108864  # request bytes one agent may have in flight (413)
# default_price = { input = 0.0, output = 0.0 }  # for models [prices] lacks;
#                               # without it they are unpriced (refused under --usd)
# Prices in USD per million tokens, over the built-in defaults (matched by
# the longest model-name prefix):
# [prices."claude-sonnet-4-5"]
# input = 3.0
# output = 15.0
# cache_read = 0.3
# cache_write = 3.75

# Each handler's memory (agents' memory_store / memory_search tools).
# [memory]
# recall_tokens = 1000       # memories recalled into an agent's first message (0: none)
# condense_after = 200       # live memories past which the next agent is asked to condense
# max_per_handler = 10000    # live memories one handler may hold
# Semantic search: an OpenAI-compatible embeddings endpoint (without one,
# full-text search alone). The key, if any, is sent only there.
# [memory.embeddings]
# base_url = "http://127.0.0.1:11434/v1"             # e.g. a local Ollama
# model = "nomic-embed-text"
# api_key = ""                                       # or "${secret:NAME}"
# dims = 768                                         # optional check

# Problems (`agency problems`, the dashboard's "needs you"): when a signal
# counts, and how often the daemon looks.
# [watch]
# stuck_after_minutes = 15            # a handler with work and no progress
# approval_stale_after_minutes = 30   # an approval left waiting
# tick_seconds = 30

# OpenTelemetry: traces and metrics of the event log over OTLP/HTTP
# (docs/telemetry.md). Off unless enabled; the OTEL_EXPORTER_OTLP_* and
# OTEL_SERVICE_NAME variables win over these keys, OTEL_SDK_DISABLED=true
# switches export off.
# [telemetry]
# enabled = true
# endpoint = "http://localhost:4318"   # the collector's OTLP/HTTP base URL
# headers = { "x-team" = "garden" }     # keys are better in OTEL_EXPORTER_OTLP_HEADERS
# service_name = "agency"
# capture_content = false               # the event log holds no prompt or answer text
# metrics_interval_secs = 60
"#;
