//! Pipeline runs on the wire: what `agency pipeline runs|show
//! --json` prints and `/v1/pipelines/…` answers.

use agency_core::status::{PipelineRunStatus, StageStatus};
use agency_core::{FileId, HandlerId, OutcomeId, Timestamp};
use serde::{Deserialize, Serialize};

/// One run, without its stages (`agency pipeline runs`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PipelineRunSummary {
    /// The run's id: its handler, whose root outcome is the run.
    pub id: HandlerId,
    pub pipeline: String,
    pub status: PipelineRunStatus,
    /// The stage it is at (0-based; the stage count once done).
    pub stage: i64,
    /// That stage's name, while the run is unfinished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage_name: Option<String>,
    pub stages: i64,
    /// Permission level (0-3) the run started at.
    pub level: i64,
    pub live_tools: bool,
    pub created_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Timestamp>,
}

/// One run with every stage (`agency pipeline show`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PipelineRunView {
    #[serde(flatten)]
    pub run: PipelineRunSummary,
    /// The input the run was started with.
    pub input: serde_json::Value,
    pub stages_detail: Vec<PipelineStageView>,
    /// What the run did to its pipeline's lessons, oldest first: lessons
    /// it recalled, proposed, marked helpful or harmful, and the replays
    /// its evidence started (with their calls and cost).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub learning: Vec<RunLessonEvent>,
}

/// One thing a run did to a lesson (`agency pipeline show`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunLessonEvent {
    pub lesson: agency_core::LessonId,
    pub title: String,
    /// `recalled`, `proposed`, `edit_proposed`, `helpful`, `harmful`,
    /// `replay_started`, `replayed`, `admitted`, `rejected`, …
    pub action: String,
    pub at: Timestamp,
    pub detail: serde_json::Value,
}

/// One stage of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PipelineStageView {
    pub idx: i64,
    pub name: String,
    /// `llm`, `agent` or `code`.
    pub kind: String,
    pub outcome: OutcomeId,
    pub status: StageStatus,
    /// Model calls made (transport retries included).
    pub attempts: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_micro_usd: i64,
    /// The KB file holding the validated artifact (`agency kb cat`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<FileId>,
    /// Why the stage ended as it did, for a stage that failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Timestamp>,
}

/// One scored run of a pipeline, for its score trend: the Gatekeeper's
/// scorecard of a run that ended `done` (the dashboard's Lessons page).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PipelineScore {
    /// The run's id.
    pub run: HandlerId,
    pub pipeline: String,
    pub status: PipelineRunStatus,
    pub created_at: Timestamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Timestamp>,
    /// The five scores' sum (0-25).
    pub total: i64,
    /// Each 0-5.
    pub correctness: i64,
    pub verification: i64,
    pub safety: i64,
    pub clarity: i64,
    pub autonomy: i64,
    /// Correctness and Safety each need 3 to pass; a failure of either
    /// blocks promotion whatever the total.
    pub correctness_pass: bool,
    pub safety_pass: bool,
}
