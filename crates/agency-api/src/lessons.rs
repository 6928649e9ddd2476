//! Lessons on the wire: what `agency lessons … --json` prints and
//! `/v1/lessons…` answers.

use agency_core::status::LessonState;
use agency_core::{HandlerId, LessonId, Timestamp};
use serde::{Deserialize, Serialize};

/// What a lesson applies to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LessonScope {
    /// `pipeline`, `stage`, `organisation`, `handler`, `tool_policy` or
    /// `permission`.
    pub kind: String,
    pub name: String,
}

/// How a lesson has fared in the runs that recalled it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LessonCounters {
    /// Runs that recalled it.
    pub recalled: i64,
    /// Recalling runs that were scored.
    pub used: i64,
    /// Scored runs that passed Correctness and Safety.
    pub helpful: i64,
    /// Scored runs that failed Correctness or Safety.
    pub harmful: i64,
}

/// One lesson as its current version says (`agency lessons`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LessonView {
    pub id: LessonId,
    pub pipeline: String,
    pub title: String,
    pub scope: LessonScope,
    /// When it applies.
    pub trigger: String,
    pub advice: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counterexample: Option<String>,
    pub state: LessonState,
    /// Why it is rejected, retired or rolled back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The version of its KB file (`agency kb cat <id>`) this is.
    pub version: i64,
    pub counters: LessonCounters,
    /// The runs whose Learners proposed it, oldest first.
    pub supporting_runs: Vec<HandlerId>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// One entry of a lesson's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LessonEvent {
    pub at: Timestamp,
    /// `proposed`, `recalled`, `helpful`, `harmful`, `admitted`,
    /// `rejected`, `retired`, `rolled_back`, `approved`, `edited`, …
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<HandlerId>,
    /// The lesson's version when it happened.
    pub version: i64,
    /// What else is known (reasons, scores, the proposal's words).
    pub detail: serde_json::Value,
}

/// One stored version of a lesson (its KB file's content).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LessonVersion {
    pub version: i64,
    pub at: Timestamp,
    pub content: serde_json::Value,
}

/// A lesson with its history, evidence and versions
/// (`agency lessons show`, `export`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LessonDetail {
    #[serde(flatten)]
    pub lesson: LessonView,
    pub history: Vec<LessonEvent>,
    pub versions: Vec<LessonVersion>,
}

/// Every lesson of a pipeline (or all), for keeping or moving elsewhere.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LessonsExport {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<String>,
    pub exported_at: Timestamp,
    pub lessons: Vec<LessonDetail>,
}
