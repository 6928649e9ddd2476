//! Rows of pipeline runs (migration 27): a run, which is a
//! handler whose root outcome is the run, and its stages, each with a child
//! outcome and, once it succeeded, its artifact as a KB file. What a stage
//! may store (only a validated artifact) is the service's rule
//! (`agency-service`'s `pipelines/`); these are plain rows.

pub use agency_core::status::{PipelineRunStatus, StageStatus};
use agency_core::{FileId, HandlerId, OutcomeId, Timestamp};

/// One pipeline run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineRunRow {
    /// The run's handler; its root outcome (same id) is the run.
    pub id: HandlerId,
    /// The pipeline's name.
    pub pipeline: String,
    /// The compiled pipeline (Pipeline Model JSON) as the run started:
    /// the run finishes with it whatever happens to the source.
    pub model: String,
    /// The run's input, as JSON.
    pub input: String,
    /// The permission level the run was started at (0-3).
    pub level: i64,
    /// Whether ToolRunner may execute commands (live) or only records them
    /// (mock, the default).
    pub live_tools: bool,
    pub status: PipelineRunStatus,
    /// The index of the stage the run is at (the stage count once done).
    pub stage: i64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub ended_at: Option<Timestamp>,
}

/// One stage of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineStageRow {
    pub run: HandlerId,
    /// Its position in the pipeline, from 0.
    pub idx: i64,
    pub name: String,
    /// The stage's outcome, a child of the run's.
    pub outcome: OutcomeId,
    pub status: StageStatus,
    /// Model calls made for the stage (every attempt, transport retries
    /// included).
    pub attempts: i64,
    pub input_tokens: i64,
    pub output_tokens: i64,
    pub cost_micro_usd: i64,
    /// The KB file holding the validated artifact.
    pub artifact: Option<FileId>,
    /// What the engine reported about the stage (attempts, the raw
    /// answers kept for diagnosis, the last errors), as JSON.
    pub report: Option<String>,
    pub started_at: Option<Timestamp>,
    pub ended_at: Option<Timestamp>,
}

/// What a pipeline's library entry is (seed 001's memory system).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LibraryKind {
    /// A finished run, with its Gatekeeper score: the portfolio.
    Example,
    Lesson,
    Playbook,
}

impl LibraryKind {
    pub fn as_str(self) -> &'static str {
        match self {
            LibraryKind::Example => "example",
            LibraryKind::Lesson => "lesson",
            LibraryKind::Playbook => "playbook",
        }
    }

    pub fn parse(s: &str) -> Option<LibraryKind> {
        Some(match s {
            "example" => LibraryKind::Example,
            "lesson" => LibraryKind::Lesson,
            "playbook" => LibraryKind::Playbook,
            _ => return None,
        })
    }
}

/// One entry of a pipeline's library: what the Retriever recalls and the
/// PatternObserver compares a new run with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibraryEntryRow {
    /// Assigned by the store; 0 in an entry not stored yet.
    pub seq: i64,
    pub pipeline: String,
    pub kind: LibraryKind,
    /// The run it came from (an example's run; at most one per run and kind).
    pub run: Option<HandlerId>,
    pub title: String,
    /// What the full-text index finds it by.
    pub text: String,
    /// An example's Gatekeeper score.
    pub score: Option<i64>,
    /// The entry's fields as JSON (the service's shape).
    pub data: String,
    pub created_at: Timestamp,
}
