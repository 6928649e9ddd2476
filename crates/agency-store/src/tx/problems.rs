//! [`ProblemTx`]: episodes of stuck signals: opened once per key, seen
//! again, closed.

use agency_core::Timestamp;

use super::R;
use crate::problems::ProblemRow;

/// Problems Agency found.
pub trait ProblemTx {
    /// Open an episode (its `id` is ignored); `Ok(None)` and nothing
    /// inserted when one with the same key is open: that one's `seen_at`
    /// moves to `p.seen_at` instead.
    fn open_problem(&mut self, p: &ProblemRow) -> R<Option<i64>>;
    /// Close an open episode; false when it was not open.
    fn close_problem(&mut self, id: i64, at: Timestamp) -> R<bool>;
    /// The open episodes, oldest first, at most `limit`.
    fn open_problems(&mut self, limit: usize) -> R<Vec<ProblemRow>>;
    /// Every episode, newest first, at most `limit`.
    fn recent_problems(&mut self, limit: usize) -> R<Vec<ProblemRow>>;
}
