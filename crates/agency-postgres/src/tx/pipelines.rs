//! [`PipelineTx`] on PostgreSQL.
#![allow(unused_variables)]

use agency_core::HandlerId;
use agency_store::pipelines::{LibraryEntryRow, LibraryKind, PipelineRunRow, PipelineStageRow};
use agency_store::tx::PipelineTx;
use agency_store::tx::R;

use crate::PgTx;
use crate::convert::unported;

impl PipelineTx for PgTx<'_> {
    fn insert_pipeline_run(&mut self, run: &PipelineRunRow) -> R<()> {
        Err(unported("insert_pipeline_run"))
    }
    fn pipeline_run(&mut self, id: HandlerId) -> R<Option<PipelineRunRow>> {
        Err(unported("pipeline_run"))
    }
    fn update_pipeline_run(&mut self, run: &PipelineRunRow) -> R<()> {
        Err(unported("update_pipeline_run"))
    }
    fn pipeline_runs(&mut self, unfinished: bool, n: usize) -> R<Vec<PipelineRunRow>> {
        Err(unported("pipeline_runs"))
    }
    fn insert_pipeline_stage(&mut self, stage: &PipelineStageRow) -> R<()> {
        Err(unported("insert_pipeline_stage"))
    }
    fn update_pipeline_stage(&mut self, stage: &PipelineStageRow) -> R<()> {
        Err(unported("update_pipeline_stage"))
    }
    fn pipeline_stages(&mut self, run: HandlerId) -> R<Vec<PipelineStageRow>> {
        Err(unported("pipeline_stages"))
    }
    fn insert_library_entry(&mut self, e: &LibraryEntryRow) -> R<i64> {
        Err(unported("insert_library_entry"))
    }
    fn search_library(
        &mut self,
        pipeline: &str,
        kind: LibraryKind,
        words: &[String],
        min_score: Option<i64>,
        n: usize,
    ) -> R<Vec<(LibraryEntryRow, f64)>> {
        Err(unported("search_library"))
    }
    fn library_entries(
        &mut self,
        pipeline: &str,
        kind: LibraryKind,
        n: usize,
    ) -> R<Vec<LibraryEntryRow>> {
        Err(unported("library_entries"))
    }
}
