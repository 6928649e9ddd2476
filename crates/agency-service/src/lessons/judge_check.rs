//! Judge checks as the store keeps them: a scoring stage's rubric and
//! grader, checked against its pipeline's anchors (`passed`), flagged for
//! the user when the anchors' scores moved (`flagged`), or accepted by the
//! user's approval (`accepted`). The daemon's runner re-scores the anchors
//! and asks the user; the service records what was found.

use agency_api::EventKind;
use agency_store::JudgeCheckRow;
use serde_json::{Value, json};

use crate::Result;
use crate::event_log::Record;
use crate::service::System;

/// A judge check's states.
pub const PASSED: &str = "passed";
pub const FLAGGED: &str = "flagged";
pub const ACCEPTED: &str = "accepted";
/// The shipped anchors do not fit the pipeline (an edited copy): nothing
/// was checked.
pub const SKIPPED: &str = "skipped";

impl System {
    /// Daemon: the check of `rubric` by `grader` for `pipeline`, if made.
    pub fn judge_check(
        &self,
        pipeline: &str,
        rubric: &str,
        grader: &str,
    ) -> Result<Option<JudgeCheckRow>> {
        self.read(|tx| Ok(tx.judge_check(pipeline, rubric, grader)?))
    }

    /// Daemon: record a judge check (`state`: passed, flagged, accepted)
    /// with its anchors' scores, and log it.
    pub fn judge_check_record(
        &self,
        pipeline: &str,
        rubric: &str,
        grader: &str,
        state: &str,
        detail: Value,
    ) -> Result<()> {
        self.write(|op| {
            op.tx.put_judge_check(&JudgeCheckRow {
                pipeline: pipeline.to_owned(),
                rubric: rubric.to_owned(),
                grader: grader.to_owned(),
                state: state.to_owned(),
                detail: detail.to_string(),
                at: op.now,
            })?;
            let what = match state {
                PASSED => "scored the anchors within tolerance",
                FLAGGED => "moved the anchors' scores beyond tolerance: it waits for the user",
                SKIPPED => "was not checked: the shipped anchors do not fit this pipeline",
                _ => "was accepted by the user",
            };
            op.record(
                Record::new(
                    EventKind::JudgeChecked,
                    None,
                    format!("pipeline {pipeline}: rubric {rubric} graded by {grader} {what}"),
                )
                .data(
                    json!({"pipeline": pipeline, "rubric": rubric, "grader": grader,
                             "state": state, "detail": detail}),
                ),
            );
            Ok(())
        })
    }
}
