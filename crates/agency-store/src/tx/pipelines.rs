//! [`PipelineTx`]: pipeline runs, their stages and pipelines' libraries.

use agency_core::HandlerId;

use super::R;
use crate::pipelines::{LibraryEntryRow, LibraryKind, PipelineRunRow, PipelineStageRow};

/// Pipeline runs, their stages and pipelines' libraries.
pub trait PipelineTx {
    fn insert_pipeline_run(&mut self, run: &PipelineRunRow) -> R<()>;
    fn pipeline_run(&mut self, id: HandlerId) -> R<Option<PipelineRunRow>>;
    /// Replace a run's row (matched by id; a missing row is an error).
    fn update_pipeline_run(&mut self, run: &PipelineRunRow) -> R<()>;
    /// Up to `n` runs, newest first (ties by id); with `unfinished`, only
    /// those `running`, `waiting` or `paused`.
    fn pipeline_runs(&mut self, unfinished: bool, n: usize) -> R<Vec<PipelineRunRow>>;
    fn insert_pipeline_stage(&mut self, stage: &PipelineStageRow) -> R<()>;
    /// Replace a stage's row (matched by run and index).
    fn update_pipeline_stage(&mut self, stage: &PipelineStageRow) -> R<()>;
    /// A run's stages in pipeline order.
    fn pipeline_stages(&mut self, run: HandlerId) -> R<Vec<PipelineStageRow>>;
    /// Add an entry to a pipeline's library; returns its `seq`. A second
    /// entry of one kind for one run is an error.
    fn insert_library_entry(&mut self, e: &LibraryEntryRow) -> R<i64>;
    /// Full-text search of `pipeline`'s entries of `kind` for any of
    /// `words`: (entry, score) best first, at most `n`; the score is BM25
    /// negated (higher is better), so entries sharing more (and rarer)
    /// words with the query rank higher. `min_score`: only entries whose
    /// own `score` is at least it. Words without a letter or digit are
    /// dropped; none left, nothing found.
    fn search_library(
        &mut self,
        pipeline: &str,
        kind: LibraryKind,
        words: &[String],
        min_score: Option<i64>,
        n: usize,
    ) -> R<Vec<(LibraryEntryRow, f64)>>;
    /// `pipeline`'s entries of `kind`, newest first, at most `n`.
    fn library_entries(
        &mut self,
        pipeline: &str,
        kind: LibraryKind,
        n: usize,
    ) -> R<Vec<LibraryEntryRow>>;
}
