//! A deterministic, scripted LLM API server for tests and the offline demo.
//!
//! The real agent runtimes (Agency's built-in loop and the real Claude Code
//! CLI) talk to it over HTTP, so tests exercise the whole client path. It
//! speaks both APIs the runtimes use:
//!
//! - **Anthropic Messages**: `POST /v1/messages` (`?beta=true` too), JSON or
//!   SSE (`stream: true`); `POST /v1/messages/count_tokens`; `GET`/`HEAD /`
//!   answer 200 for clients that probe first.
//! - **OpenAI-compatible chat completions**: `POST /v1/chat/completions`
//!   (also `/chat/completions`), JSON or `data:` chunks ending in
//!   `data: [DONE]`, with a usage chunk when `stream_options.include_usage`.
//!
//! `POST /v1/embeddings` (also `/embeddings`) answers OpenAI-compatible
//! embeddings, deterministic hashed bags of words ([`embeddings`]).
//!
//! `GET /v1/models` lists one model, `scripted`; `GET /_agency/requests`
//! returns the [`RecordedRequest`] log as JSON for tests driving a server in
//! another process.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use agency_testkit::{ModelServer, Script};
//! let script = Script::from_json(r#"{"scenarios": [], "fallback": {"text": "hi"}}"#)?;
//! let server = ModelServer::start(script).await?;
//! // ANTHROPIC_BASE_URL = server.base_url(); OpenAI base = base_url + "/v1"
//! let log = server.requests();
//! server.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! # Script format
//!
//! ```json
//! {
//!   "scenarios": [
//!     {
//!       "name": "root handler",
//!       "match": { "system_contains": "Help the user accomplish" },
//!       "turns": [
//!         { "tool_calls": [ { "name": "mail_inbox", "input": {} } ] },
//!         { "error": { "status": 429, "message": "slow down", "times": 2, "retry_after_seconds": 1 } },
//!         { "tool_calls": [ { "name": "outcome_create", "input": { "title": "Guide written", "parents": ["{{system:Outcome ([0-9a-f-]{36})}}"] } } ] },
//!         { "tool_calls": [ { "name": "delegate", "input": { "outcome": "{{result:/outcome}}" } } ] },
//!         { "text": "Done for now." }
//!       ],
//!       "after_last": { "text": "Nothing more to do." }
//!     }
//!   ],
//!   "fallback": { "text": "Nothing scripted for this conversation; stopping." }
//! }
//! ```
//!
//! Unknown fields are errors (typos fail loudly); an optional `"comment"`
//! is accepted and ignored on the script, a scenario and a turn.
//!
//! **Choosing the scenario.** A request plays the *first* scenario whose
//! `match` holds; every condition given must hold, and a missing or empty
//! `match` matches everything:
//! - `system_contains`: a substring of the system prompt (Anthropic: the
//!   `system` string, or its text blocks joined by `\n`; OpenAI: the
//!   `system` and `developer` messages joined by `\n`);
//! - `user_contains`: a substring of the first user message (its text
//!   blocks joined by `\n`);
//! - `handler`: a UUID that appears in the system prompt (any case).
//!
//! No scenario matches → the `fallback` turn answers (at every position);
//! without a fallback the server answers HTTP 400 saying so.
//!
//! **Choosing the turn** is stateless: the turn to play is the number of
//! assistant messages already in the request's conversation (its
//! *position*), so a retried request gets the same answer. Past the last
//! turn the scenario's `after_last` answers, or else the text
//! `end of script (scenario "NAME")` with stop reason `end_turn`.
//!
//! **Turns.** Exactly one of:
//! - `{"text": "..."}`: a final answer (stop reason `end_turn` / `stop`);
//! - `{"tool_calls": [{"name": "...", "input": {...}}], "text": "..."}`:
//!   tool calls (stop reason `tool_use` / `tool_calls`), with optional text
//!   before them; `input` is an object and defaults to `{}`;
//! - `{"error": {"status": 400..=599, "message": "...", "times": N,
//!   "retry_after_seconds": S}}`: the first `N` (default 1) requests that
//!   reach this turn answer that HTTP error (with a `retry-after` header
//!   when `S` is given), then the *next* turn in the list answers at the
//!   same position: error turns take no position of their own. Counts are
//!   kept in server memory per scenario, turn and conversation (a hash of
//!   its system prompt and first user message), so parallel conversations
//!   each see their own errors. `after_last` and `fallback` cannot be
//!   error turns.
//!
//! **Tool names.** A scripted name the client did not offer but which it
//! offered as `mcp__SERVER__NAME` (Claude Code's spelling of MCP tools) is
//! answered with that spelling, so one script serves both runtimes.
//!
//! **Placeholders** in `text` and in any string inside `input`:
//! - `{{result:/json/pointer}}`: the value at that JSON pointer (empty =
//!   the whole value) in the most recent tool result of the conversation;
//!   `{{result[2]:/ptr}}` is the second most recent (1 = most recent). The
//!   tool result's text (text blocks joined by `\n`) is read as JSON, or as
//!   a JSON string if it is not JSON; Claude Code's wrapper
//!   `{"result": "<text>"}` is looked through first (then the literal
//!   reading is tried).
//! - `{{system:REGEX}}`: the first capture group of REGEX in the system
//!   prompt; `{{user:REGEX}}` likewise in the first user message.
//!
//! A string value is inserted raw, anything else as compact JSON; a string
//! that is exactly one placeholder whose value is not a string becomes that
//! JSON value (`"{{result:/ids}}"` can yield an array). `{{` always opens a
//! placeholder (there is no escape); it ends at the last two `}` of the
//! first run of two or more `}`, so a regex may end in a quantifier:
//! `{{system:(a)b{2}}}` is the regex `(a)b{2}`. An unresolvable placeholder
//! makes the server answer HTTP 400 (not retried by clients) with a message
//! naming the scenario, the turn (1-based in the list) and the
//! placeholder. Syntax errors and regexes without a capture group are load
//! errors.
//!
//! **Usage numbers** are deterministic: input tokens = characters of the
//! system prompt and messages / 4, output tokens = characters of the text,
//! tool names and tool-input JSON / 4, each at least 1.
//!
//! **Ids** are derived from the conversation and position (`msg_…`,
//! `toolu_…`, `chatcmpl-…`, `call_…`): unique across a conversation, equal
//! on retries.
//!
//! # Streaming shapes
//!
//! Anthropic: `message_start` (with `usage.input_tokens`), then per content
//! block `content_block_start` / `content_block_delta` (`text_delta`, or
//! `input_json_delta` with the tool input split into at least two
//! `partial_json` pieces) / `content_block_stop`, then `message_delta`
//! (`stop_reason`, `usage.output_tokens`) and `message_stop`; each event an
//! `event:` line, a `data:` line and a blank line, sent as its own chunk.
//! No `ping` events.
//!
//! OpenAI: a first chunk with `delta.role = "assistant"`, text in
//! `delta.content` pieces, per tool call a chunk with its `index`, `id`,
//! `type` and `function.name` (empty `arguments`) followed by argument
//! pieces, a chunk with an empty delta and `finish_reason`, the usage chunk
//! (`choices: []`) if asked for, and `data: [DONE]`.

mod anthropic;
pub mod embeddings;
mod engine;
#[cfg(test)]
mod fuzz;
mod openai;
pub mod sandbox;
mod script;
mod server;
mod template;
mod weather;

pub use script::{Script, ScriptError};
pub use server::{Api, ModelServer, RecordedRequest, RecordedToolCall, serve};
pub use weather::WeatherServer;
