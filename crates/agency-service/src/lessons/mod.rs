//! Lessons a pipeline learns (seed 001's learning loop, under control):
//! Learners propose changes to a pipeline's lesson set; code admits a
//! lesson only on evidence (it recurs, contradicts no admitted lesson of
//! its scope, passes the replay gate; a tool-policy or permission lesson
//! also needs the user), the Retriever recalls admitted lessons quoted as
//! reference with their provenance, each scored run marks the lessons it
//! recalled helpful or harmful, and a lesson that hurts more than it
//! helps retires. Every lesson is a versioned KB file; the user lists,
//! approves, rejects, retires and rolls lessons back (`api.rs`).

pub mod admission;
mod api;
pub mod judge_check;
pub(crate) mod learn;
pub mod proposal;
mod record;
pub mod replay;

pub use learn::MIN_USES_TO_RETIRE;
pub use replay::{Frozen, ReplayJob, ReplayResult, ReplayScores};
