//! The stage engine of pipelines (DESIGN.md §7 "Typed work"):
//! runs one stage of a compiled [`agency_org::pipeline::PipelineModel`] to
//! a terminal state. No store and no terminal I/O: the daemon's runner
//! gives it the context and a model client and stores what it reports.
//!
//! - [`validate`]: a stage's output contract (JSON Schema 2020-12 with
//!   formats, stamped fields, checks); the only door to an [`Artifact`].
//! - [`repair`](mod@repair): the lenient parse of a model's text.
//! - [`template`](mod@template): an llm stage's prompt over the pipeline [`Context`].
//! - [`client`]: the model seam ([`ModelClient`], [`CallError`]), clock,
//!   sleeper and backoff.
//! - [`ladder`]: the one retry ladder per stage, with one counter.
//! - [`wire`]: the Anthropic and OpenAI bodies of a structured call.
//! - [`gateway`]: the [`ModelClient`] over the daemon's model gateway.
//! - [`code`]: the built-in steps of `code` stages.
//! - [`tool_runner`]: ToolRunner's commands, mock and live (in the sandbox,
//!   within the run's workspace).
//! - `agent_stage`: an `agent` stage, a typed call to an organisation agent.
//! - [`runner`]: the daemon's driver of runs, over the service.
//!
//! Invariant: no value becomes an [`Artifact`] (what is stored and what a
//! later stage reads) without passing its stage's contract.

mod agent_stage;
pub mod client;
pub mod code;
pub mod gateway;
pub mod ladder;
pub mod repair;
pub mod runner;
pub mod template;
pub mod tool_runner;
pub mod validate;
pub mod wire;

pub use gateway::{GatewayError, GatewayModel, Upstream};
pub use ladder::{
    Attempt, AttemptKind, Backoff, BoxFuture, CallError, Clock, LadderError, Message, ModelAnswer,
    ModelClient, Role, Sleeper, StageDeps, StageReport, StageStatus, StructuredRequest,
    SystemClock, TokioSleeper, Totals, run_llm_stage,
};
pub use repair::{Repaired, repair};
pub use template::{Context, TemplateError, render};
pub use validate::{Artifact, ContractError, Issue, Issues, OutputContract, Stamps};
pub use wire::WireApi;
