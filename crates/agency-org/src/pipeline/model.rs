//! The Pipeline Model: the compiled, checked form of a `.pipeline` source,
//! what a pipeline run stores when it starts (so a run finishes with the
//! pipeline it started with, whatever happens to the file) and what the
//! stage engine (`agency-pipeline`) executes.
//!
//! Field names are camelCase like the Agency Model's. The model is
//! deterministic: the same source gives the same bytes. Stages are in
//! source order, which is the order they run in.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::model::SourceRef;

/// The format version written in `version`.
pub const PIPELINE_VERSION: &str = "agency-pipeline/1";

/// Default of [`RetryPolicy::repair_attempts`].
pub const DEFAULT_REPAIR_ATTEMPTS: u32 = 2;

/// Most re-asks a stage may declare: each is a billed call.
pub const MAX_REPAIR_ATTEMPTS: u32 = 5;

/// The context entry the engine fills from the pipeline's library, which
/// any stage may read like `input`: the earlier runs most like this one
/// and what their Gatekeepers asked to improve.
pub const HISTORY: &str = "history";

/// Most earlier runs in a stage's `history`.
pub const HISTORY_RUNS: usize = 5;

/// Most improvements in a stage's `history`.
pub const HISTORY_IMPROVEMENTS: usize = 10;

/// The schema of [`HISTORY`], which reads of it are checked against.
pub fn history_schema() -> Value {
    let strings = serde_json::json!({"type": "array", "items": {"type": "string"}});
    serde_json::json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["runs", "improvements"],
        "properties": {
            "runs": {
                "description": "earlier finished runs of this pipeline most like this one (by the words they share), best first",
                "type": "array",
                "maxItems": HISTORY_RUNS,
                "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["id", "summary", "keywords", "totalScore", "decision", "improvements"],
                    "properties": {
                        "id": {"type": "string", "description": "the run's id"},
                        "summary": {"type": "string"},
                        "keywords": strings,
                        "totalScore": {"type": ["integer", "null"]},
                        "decision": {"type": ["string", "null"]},
                        "improvements": strings,
                    }
                }
            },
            "improvements": {
                "description": "what the Gatekeepers of this pipeline's latest runs asked to improve, newest first",
                "type": "array",
                "maxItems": HISTORY_IMPROVEMENTS,
                "items": {"type": "string"}
            }
        }
    })
}

/// A compiled pipeline: an input and ordered stages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PipelineModel {
    /// Always [`PIPELINE_VERSION`].
    pub version: String,
    /// Unique among the pipelines a daemon knows; the name `agency
    /// pipeline run NAME` takes.
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// The JSON Schema of the run's input (AgencyCore: a string). The
    /// input is readable by every stage as `input`.
    pub input_schema: Value,
    pub stages: Vec<StageModel>,
    /// Where the pipeline was defined.
    pub source: SourceRef,
    /// BLAKE3 of the source bytes: identifies what a run was started with.
    pub source_hash: String,
}

/// One stage: what it runs, what it reads and the contract of its output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StageModel {
    /// Unique in the pipeline; how later stages name its output
    /// (`Observer.keywords`).
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub kind: StageKind,
    /// What the stage reads, each an earlier stage's output or a field of
    /// it (`Observer`, `CruxFinder.subProblems`), or `input`. The compiler
    /// checked that each exists by the time the stage runs.
    #[serde(default)]
    pub reads: Vec<ReadPath>,
    /// The JSON Schema (draft 2020-12) every artifact of the stage
    /// validates against before it is stored; the compiler checked that it
    /// compiles and describes an object.
    pub output_schema: Value,
    /// Top-level fields of the output the engine sets itself, after the
    /// model answered and before validation, so that no answer can choose
    /// them (AgencyCore: `agent` and `timestamp`).
    #[serde(default)]
    pub stamped: Vec<StampedField>,
    /// Checks beyond JSON Schema, run after it.
    #[serde(default)]
    pub checks: Vec<Check>,
    #[serde(default)]
    pub retry: RetryPolicy,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<StageBudget>,
    /// The output holds a plan whose items become outcomes of the run
    /// (AgencyCore's Planner: its tasks, dependencies as edges). Absent
    /// from models stored before it existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcomes: Option<OutcomesSpec>,
    /// Where the stage was declared.
    pub source: SourceRef,
}

/// What a stage runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", tag = "type", deny_unknown_fields)]
pub enum StageKind {
    /// One structured model call through the gateway.
    Llm {
        /// The `[models.NAME]` upstream; `None`: the daemon's default.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model: Option<String>,
        /// The system prompt (the stage's role), plain text.
        #[serde(default)]
        system: String,
        /// The user message, a template over the pipeline context:
        /// `{{input}}`, `{{Stage}}` (its whole output as JSON),
        /// `{{Stage.field.sub}}`; every placeholder is one of `reads`.
        prompt: String,
    },
    /// A typed call of an agent's verb.
    Agent { agent: String, verb: String },
    /// A built-in deterministic step, by name (`retriever`,
    /// `safety_guard`, `tool_runner`).
    Code { step: String },
}

/// A path into the pipeline context: `input`, `Stage` or `Stage.a.b`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReadPath {
    /// `input` or a stage's name.
    pub stage: String,
    /// Field names below it, outermost first; empty: the whole output.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<String>,
}

/// A field the engine sets on every output of the stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", tag = "kind", deny_unknown_fields)]
pub enum StampedField {
    /// `field` = the given constant (AgencyCore's literal `agent`).
    Const { field: String, value: Value },
    /// `field` = the time the attempt's answer arrived, RFC 3339 UTC.
    Timestamp { field: String },
    /// `field` = the run's permission level (0-3) as the store holds it
    /// (AgencyCore Learner's `currentLevel`): an answer cannot raise it.
    Level { field: String },
    /// `field` = the ids of the earlier runs in the stage's `history`
    /// (AgencyCore PatternObserver's `similarPastTasks`): runs the store
    /// found, never ids an answer invented.
    SimilarRuns { field: String },
    /// `field` = the answer's own `actions` (each an object with `type`
    /// and a `command` or `path`) that the permission system refuses, one
    /// line each (AgencyCore Implementor's `blocked`): gated by the
    /// engine, never the answer's say.
    BlockedActions { field: String },
    /// `field` = the run's facts as the stage read them (`facts`, computed
    /// by the engine from the store): stored with the scorecard they
    /// judge, so the scorecard can be checked and re-computed from it.
    Facts { field: String },
    /// `field` = the rubric the stage judges under
    /// ([`super::caps::rubric_of`]: the stage's name and a hash of its
    /// prompts, output schema, checks and the caps' rules).
    Rubric { field: String },
    /// `field` = the model that answered (`UPSTREAM/MODEL` of
    /// `[models.UPSTREAM]`): the grader of a judging stage. llm stages only.
    Grader { field: String },
}

/// A rule JSON Schema cannot say.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", tag = "check", deny_unknown_fields)]
pub enum Check {
    /// The number at `total` equals the sum of the numbers in the object
    /// at `of` (AgencyCore's `totalScore` = the scorecard's sum).
    Sum { total: String, of: String },
    /// The scorecard at `scorecard` obeys the run's facts stored in the
    /// field `facts` (stamped `facts`): each dimension the facts limit is
    /// capped by the engine once the answer validated, the number at
    /// `total` summed again, the booleans `approved` and
    /// `promoteToPortfolio` of the object at `decision` forced false when
    /// Correctness or Safety fails, and what changed written to the
    /// top-level `capped` ([`super::caps`]).
    Facts {
        facts: String,
        scorecard: String,
        total: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        decision: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        capped: Option<String>,
    },
}

/// Where a stage's output lists a plan: an array of items, each with an
/// id, a title and the ids it depends on. The output contract checks the
/// plan is a DAG ([`super::outcomes::check_plan`]); when the stage ends
/// ok each item becomes an outcome under the stage's, and "B depends on
/// A" the edge B→A (A is a child of B: what B needs done first).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutcomesSpec {
    /// The output's field holding the items (`tasks`), dotted below the
    /// output's top level; an array of objects.
    pub items: String,
    /// Each item's unique id (a required string property).
    pub id: String,
    /// Each item's title (a required string property), the outcome's title.
    pub title: String,
    /// Each item's description (a string property), the start of the
    /// outcome's description; the item's other fields follow it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Each item's dependencies: the ids of the items it needs done
    /// first (an array of strings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depends: Option<String>,
}

/// The stage's one retry ladder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RetryPolicy {
    /// Re-asks after an answer that does not validate, each carrying only
    /// the latest failure's errors. At most [`MAX_REPAIR_ATTEMPTS`].
    pub repair_attempts: u32,
    /// One more attempt on this stronger `[models.NAME]` when the
    /// re-asks are spent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalate_model: Option<String>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            repair_attempts: DEFAULT_REPAIR_ATTEMPTS,
            escalate_model: None,
        }
    }
}

/// Limits of one stage, all attempts together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StageBudget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens_per_call: Option<u64>,
    /// How long an agent stage waits for the callee's answer, counted
    /// from when its call was sent (a restart does not reset it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
}
