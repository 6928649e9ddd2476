//! Rows of lessons a pipeline learned (migration 30): a lesson's current
//! version, and its log (proposals with their runs, recalls, helpful and
//! harmful marks, state changes). Which proposal is admitted, and when a
//! lesson retires, is the service's rule (`agency-service`'s
//! `pipelines/learning`); these are plain rows.

pub use agency_core::status::LessonState;
use agency_core::{HandlerId, LessonId, Timestamp};

/// A lesson as its current version says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LessonRow {
    pub id: LessonId,
    pub pipeline: String,
    /// Its title normalised: a later proposal with the same key is
    /// evidence for it (or an edit of it).
    pub key: String,
    pub title: String,
    /// What it applies to: `pipeline`, `stage`, `organisation`, `handler`,
    /// `tool_policy` or `permission`.
    pub scope_kind: String,
    /// The name within its kind (a pipeline's, a stage's, …).
    pub scope: String,
    /// When it applies.
    pub trigger: String,
    pub advice: String,
    pub counterexample: Option<String>,
    pub state: LessonState,
    /// Why it is rejected, retired or rolled back.
    pub reason: Option<String>,
    /// The version of its KB file holding this content.
    pub version: i64,
    /// Runs that recalled it.
    pub recalled: i64,
    /// Recalling runs that were scored.
    pub used: i64,
    pub helpful: i64,
    pub harmful: i64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
}

/// One entry of a lesson's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LessonLogRow {
    /// Assigned by the store; 0 in an entry not stored yet.
    pub seq: i64,
    pub lesson: LessonId,
    /// `proposed`, `recalled`, `helpful`, `harmful`, `admitted`, …
    pub action: String,
    /// The run it came from, if any.
    pub run: Option<HandlerId>,
    /// The lesson's version when it happened.
    pub version: i64,
    /// The entry's fields as JSON (the service's shape).
    pub detail: String,
    pub at: Timestamp,
}

/// A scoring stage's rubric and grader as checked against its pipeline's
/// anchors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JudgeCheckRow {
    pub pipeline: String,
    pub rubric: String,
    pub grader: String,
    /// `passed`, `flagged` (waits for the user) or `accepted`.
    pub state: String,
    /// The anchors' scores and what moved, as JSON.
    pub detail: String,
    pub at: Timestamp,
}

/// Which lessons a listing returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LessonFilter {
    pub pipeline: Option<String>,
    /// Empty: every state.
    pub states: Vec<LessonState>,
}
