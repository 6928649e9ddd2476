//! Pipeline runs, their stages and pipelines' libraries (`pipeline_runs`,
//! `pipeline_stages`, `pipeline_library` with its full-text index).

use agency_core::HandlerId;
use tokio_postgres::Row;

use crate::PgTx;
use crate::convert::*;
use crate::fts::tsquery;
use agency_store::error::StoreError;
use agency_store::pipelines::{
    LibraryEntryRow, LibraryKind, PipelineRunRow, PipelineRunStatus, PipelineStageRow, StageStatus,
};
use agency_store::tx::PipelineTx;

const RUN_COLS: &str = "id, pipeline, model, input, level, live_tools, status, stage, \
                        created_at, updated_at, ended_at";

fn run_row(r: &Row) -> R<PipelineRunRow> {
    let status: String = col(r, 6, "pipeline run status")?;
    Ok(PipelineRunRow {
        id: col_id(r, 0, "pipeline run id")?,
        pipeline: col(r, 1, "pipeline run pipeline")?,
        model: col(r, 2, "pipeline run model")?,
        input: col(r, 3, "pipeline run input")?,
        level: col(r, 4, "pipeline run level")?,
        live_tools: col(r, 5, "pipeline run live_tools")?,
        status: PipelineRunStatus::parse(&status)
            .ok_or_else(|| StoreError::corrupt("pipeline run status", status))?,
        stage: col(r, 7, "pipeline run stage")?,
        created_at: col_ts(r, 8, "pipeline run created_at")?,
        updated_at: col_ts(r, 9, "pipeline run updated_at")?,
        ended_at: col_opt_ts(r, 10, "pipeline run ended_at")?,
    })
}

const STAGE_COLS: &str = "run, idx, name, outcome, status, attempts, input_tokens, \
                          output_tokens, cost_micro_usd, artifact, report, started_at, ended_at";

fn stage_row(r: &Row) -> R<PipelineStageRow> {
    let status: String = col(r, 4, "pipeline stage status")?;
    Ok(PipelineStageRow {
        run: col_id(r, 0, "pipeline stage run")?,
        idx: col(r, 1, "pipeline stage index")?,
        name: col(r, 2, "pipeline stage name")?,
        outcome: col_id(r, 3, "pipeline stage outcome")?,
        status: StageStatus::parse(&status)
            .ok_or_else(|| StoreError::corrupt("pipeline stage status", status))?,
        attempts: col(r, 5, "pipeline stage attempts")?,
        input_tokens: col(r, 6, "pipeline stage input tokens")?,
        output_tokens: col(r, 7, "pipeline stage output tokens")?,
        cost_micro_usd: col(r, 8, "pipeline stage cost")?,
        artifact: col_opt_id(r, 9, "pipeline stage artifact")?,
        report: col(r, 10, "pipeline stage report")?,
        started_at: col_opt_ts(r, 11, "pipeline stage started_at")?,
        ended_at: col_opt_ts(r, 12, "pipeline stage ended_at")?,
    })
}

impl PipelineTx for PgTx<'_> {
    fn insert_pipeline_run(&mut self, p: &PipelineRunRow) -> R<()> {
        execute(
            self.conn,
            &format!(
                "INSERT INTO pipeline_runs ({RUN_COLS}) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
            ),
            &[
                &p.id.to_string(),
                &p.pipeline,
                &p.model,
                &p.input,
                &p.level,
                &flag(p.live_tools),
                &p.status.as_str(),
                &p.stage,
                &p.created_at.0,
                &p.updated_at.0,
                &p.ended_at.map(|t| t.0),
            ],
            || format!("insert pipeline run {} of {}", p.id, p.pipeline),
        )
        .map(drop)
    }

    fn pipeline_run(&mut self, id: HandlerId) -> R<Option<PipelineRunRow>> {
        query_opt(
            self.conn,
            &format!("SELECT {RUN_COLS} FROM pipeline_runs WHERE id = $1"),
            &[&id.to_string()],
            || format!("read pipeline run {id}"),
            run_row,
        )
    }

    fn update_pipeline_run(&mut self, p: &PipelineRunRow) -> R<()> {
        let changed = execute(
            self.conn,
            "UPDATE pipeline_runs SET status = $2, stage = $3, updated_at = $4, ended_at = $5, \
             level = $6, live_tools = $7 WHERE id = $1",
            &[
                &p.id.to_string(),
                &p.status.as_str(),
                &p.stage,
                &p.updated_at.0,
                &p.ended_at.map(|t| t.0),
                &p.level,
                &flag(p.live_tools),
            ],
            || format!("update pipeline run {}", p.id),
        )?;
        require_row(changed, || format!("update pipeline run {}", p.id))
    }

    fn pipeline_runs(&mut self, unfinished: bool, n: usize) -> R<Vec<PipelineRunRow>> {
        let filter = if unfinished {
            "WHERE status IN ('running', 'waiting', 'paused')"
        } else {
            ""
        };
        query_rows(
            self.conn,
            &format!(
                "SELECT {RUN_COLS} FROM pipeline_runs {filter} \
                 ORDER BY created_at DESC, id DESC LIMIT $1"
            ),
            &[&limit(n)],
            || "list pipeline runs".to_owned(),
            run_row,
        )
    }

    fn insert_pipeline_stage(&mut self, s: &PipelineStageRow) -> R<()> {
        execute(
            self.conn,
            &format!(
                "INSERT INTO pipeline_stages ({STAGE_COLS}) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)"
            ),
            &[
                &s.run.to_string(),
                &s.idx,
                &s.name,
                &s.outcome.to_string(),
                &s.status.as_str(),
                &s.attempts,
                &s.input_tokens,
                &s.output_tokens,
                &s.cost_micro_usd,
                &opt_text(s.artifact),
                &s.report,
                &s.started_at.map(|t| t.0),
                &s.ended_at.map(|t| t.0),
            ],
            || format!("insert stage {} of pipeline run {}", s.idx, s.run),
        )
        .map(drop)
    }

    fn update_pipeline_stage(&mut self, s: &PipelineStageRow) -> R<()> {
        let changed = execute(
            self.conn,
            "UPDATE pipeline_stages SET status = $3, attempts = $4, input_tokens = $5, \
             output_tokens = $6, cost_micro_usd = $7, artifact = $8, report = $9, \
             started_at = $10, ended_at = $11 WHERE run = $1 AND idx = $2",
            &[
                &s.run.to_string(),
                &s.idx,
                &s.status.as_str(),
                &s.attempts,
                &s.input_tokens,
                &s.output_tokens,
                &s.cost_micro_usd,
                &opt_text(s.artifact),
                &s.report,
                &s.started_at.map(|t| t.0),
                &s.ended_at.map(|t| t.0),
            ],
            || format!("update stage {} of pipeline run {}", s.idx, s.run),
        )?;
        require_row(changed, || {
            format!("update stage {} of pipeline run {}", s.idx, s.run)
        })
    }

    fn pipeline_stages(&mut self, run: HandlerId) -> R<Vec<PipelineStageRow>> {
        query_rows(
            self.conn,
            &format!("SELECT {STAGE_COLS} FROM pipeline_stages WHERE run = $1 ORDER BY idx"),
            &[&run.to_string()],
            || format!("list the stages of pipeline run {run}"),
            stage_row,
        )
    }

    fn insert_library_entry(&mut self, e: &LibraryEntryRow) -> R<i64> {
        let op = || {
            format!(
                "add a {} to the library of pipeline {}",
                e.kind.as_str(),
                e.pipeline
            )
        };
        query_value(
            self.conn,
            &format!(
                "INSERT INTO pipeline_library ({LIB_INSERT_COLS}) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING seq"
            ),
            &[
                &e.pipeline,
                &e.kind.as_str(),
                &opt_text(e.run),
                &e.title,
                &e.text,
                &e.score,
                &e.data,
                &e.created_at.0,
            ],
            op,
        )
    }

    fn search_library(
        &mut self,
        pipeline: &str,
        kind: LibraryKind,
        words: &[String],
        min_score: Option<i64>,
        n: usize,
    ) -> R<Vec<(LibraryEntryRow, f64)>> {
        let Some(q) = tsquery(words) else {
            return Ok(Vec::new());
        };
        query_rows(
            self.conn,
            &format!(
                "SELECT {LIB_COLS}, ts_rank(l.fts, q)::FLOAT8 AS rank
                 FROM pipeline_library l, to_tsquery('english', $1) q
                 WHERE l.fts @@ q AND l.pipeline = $2 AND l.kind = $3
                   AND ($4::BIGINT IS NULL OR l.score >= $4)
                 ORDER BY rank DESC, l.seq DESC LIMIT $5"
            ),
            &[&q, &pipeline, &kind.as_str(), &min_score, &limit(n)],
            || format!("search the library of pipeline {pipeline}"),
            |r| Ok((library_row(r)?, col(r, 9, "library score")?)),
        )
    }

    fn library_entries(
        &mut self,
        pipeline: &str,
        kind: LibraryKind,
        n: usize,
    ) -> R<Vec<LibraryEntryRow>> {
        query_rows(
            self.conn,
            &format!(
                "SELECT {LIB_COLS} FROM pipeline_library l WHERE l.pipeline = $1 AND l.kind = $2 \
                 ORDER BY l.created_at DESC, l.seq DESC LIMIT $3"
            ),
            &[&pipeline, &kind.as_str(), &limit(n)],
            || format!("list the library of pipeline {pipeline}"),
            library_row,
        )
    }
}

const LIB_INSERT_COLS: &str = "pipeline, kind, run, title, text, score, data, created_at";
const LIB_COLS: &str =
    "l.seq, l.pipeline, l.kind, l.run, l.title, l.text, l.score, l.data, l.created_at";

fn library_row(r: &Row) -> R<LibraryEntryRow> {
    let kind: String = col(r, 2, "library entry kind")?;
    Ok(LibraryEntryRow {
        seq: col(r, 0, "library entry seq")?,
        pipeline: col(r, 1, "library entry pipeline")?,
        kind: LibraryKind::parse(&kind)
            .ok_or_else(|| StoreError::corrupt("library entry kind", kind))?,
        run: col_opt_id(r, 3, "library entry run")?,
        title: col(r, 4, "library entry title")?,
        text: col(r, 5, "library entry text")?,
        score: col(r, 6, "library entry score")?,
        data: col(r, 7, "library entry data")?,
        created_at: col_ts(r, 8, "library entry created_at")?,
    })
}
