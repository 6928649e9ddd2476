//! Lessons and their history (`lessons` with its full-text index over
//! title, trigger and advice; `lesson_log`).

use agency_core::{HandlerId, LessonId};
use tokio_postgres::Row;

use crate::PgTx;
use crate::convert::*;
use crate::fts::tsquery;
use agency_store::error::StoreError;
use agency_store::lessons::{JudgeCheckRow, LessonFilter, LessonLogRow, LessonRow, LessonState};
use agency_store::tx::LessonTx;

const COLS: &str = "l.id, l.pipeline, l.key, l.title, l.scope_kind, l.scope, l.trigger_text, \
                    l.advice, l.counterexample, l.state, l.reason, l.version, l.recalled, \
                    l.used, l.helpful, l.harmful, l.created_at, l.updated_at";

fn lesson_row(r: &Row) -> R<LessonRow> {
    let state: String = col(r, 9, "lesson state")?;
    Ok(LessonRow {
        id: col_id(r, 0, "lesson id")?,
        pipeline: col(r, 1, "lesson pipeline")?,
        key: col(r, 2, "lesson key")?,
        title: col(r, 3, "lesson title")?,
        scope_kind: col(r, 4, "lesson scope kind")?,
        scope: col(r, 5, "lesson scope")?,
        trigger: col(r, 6, "lesson trigger")?,
        advice: col(r, 7, "lesson advice")?,
        counterexample: col(r, 8, "lesson counterexample")?,
        state: LessonState::parse(&state)
            .ok_or_else(|| StoreError::corrupt("lesson state", state))?,
        reason: col(r, 10, "lesson reason")?,
        version: col(r, 11, "lesson version")?,
        recalled: col(r, 12, "lesson recalled")?,
        used: col(r, 13, "lesson used")?,
        helpful: col(r, 14, "lesson helpful")?,
        harmful: col(r, 15, "lesson harmful")?,
        created_at: col_ts(r, 16, "lesson created_at")?,
        updated_at: col_ts(r, 17, "lesson updated_at")?,
    })
}

const LOG_COLS: &str = "seq, lesson, action, run, version, detail, at";

fn log_row(r: &Row) -> R<LessonLogRow> {
    Ok(LessonLogRow {
        seq: col(r, 0, "lesson log seq")?,
        lesson: col_id(r, 1, "lesson log lesson")?,
        action: col(r, 2, "lesson log action")?,
        run: col_opt_id(r, 3, "lesson log run")?,
        version: col(r, 4, "lesson log version")?,
        detail: col(r, 5, "lesson log detail")?,
        at: col_ts(r, 6, "lesson log at")?,
    })
}

impl LessonTx for PgTx<'_> {
    fn insert_lesson(&mut self, l: &LessonRow) -> R<()> {
        execute(
            self.conn,
            "INSERT INTO lessons (id, pipeline, key, title, scope_kind, scope, trigger_text, \
             advice, counterexample, state, reason, version, recalled, used, helpful, harmful, \
             created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)",
            &[
                &l.id.to_string(),
                &l.pipeline,
                &l.key,
                &l.title,
                &l.scope_kind,
                &l.scope,
                &l.trigger,
                &l.advice,
                &l.counterexample,
                &l.state.as_str(),
                &l.reason,
                &l.version,
                &l.recalled,
                &l.used,
                &l.helpful,
                &l.harmful,
                &l.created_at.0,
                &l.updated_at.0,
            ],
            || format!("add lesson {} of pipeline {}", l.id, l.pipeline),
        )?;
        Ok(())
    }

    fn update_lesson(&mut self, l: &LessonRow) -> R<()> {
        let changed = execute(
            self.conn,
            "UPDATE lessons SET pipeline = $2, key = $3, title = $4, scope_kind = $5, scope = $6, \
             trigger_text = $7, advice = $8, counterexample = $9, state = $10, reason = $11, \
             version = $12, recalled = $13, used = $14, helpful = $15, harmful = $16, \
             created_at = $17, updated_at = $18 WHERE id = $1",
            &[
                &l.id.to_string(),
                &l.pipeline,
                &l.key,
                &l.title,
                &l.scope_kind,
                &l.scope,
                &l.trigger,
                &l.advice,
                &l.counterexample,
                &l.state.as_str(),
                &l.reason,
                &l.version,
                &l.recalled,
                &l.used,
                &l.helpful,
                &l.harmful,
                &l.created_at.0,
                &l.updated_at.0,
            ],
            || format!("update lesson {}", l.id),
        )?;
        require_row(changed, || format!("update lesson {}", l.id))
    }

    fn lesson(&mut self, id: LessonId) -> R<Option<LessonRow>> {
        query_opt(
            self.conn,
            &format!("SELECT {COLS} FROM lessons l WHERE l.id = $1"),
            &[&id.to_string()],
            || format!("read lesson {id}"),
            lesson_row,
        )
    }

    fn lesson_by_key(&mut self, pipeline: &str, key: &str) -> R<Option<LessonRow>> {
        query_opt(
            self.conn,
            &format!("SELECT {COLS} FROM lessons l WHERE l.pipeline = $1 AND l.key = $2"),
            &[&pipeline, &key],
            || format!("find the lesson {key:?} of pipeline {pipeline}"),
            lesson_row,
        )
    }

    fn lessons(&mut self, filter: &LessonFilter, n: usize) -> R<Vec<LessonRow>> {
        let states: Vec<&str> = filter.states.iter().map(|s| s.as_str()).collect();
        query_rows(
            self.conn,
            &format!(
                "SELECT {COLS} FROM lessons l \
                 WHERE ($1::TEXT IS NULL OR l.pipeline = $1) \
                   AND (cardinality($2::TEXT[]) = 0 OR l.state = ANY($2)) \
                 ORDER BY l.updated_at DESC, l.id LIMIT $3"
            ),
            &[&filter.pipeline, &states, &limit(n)],
            || "list lessons".to_owned(),
            lesson_row,
        )
    }

    fn search_lessons(
        &mut self,
        pipeline: &str,
        words: &[String],
        n: usize,
    ) -> R<Vec<(LessonRow, f64)>> {
        let Some(q) = tsquery(words) else {
            return Ok(Vec::new());
        };
        query_rows(
            self.conn,
            &format!(
                "SELECT {COLS}, ts_rank(l.fts, q)::FLOAT8 AS rank \
                 FROM lessons l, to_tsquery('english', $1) q \
                 WHERE l.fts @@ q AND l.pipeline = $2 AND l.state = 'admitted' \
                 ORDER BY rank DESC, l.id LIMIT $3"
            ),
            &[&q, &pipeline, &limit(n)],
            || format!("search the lessons of pipeline {pipeline}"),
            |r| Ok((lesson_row(r)?, col(r, 18, "lesson score")?)),
        )
    }

    fn append_lesson_log(&mut self, e: &LessonLogRow) -> R<i64> {
        query_value(
            self.conn,
            "INSERT INTO lesson_log (lesson, action, run, version, detail, at) \
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING seq",
            &[
                &e.lesson.to_string(),
                &e.action,
                &opt_text(e.run),
                &e.version,
                &e.detail,
                &e.at.0,
            ],
            || format!("add {} to the history of lesson {}", e.action, e.lesson),
        )
    }

    fn lesson_log(&mut self, lesson: LessonId, n: usize) -> R<Vec<LessonLogRow>> {
        let mut rows = query_rows(
            self.conn,
            &format!(
                "SELECT {LOG_COLS} FROM lesson_log WHERE lesson = $1 ORDER BY seq DESC LIMIT $2"
            ),
            &[&lesson.to_string(), &limit(n)],
            || format!("read the history of lesson {lesson}"),
            log_row,
        )?;
        rows.reverse();
        Ok(rows)
    }

    fn lesson_log_of_run(&mut self, run: HandlerId, action: &str) -> R<Vec<LessonLogRow>> {
        query_rows(
            self.conn,
            &format!(
                "SELECT {LOG_COLS} FROM lesson_log WHERE run = $1 AND action = $2 ORDER BY seq"
            ),
            &[&run.to_string(), &action],
            || format!("list the lessons {action} by run {run}"),
            log_row,
        )
    }

    fn judge_check(
        &mut self,
        pipeline: &str,
        rubric: &str,
        grader: &str,
    ) -> R<Option<JudgeCheckRow>> {
        query_opt(
            self.conn,
            &format!(
                "SELECT {CHECK_COLS} FROM judge_checks \
                 WHERE pipeline = $1 AND rubric = $2 AND grader = $3"
            ),
            &[&pipeline, &rubric, &grader],
            || format!("read the judge check of {rubric} by {grader}"),
            check_row,
        )
    }

    fn put_judge_check(&mut self, c: &JudgeCheckRow) -> R<()> {
        execute(
            self.conn,
            "INSERT INTO judge_checks (pipeline, rubric, grader, state, detail, at) \
             VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (pipeline, rubric, grader) DO UPDATE SET \
             state = excluded.state, detail = excluded.detail, at = excluded.at",
            &[
                &c.pipeline,
                &c.rubric,
                &c.grader,
                &c.state,
                &c.detail,
                &c.at.0,
            ],
            || format!("record the judge check of {} by {}", c.rubric, c.grader),
        )?;
        Ok(())
    }

    fn judge_checks(&mut self, n: usize) -> R<Vec<JudgeCheckRow>> {
        query_rows(
            self.conn,
            &format!(
                "SELECT {CHECK_COLS} FROM judge_checks ORDER BY at DESC, pipeline, rubric, grader LIMIT $1"
            ),
            &[&limit(n)],
            || "list judge checks".to_owned(),
            check_row,
        )
    }
}

const CHECK_COLS: &str = "pipeline, rubric, grader, state, detail, at";

fn check_row(r: &Row) -> R<JudgeCheckRow> {
    Ok(JudgeCheckRow {
        pipeline: col(r, 0, "judge check pipeline")?,
        rubric: col(r, 1, "judge check rubric")?,
        grader: col(r, 2, "judge check grader")?,
        state: col(r, 3, "judge check state")?,
        detail: col(r, 4, "judge check detail")?,
        at: col_ts(r, 5, "judge check at")?,
    })
}
