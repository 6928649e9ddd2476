//! [`LessonTx`] on PostgreSQL.
#![allow(unused_variables)]

use agency_core::{HandlerId, LessonId};
use agency_store::lessons::{JudgeCheckRow, LessonFilter, LessonLogRow, LessonRow};
use agency_store::tx::LessonTx;
use agency_store::tx::R;

use crate::PgTx;
use crate::convert::unported;

impl LessonTx for PgTx<'_> {
    fn insert_lesson(&mut self, l: &LessonRow) -> R<()> {
        Err(unported("insert_lesson"))
    }
    fn update_lesson(&mut self, l: &LessonRow) -> R<()> {
        Err(unported("update_lesson"))
    }
    fn lesson(&mut self, id: LessonId) -> R<Option<LessonRow>> {
        Err(unported("lesson"))
    }
    fn lesson_by_key(&mut self, pipeline: &str, key: &str) -> R<Option<LessonRow>> {
        Err(unported("lesson_by_key"))
    }
    fn lessons(&mut self, filter: &LessonFilter, n: usize) -> R<Vec<LessonRow>> {
        Err(unported("lessons"))
    }
    fn search_lessons(
        &mut self,
        pipeline: &str,
        words: &[String],
        n: usize,
    ) -> R<Vec<(LessonRow, f64)>> {
        Err(unported("search_lessons"))
    }
    fn append_lesson_log(&mut self, e: &LessonLogRow) -> R<i64> {
        Err(unported("append_lesson_log"))
    }
    fn lesson_log(&mut self, lesson: LessonId, n: usize) -> R<Vec<LessonLogRow>> {
        Err(unported("lesson_log"))
    }
    fn lesson_log_of_run(&mut self, run: HandlerId, action: &str) -> R<Vec<LessonLogRow>> {
        Err(unported("lesson_log_of_run"))
    }
    fn judge_check(
        &mut self,
        pipeline: &str,
        rubric: &str,
        grader: &str,
    ) -> R<Option<JudgeCheckRow>> {
        Err(unported("judge_check"))
    }
    fn put_judge_check(&mut self, c: &JudgeCheckRow) -> R<()> {
        Err(unported("put_judge_check"))
    }
    fn judge_checks(&mut self, n: usize) -> R<Vec<JudgeCheckRow>> {
        Err(unported("judge_checks"))
    }
}
