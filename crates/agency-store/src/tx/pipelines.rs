//! [`PipelineTx`]: pipeline runs and their stages (issue 31).

use agency_core::HandlerId;

use super::R;
use crate::pipelines::{PipelineRunRow, PipelineStageRow};

/// Pipeline runs and their stages.
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
}
