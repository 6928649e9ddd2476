//! [`LessonTx`]: lessons a pipeline learned and their history.

use agency_core::{HandlerId, LessonId};

use super::R;
use crate::lessons::{JudgeCheckRow, LessonFilter, LessonLogRow, LessonRow};

/// Lessons and their history.
pub trait LessonTx {
    fn insert_lesson(&mut self, l: &LessonRow) -> R<()>;
    /// Replace a lesson's row (matched by id; a missing row is an error).
    fn update_lesson(&mut self, l: &LessonRow) -> R<()>;
    fn lesson(&mut self, id: LessonId) -> R<Option<LessonRow>>;
    /// The lesson of `pipeline` whose normalised title is `key`.
    fn lesson_by_key(&mut self, pipeline: &str, key: &str) -> R<Option<LessonRow>>;
    /// Lessons matching `filter`, most recently changed first (ties by id),
    /// at most `n`.
    fn lessons(&mut self, filter: &LessonFilter, n: usize) -> R<Vec<LessonRow>>;
    /// Full-text search of `pipeline`'s admitted lessons for any of
    /// `words` (title, trigger and advice): (lesson, score) best first, at
    /// most `n`; the score is BM25 negated (higher is better). Words
    /// without a letter or digit are dropped; none left, nothing found.
    fn search_lessons(
        &mut self,
        pipeline: &str,
        words: &[String],
        n: usize,
    ) -> R<Vec<(LessonRow, f64)>>;
    /// Add to a lesson's history; returns the entry's `seq`.
    fn append_lesson_log(&mut self, e: &LessonLogRow) -> R<i64>;
    /// A lesson's history, oldest first, at most `n` (the newest `n`).
    fn lesson_log(&mut self, lesson: LessonId, n: usize) -> R<Vec<LessonLogRow>>;
    /// The entries with `action` that run `run` made, oldest first.
    fn lesson_log_of_run(&mut self, run: HandlerId, action: &str) -> R<Vec<LessonLogRow>>;
    /// The check of `rubric` and `grader` for `pipeline`, if one was made.
    fn judge_check(
        &mut self,
        pipeline: &str,
        rubric: &str,
        grader: &str,
    ) -> R<Option<JudgeCheckRow>>;
    /// Record a judge check (replacing the one of its pipeline, rubric
    /// and grader).
    fn put_judge_check(&mut self, c: &JudgeCheckRow) -> R<()>;
    /// Judge checks, newest first, at most `n`.
    fn judge_checks(&mut self, n: usize) -> R<Vec<JudgeCheckRow>>;
}
