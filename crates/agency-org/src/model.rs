//! The Agency Model: the compiled, checked form of an organisation's
//! sources (seed 002 §6.2's shape, extended with what Agency needs to stand
//! it up: per-agent model and runtime, capabilities, budgets, connections
//! and memory settings).
//!
//! Field names are camelCase as in the seed's example. The model is
//! deterministic: the same sources give the same bytes (no compile time is
//! recorded; `metadata.sourceHash` identifies the sources instead). Every
//! list is in source order except where a comment says it is sorted.
//!
//! Names: agent names are unique in the whole organisation tree (an agency
//! and its sub-agencies), and so are tool names, so that a name is enough
//! to address an agent in a prompt or a tool in a `tool:NAME` capability.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The format version written in `metadata.version`.
pub const MODEL_VERSION: &str = "agency-model/1";

/// An agency: externally an agent (it receives a message and answers),
/// internally agents, tools and sub-agencies under an executive agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgencyModel {
    pub name: String,
    /// Always `"Agency"` (seed 002 §6.2).
    #[serde(rename = "type")]
    pub kind: AgencyKind,
    /// The agency's purpose: the free text under its title.
    #[serde(default)]
    pub description: String,
    /// Imprinted on every message the agency receives (seed 002 §2.1.3):
    /// part of the standing instructions of every agent of the agency.
    #[serde(default)]
    pub static_memory: Vec<String>,
    /// The agent that receives the agency's messages; one of `agents`.
    pub executive_agent: String,
    #[serde(default)]
    pub agents: Vec<Agent>,
    /// Tools defined in this agency's folder.
    #[serde(default)]
    pub tools: Vec<Tool>,
    #[serde(default)]
    pub sub_agencies: Vec<AgencyModel>,
    /// A budget for the agency's whole subtree (set on the executive
    /// agent's handler, which is the top of the subtree).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
    /// Where the agency was defined.
    pub source: SourceRef,
    /// Present on the top-level agency only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum AgencyKind {
    Agency,
}

/// Compilation facts, on the top-level agency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Metadata {
    /// [`MODEL_VERSION`].
    pub version: String,
    /// BLAKE3 (hex) of every source file's relative path and bytes, in
    /// path order: two compiles of the same folder agree on it.
    pub source_hash: String,
    /// Every warning of the compile, as `file:line:col: warning: message`.
    #[serde(default)]
    pub compiler_warnings: Vec<String>,
}

/// An agent: one standing handler once the model is stood up.
/// Inheritance is already applied: every field is the effective one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Agent {
    /// Unique in the organisation; also what other agents call it.
    pub name: String,
    /// A human title ("Front Desk"); the name when the source gives none.
    pub title: String,
    /// One line on what the agent is for (Claude Code's `description`).
    #[serde(default)]
    pub description: String,
    /// The parents as written, in the order they are applied (the first
    /// parent first, this agent's own fields last). Empty for none.
    #[serde(default)]
    pub inherits: Vec<String>,
    /// Imprinted on every prompt of the agent; the agent cannot change it.
    #[serde(default)]
    pub static_memory: Vec<String>,
    /// Always empty in a compiled model: volatile memory is runtime data
    /// (seed 002 §6.2 shows the empty list); kept for the seed's shape.
    #[serde(default)]
    pub volatile_memory: Vec<String>,
    /// Names of tools (of this organisation) the agent may call; each
    /// becomes a `tool:NAME` capability of its handler.
    #[serde(default)]
    pub tools: Vec<String>,
    #[serde(default)]
    pub behavior: Behavior,
    /// A `[models.NAME]` upstream of `agency.toml`; `None`: inherited from
    /// the boss handler as usual.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `"builtin"`, `"claude-code"` or `"command"`; `None`: the daemon's
    /// configured runtime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<String>,
    /// Capabilities granted to the agent's handler when it is stood up, in
    /// `agency grant`'s resource syntax: `egress:HOST[:PORT]`,
    /// `mcp_server:NAME`, `repo:NAME`, each optionally followed by `=read`
    /// or `=write` (read when omitted). Sorted, without duplicates.
    #[serde(default)]
    pub capabilities: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
    /// Agents this agent may message laterally (seed 004 connections).
    /// The target may answer back; nothing else is implied (default deny).
    /// Sorted, without duplicates.
    #[serde(default)]
    pub connections: Vec<String>,
    #[serde(default)]
    pub memory: MemorySettings,
    /// What other agents may call this agent for with `agent_call`: typed
    /// contracts. The agent's own, not inherited; in source
    /// order. Omitted from the JSON when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verbs: Vec<Verb>,
    /// The Claude Code subagent frontmatter this agent was read from, kept
    /// for a lossless export back to `.claude/agents/*.md`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claude: Option<ClaudeSubagent>,
    pub source: SourceRef,
}

/// One typed contract of an agent: `agent_call {target, verb, input}` is
/// checked against `input` before it is sent, and the callee's
/// `agent_reply` against `output` before it is delivered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Verb {
    /// `[a-z][a-z0-9_]*`, unique among the agent's verbs.
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// JSON Schema (draft 2020-12) of the call's input; it compiles.
    pub input: serde_json::Value,
    /// JSON Schema (draft 2020-12) of the answer; it compiles.
    pub output: serde_json::Value,
}

/// What the agent does with a message (seed 002: `behavior.onMessage`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Behavior {
    #[serde(default)]
    pub on_message: Vec<String>,
}

/// Memory settings of an agent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MemorySettings {
    /// What the agent is told to keep in its volatile memory (the
    /// source's "## Volatile Memory" section).
    #[serde(default)]
    pub guidance: Vec<String>,
    /// How long an agent of this handler stays alive waiting for mail
    /// after its work is done, e.g. `"5m"`; `None`: the global default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_warm: Option<String>,
}

/// A Claude Code subagent file's frontmatter and body, verbatim.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClaudeSubagent {
    /// Every frontmatter field except `agency`, as JSON values (sorted by key).
    pub frontmatter: BTreeMap<String, serde_json::Value>,
    /// The Markdown after the frontmatter.
    pub body: String,
}

/// Limits of a budget (`agency budget set`'s, in source units).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Budget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live_agents: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handlers: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<u64>,
    /// A duration such as `"1h30m"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_clock: Option<String>,
}

/// A tool: a strict JSON request/response interface over one
/// implementation. Agents see it as an MCP tool named `name`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Tool {
    /// Unique in the organisation; the MCP tool name and `tool:NAME`.
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub implementation: ToolImplementation,
    pub interface: ToolInterface,
    /// Egress the tool needs, in `egress:` capability syntax without the
    /// prefix (`api.example.com`, `127.0.0.1:8080`): `agency up` grants
    /// it to every agent holding the tool (an HTTP tool's call and a
    /// command tool's network go through the calling agent's egress).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub egress: Vec<String>,
    pub source: SourceRef,
}

/// How a tool runs. No code is generated from prose.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ToolImplementation {
    /// An HTTP call described declaratively; made by the daemon through
    /// the egress allowlist of the calling agent's handler.
    Http(HttpTool),
    /// A program that reads the input JSON on stdin and writes the output
    /// JSON on stdout, run inside the sandbox.
    Command(CommandTool),
    /// One tool of an MCP server (a stdio command or a streamable-HTTP
    /// URL), called by the daemon as an MCP client at each call.
    Mcp(McpTool),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HttpTool {
    /// `https://api.example-weather.com` (scheme, host, optional port).
    pub base_url: String,
    /// `/current`; `{param}` segments are filled from the input.
    pub endpoint: String,
    /// `GET` or `POST`.
    pub method: String,
    /// Input fields sent as query parameters (in this order).
    #[serde(default)]
    pub query: Vec<String>,
    /// Input fields sent as a JSON object body (POST only).
    #[serde(default)]
    pub body: Vec<String>,
    /// Output field → JSON pointer into the response (`/main/temp`). Empty:
    /// the response's top-level fields named in the output format.
    #[serde(default)]
    pub output: BTreeMap<String, String>,
    /// Request headers; a value may reference a secret of the home as
    /// `${secret:NAME}` (`[secrets]` in agency.toml), filled in by the
    /// daemon for the request only: the agent never sees it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    #[serde(default = "default_tool_timeout_ms")]
    pub timeout_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CommandTool {
    /// Program and arguments; the program is resolved relative to the
    /// source folder when it contains a `/`, else on `PATH`.
    pub command: Vec<String>,
    #[serde(default = "default_tool_timeout_ms")]
    pub timeout_ms: u64,
    /// Environment variables of the tool's process; a value may reference
    /// a secret of the home as `${secret:NAME}`, filled in by the daemon
    /// for that process only: the agent never sees it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The absolute folder the tool was defined in: the command runs
    /// there, with it readable (not writable) in the sandbox. Set by
    /// `agency up` from the source folder, never by `agency compile`, so
    /// that a compiled model does not depend on where its sources were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpTool {
    /// A stdio server's program and arguments…
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// …or a streamable-HTTP server's URL (exactly one of the two).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The server's tool this `.tool` calls (one `.tool` is one tool of
    /// one server); absent: the `.tool`'s own name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The whole call, server start and `initialize` included.
    #[serde(default = "default_tool_timeout_ms")]
    pub timeout_ms: u64,
}

pub fn default_tool_timeout_ms() -> u64 {
    30_000
}

/// The tool's declared interface: seed 002's field → type maps, and the
/// JSON Schemas derived from them that calls are validated against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolInterface {
    /// Field → `string`, `number`, `integer`, `boolean`, `object` or
    /// `array` (a trailing `?` marks an optional field).
    pub input_format: BTreeMap<String, String>,
    pub output_format: BTreeMap<String, String>,
    /// JSON Schema of the input (an object, no extra fields).
    pub input_schema: serde_json::Value,
    /// JSON Schema of the output.
    pub output_schema: serde_json::Value,
}

/// Where something was defined: a path relative to the source folder,
/// `/`-separated, and a 1-based line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SourceRef {
    pub file: String,
    pub line: u32,
}

impl AgencyModel {
    /// Every agency of the tree, this one first, then sub-agencies depth first.
    pub fn agencies(&self) -> Vec<&AgencyModel> {
        let mut out = vec![self];
        for s in &self.sub_agencies {
            out.extend(s.agencies());
        }
        out
    }

    /// Every agent of the tree with the agency it belongs to.
    pub fn all_agents(&self) -> Vec<(&AgencyModel, &Agent)> {
        self.agencies()
            .into_iter()
            .flat_map(|a| a.agents.iter().map(move |g| (a, g)))
            .collect()
    }

    /// Every tool of the tree.
    pub fn all_tools(&self) -> Vec<&Tool> {
        self.agencies()
            .into_iter()
            .flat_map(|a| a.tools.iter())
            .collect()
    }

    /// The executive agent of this agency.
    pub fn executive(&self) -> Option<&Agent> {
        self.agents.iter().find(|a| a.name == self.executive_agent)
    }
}
