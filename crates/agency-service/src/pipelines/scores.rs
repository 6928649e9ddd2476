//! A pipeline's score trend: the Gatekeeper's scorecard of each recent
//! run that ended, newest first, as the dashboard draws it. The scorecard
//! is read back from the run's stored artifacts (the first one holding a
//! `scorecard`, as the learning loop reads it: [`super::judge::judged`]).

use agency_api::PipelineScore;
use agency_core::Principal;
use agency_store::{PipelineRunRow, Tx};
use serde_json::Value;

use super::{MAX_RUNS_LISTED, judge, require_user};
use crate::Result;
use crate::error::ServiceError;
use crate::service::Service;

/// Most scored runs one trend holds.
pub(crate) const MAX_SCORES: usize = 200;

impl Service {
    /// The user reads the scorecards of the newest runs that ended (of
    /// `pipeline`, or of every pipeline), newest first: at most `limit`
    /// (default and bound: 200), found among the newest
    /// [`MAX_RUNS_LISTED`](crate::pipelines::MAX_RUNS_LISTED) runs. A run
    /// no stage scored is left out.
    pub fn pipeline_scores(
        &self,
        who: Principal,
        pipeline: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Vec<PipelineScore>> {
        let n = limit.unwrap_or(MAX_SCORES).min(MAX_SCORES);
        self.read(|tx| {
            require_user(tx, who, "read pipeline scores")?;
            let mut out = Vec::new();
            for r in tx.pipeline_runs(false, MAX_RUNS_LISTED)? {
                if out.len() >= n {
                    break;
                }
                if r.status.is_unfinished() || pipeline.is_some_and(|p| p != r.pipeline) {
                    continue;
                }
                if let Some(s) = self.score_of(tx, &r)? {
                    out.push(s);
                }
            }
            Ok(out)
        })
    }

    /// The judged scorecard of run `r`, from the first of its stored
    /// artifacts that holds one.
    fn score_of(&self, tx: &mut dyn Tx, r: &PipelineRunRow) -> Result<Option<PipelineScore>> {
        for s in tx.pipeline_stages(r.id)? {
            let Some(file) = s.artifact else { continue };
            let Some(f) = tx.file(file)? else { continue };
            let Some(v) = tx.version(file, f.latest_version)? else {
                continue;
            };
            let value: Value = serde_json::from_slice(&self.blobs.get(&v.hash)?).map_err(|e| {
                ServiceError::from(agency_store::StoreError::corrupt(
                    "pipeline run",
                    format!("run {}: the artifact of stage {}: {e}", r.id, s.name),
                ))
            })?;
            let Some(j) = judge::judged(&[(s.name, value)]) else {
                continue;
            };
            return Ok(Some(PipelineScore {
                run: r.id,
                pipeline: r.pipeline.clone(),
                status: r.status,
                created_at: r.created_at,
                ended_at: r.ended_at,
                total: j.total,
                correctness: j.score("correctness"),
                verification: j.score("verification"),
                safety: j.score("safety"),
                clarity: j.score("clarity"),
                autonomy: j.score("autonomy"),
                correctness_pass: j.correctness_pass,
                safety_pass: j.safety_pass,
            }));
        }
        Ok(None)
    }
}
